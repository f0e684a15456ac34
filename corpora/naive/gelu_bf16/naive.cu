// GELU (tanh approximation) on bf16 as it is usually first written: one element per
// thread, a 2-byte load and store each.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define GELU_SCALING_FACTOR sqrtf(2.0f / M_PI)

__global__ void gelu_bf16_naive(__nv_bfloat16* out, const __nv_bfloat16* inp, int N)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        float x = __bfloat162float(inp[i]);
        float cube = 0.044715f * x * x * x;
        out[i] = __float2bfloat16(0.5f * x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x + cube))));
    }
}

void gelu_forward(__nv_bfloat16* out, const __nv_bfloat16* inp, int N)
{
    const int block_size = 128;
    const int grid_size = (N + block_size - 1) / block_size;
    gelu_bf16_naive<<<grid_size, block_size>>>(out, inp, N);
}
