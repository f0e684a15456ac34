// Row softmax, one thread per row (the naive version): max, sum of exponentials, scale.
// The block size comes from a header; the grid is computed in a local.

#include <cmath>
#include <cuda_runtime.h>
#include "launch_params.h"

__global__ void softmax_rows(float *out, const float *inp, int N, int C)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= N)
        return;
    const float *x = inp + (size_t)row * C;
    float maxval = -INFINITY;
    for (int j = 0; j < C; j++)
        maxval = fmaxf(maxval, x[j]);
    float sum = 0.0f;
    for (int j = 0; j < C; j++)
        sum += expf(x[j] - maxval);
    for (int j = 0; j < C; j++)
        out[(size_t)row * C + j] = expf(x[j] - maxval) / sum;
}

#ifndef SOFTMAX_ROWS_BLOCK_X
#define SOFTMAX_ROWS_BLOCK_X 64
#endif
void softmax_forward(float *out, const float *inp, int N, int C)
{
    int num_blocks = (N + SOFTMAX_ROWS_BLOCK_X - 1) / SOFTMAX_ROWS_BLOCK_X;
    softmax_rows<<<num_blocks, SOFTMAX_ROWS_BLOCK_X>>>(out, inp, N, C);
}
