// SiLU-and-mul (SwiGLU) as it is usually first written: one output element per
// thread over the flattened T x D output; the input row holds the gate, then the up half.
//   out[t, d] = silu(inp[t, d]) * inp[t, D + d]
#include <cuda_runtime.h>

__global__ void silu_and_mul_naive(float* out, const float* inp, int T, int D)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < T * D) {
        int t = idx / D;
        int d = idx % D;
        float g = inp[(size_t)t * 2 * D + d];
        float u = inp[(size_t)t * 2 * D + D + d];
        out[idx] = g / (1.0f + expf(-g)) * u;
    }
}

void silu_and_mul(float* out, const float* inp, int T, int D)
{
    const int block_size = 256;
    const int grid_size = (T * D + block_size - 1) / block_size;
    silu_and_mul_naive<<<grid_size, block_size>>>(out, inp, T, D);
}
