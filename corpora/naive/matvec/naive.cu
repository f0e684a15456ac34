// Matrix-vector product as it is usually first written: row-major A, one thread per
// row, a scalar dot product (the threads of a warp read 32 different rows).
//   y = A x,  A is M x N
#include <cuda_runtime.h>

__global__ void matvec_naive(float* y, const float* A, const float* x, int M, int N)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < M) {
        float acc = 0.0f;
        for (int j = 0; j < N; j++)
            acc += A[(size_t)i * N + j] * x[j];
        y[i] = acc;
    }
}

void matvec(float* y, const float* A, const float* x, int M, int N)
{
    const int block_size = 256;
    const int grid_size = (M + block_size - 1) / block_size;
    matvec_naive<<<grid_size, block_size>>>(y, A, x, M, N);
}
