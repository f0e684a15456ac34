// Naive SGEMM: C = A * B, one thread per element of C, A is M x K, B is K x N.

#include <cuda_runtime.h>

__global__ void gemm_naive(const float *A, const float *B, float *C, int M, int N, int K)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k)
            acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
}

#ifndef GEMM_NAIVE_BLOCK_X
#define GEMM_NAIVE_BLOCK_X 16
#endif
#ifndef GEMM_NAIVE_BLOCK_Y
#define GEMM_NAIVE_BLOCK_Y 16
#endif
void gemm(const float *A, const float *B, float *C, int M, int N, int K)
{
    dim3 block(GEMM_NAIVE_BLOCK_X, GEMM_NAIVE_BLOCK_Y);
    dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
    gemm_naive<<<grid, block>>>(A, B, C, M, N, K);
}
