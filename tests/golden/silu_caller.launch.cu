// SiLU-and-mul, one element per thread; the launcher takes its block size from its caller.

#include <cuda_runtime.h>

__global__ void silu_mul(float *out, const float *gate, const float *up, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

#ifndef SILU_MUL_BLOCK_X
#define SILU_MUL_BLOCK_X 512
#endif
static void launch_silu_mul(float *out, const float *gate, const float *up, int n, int block_size)
{
    int blocks = (n + block_size - 1) / block_size;
    silu_mul<<<blocks, block_size>>>(out, gate, up, n);
}

void silu_and_mul(float *out, const float *gate, const float *up, int n)
{
    launch_silu_mul(out, gate, up, n, SILU_MUL_BLOCK_X);
}
