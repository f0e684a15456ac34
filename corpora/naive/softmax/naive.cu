// Row softmax as it is usually first written: one thread per row, three passes
// (maximum, sum of exponentials, output), scalar loads.
#include <cuda_runtime.h>

__global__ void softmax_naive(float* out, const float* inp, int N, int C)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= N)
        return;
    const float* x = inp + (size_t)row * C;
    float* y = out + (size_t)row * C;
    float maxval = -INFINITY;
    for (int j = 0; j < C; j++)
        maxval = fmaxf(maxval, x[j]);
    float sum = 0.0f;
    for (int j = 0; j < C; j++)
        sum += expf(x[j] - maxval);
    for (int j = 0; j < C; j++)
        y[j] = expf(x[j] - maxval) / sum;
}

void softmax_forward(float* out, const float* inp, int N, int C)
{
    const int block_size = 128;
    const int grid_size = (N + block_size - 1) / block_size;
    softmax_naive<<<grid_size, block_size>>>(out, inp, N, C);
}
