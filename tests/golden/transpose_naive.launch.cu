// Naive transpose: out (cols x rows) = in (rows x cols)^T, one element per thread.

#include <cuda_runtime.h>

__global__ void transpose_naive(float *out, const float *in, int rows, int cols)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < cols && y < rows)
        out[x * rows + y] = in[y * cols + x];
}

#ifndef TRANSPOSE_NAIVE_BLOCK_X
#define TRANSPOSE_NAIVE_BLOCK_X 32
#endif
#ifndef TRANSPOSE_NAIVE_BLOCK_Y
#define TRANSPOSE_NAIVE_BLOCK_Y 8
#endif
void transpose(float *out, const float *in, int rows, int cols)
{
    dim3 grid((cols + TRANSPOSE_NAIVE_BLOCK_X - 1) / TRANSPOSE_NAIVE_BLOCK_X, (rows + TRANSPOSE_NAIVE_BLOCK_Y - 1) / TRANSPOSE_NAIVE_BLOCK_Y);
    transpose_naive<<<grid, dim3(TRANSPOSE_NAIVE_BLOCK_X, TRANSPOSE_NAIVE_BLOCK_Y)>>>(out, in, rows, cols);
}
