// Matrix transpose as it is usually first written: one element per thread, coalesced
// reads and strided writes.
//   out[j, i] = in[i, j];  in is rows x cols
#include <cuda_runtime.h>

__global__ void transpose_naive(float* out, const float* in, int rows, int cols)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < rows && j < cols)
        out[(size_t)j * rows + i] = in[(size_t)i * cols + j];
}

void transpose(float* out, const float* in, int rows, int cols)
{
    dim3 block(16, 16);
    dim3 grid((cols + block.x - 1) / block.x, (rows + block.y - 1) / block.y);
    transpose_naive<<<grid, block>>>(out, in, rows, cols);
}
