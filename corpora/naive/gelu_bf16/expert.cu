// GELU (tanh approximation) on bf16 as a performance engineer writes it (a yardstick,
// never an input to a pass): eight elements per thread through one 16-byte load and
// store (four __nv_bfloat162 pairs), the scalar tail by the thread of the last vector.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define GELU_SCALING_FACTOR sqrtf(2.0f / M_PI)

__device__ __forceinline__ float gelu(float x)
{
    float cube = 0.044715f * x * x * x;
    return 0.5f * x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x + cube)));
}

__global__ void __launch_bounds__(256) gelu_bf16_expert(__nv_bfloat16* __restrict__ out,
                                                        const __nv_bfloat16* __restrict__ inp, int N)
{
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = 8 * v;
    if (i + 7 < N) {
        uint4 packed = reinterpret_cast<const uint4*>(inp)[v];
        __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&packed);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 f = __bfloat1622float2(pairs[k]);
            pairs[k] = __floats2bfloat162_rn(gelu(f.x), gelu(f.y));
        }
        reinterpret_cast<uint4*>(out)[v] = packed;
    } else {
        for (int j = i; j < N; j++)
            out[j] = __float2bfloat16(gelu(__bfloat162float(inp[j])));
    }
}

void gelu_forward(__nv_bfloat16* out, const __nv_bfloat16* inp, int N)
{
    const int block_size = 256;
    const int vectors = (N + 7) / 8;
    gelu_bf16_expert<<<(vectors + block_size - 1) / block_size, block_size>>>(out, inp, N);
}
