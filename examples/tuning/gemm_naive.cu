// SGEMM as a naive loop nest: one output element per thread, no reuse of loads
// (every thread walks a row of A and a column of B through global memory).
//   C = alpha * A B + beta * C;  A is M x K, B is K x N, C is M x N, row-major
#include <cuda_runtime.h>

__global__ void gemm_naive(float* C, const float* A, const float* B, int M, int N, int K, float alpha, float beta)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < M && j < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++)
            acc += A[(size_t)i * K + k] * B[(size_t)k * N + j];
        C[(size_t)i * N + j] = alpha * acc + beta * C[(size_t)i * N + j];
    }
}

void gemm(float* C, const float* A, const float* B, int M, int N, int K, float alpha, float beta)
{
    dim3 block(32, 8);
    dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
    gemm_naive<<<grid, block>>>(C, A, B, M, N, K, alpha, beta);
}
