// One Jacobi sweep (5-point, PolyBench jacobi-2d) as it is usually first written: one
// point per thread, five loads from global memory each; the boundary is copied.
#include <cuda_runtime.h>

#ifndef JACOBI2D_NAIVE_COARSEN
#define JACOBI2D_NAIVE_COARSEN 2
#endif
__global__ void jacobi2d_naive(float* B, const float* A, int N)
{
    #pragma unroll
    for (int kx_f = 0; kx_f < JACOBI2D_NAIVE_COARSEN; ++kx_f) {
        int j = blockIdx.x * blockDim.x + threadIdx.x;
        int i = (blockIdx.y * JACOBI2D_NAIVE_COARSEN + kx_f) * blockDim.y + threadIdx.y;
        if (i < N && j < N) {
            if (i > 0 && i < N - 1 && j > 0 && j < N - 1)
                B[i * N + j] = 0.2f * (A[i * N + j] + A[i * N + j - 1] + A[i * N + j + 1] + A[(i + 1) * N + j] +
                                       A[(i - 1) * N + j]);
            else
                B[i * N + j] = A[i * N + j];
        }
    }
}

void jacobi2d_step(float* B, const float* A, int N)
{
    dim3 block(32, 8);
    dim3 grid((N + block.x - 1) / block.x, (((N + block.y - 1) / block.y) + JACOBI2D_NAIVE_COARSEN - 1) / JACOBI2D_NAIVE_COARSEN);
    jacobi2d_naive<<<grid, block>>>(B, A, N);
}
