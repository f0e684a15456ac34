// GELU (tanh approximation) as a performance engineer writes it (a yardstick, never an
// input to a pass): four elements per thread through one 16-byte load and store, the
// scalar tail handled by the thread that owns the last partial vector.
#include <cuda_runtime.h>

#define GELU_SCALING_FACTOR sqrtf(2.0f / M_PI)

__device__ __forceinline__ float gelu(float x)
{
    float cube = 0.044715f * x * x * x;
    return 0.5f * x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x + cube)));
}

__global__ void __launch_bounds__(256) gelu_f32_expert(float* __restrict__ out, const float* __restrict__ inp, int N)
{
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = 4 * v;
    if (i + 3 < N) {
        const float4 x = reinterpret_cast<const float4*>(inp)[v];
        reinterpret_cast<float4*>(out)[v] = make_float4(gelu(x.x), gelu(x.y), gelu(x.z), gelu(x.w));
    } else {
        for (int j = i; j < N; j++)
            out[j] = gelu(inp[j]);
    }
}

void gelu_forward(float* out, const float* inp, int N)
{
    const int block_size = 256;
    const int vectors = (N + 3) / 4;
    gelu_f32_expert<<<(vectors + block_size - 1) / block_size, block_size>>>(out, inp, N);
}
