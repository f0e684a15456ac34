// Layer norm backward, the weight and bias gradients, as they are usually first written:
// one thread per channel walks every row (every token of the batch), normalises the input
// with the row's saved mean and reciprocal deviation and accumulates, then adds its sums
// to the gradients (gradients accumulate over micro-batches).
//   dweight[c] += sum_n dout[n, c] * (inp[n, c] - mean[n]) * rstd[n]
//   dbias[c]   += sum_n dout[n, c]
#include <cuda_runtime.h>

__global__ void layernorm_wgrad_naive(float* dweight, float* dbias, const float* dout, const float* inp,
                                      const float* mean, const float* rstd, int N, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) {
        float dw = 0.0f;
        float db = 0.0f;
        for (int n = 0; n < N; n++) {
            const float d = dout[(size_t)n * C + c];
            const float xhat = (inp[(size_t)n * C + c] - mean[n]) * rstd[n];
            dw += d * xhat;
            db += d;
        }
        dweight[c] += dw;
        dbias[c] += db;
    }
}

void layernorm_backward_weights(float* dweight, float* dbias, const float* dout, const float* inp,
                                const float* mean, const float* rstd, int N, int C)
{
    const int block_size = 128;
    const int grid_size = (C + block_size - 1) / block_size;
    layernorm_wgrad_naive<<<grid_size, block_size>>>(dweight, dbias, dout, inp, mean, rstd, N, C);
}
