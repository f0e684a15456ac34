// Bias gradient (column sums of dout) as it is usually first written: one thread per
// column, a loop over all rows.
//   dbias[c] = sum_r dout[r, c]
#include <cuda_runtime.h>

__global__ void bias_grad_naive(float* dbias, const float* dout, int N, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) {
        float sum = 0.0f;
        for (int r = 0; r < N; r++)
            sum += dout[(size_t)r * C + c];
        dbias[c] = sum;
    }
}

void bias_backward(float* dbias, const float* dout, int N, int C)
{
    const int block_size = 128;
    const int grid_size = (C + block_size - 1) / block_size;
    bias_grad_naive<<<grid_size, block_size>>>(dbias, dout, N, C);
}
