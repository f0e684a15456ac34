// SGEMM as a naive loop nest: one output element per thread, no reuse of loads
// (every thread walks a row of A and a column of B through global memory).
//   C = alpha * A B + beta * C;  A is M x K, B is K x N, C is M x N, row-major
#include <cuda_runtime.h>

#ifndef GEMM_NAIVE_COARSEN
#define GEMM_NAIVE_COARSEN 4
#endif
__global__ void gemm_naive(float* C, const float* A, const float* B, int M, int N, int K, float alpha, float beta)
{
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    bool kx_ok[GEMM_NAIVE_COARSEN];
    float kx_acc[GEMM_NAIVE_COARSEN];
    #pragma unroll
    for (int kx_f = 0; kx_f < GEMM_NAIVE_COARSEN; ++kx_f) {
        int j = (blockIdx.x * blockDim.x + threadIdx.x) * GEMM_NAIVE_COARSEN + kx_f;
        kx_ok[kx_f] = (i < M && j < N);
        if (kx_ok[kx_f]) {
            float acc = 0.0f;
            kx_acc[kx_f] = acc;
        }
    }
    bool kx_any = false;
    #pragma unroll
    for (int kx_f = 0; kx_f < GEMM_NAIVE_COARSEN; ++kx_f)
        kx_any = kx_any || kx_ok[kx_f];
    if (kx_any) {
        for (int k = 0; k < K; k++) {
            const float kx_s0 = A[(size_t)i * K + k];
            #pragma unroll
            for (int kx_f = 0; kx_f < GEMM_NAIVE_COARSEN; ++kx_f) {
                int j = (blockIdx.x * blockDim.x + threadIdx.x) * GEMM_NAIVE_COARSEN + kx_f;
                if (kx_ok[kx_f]) {
                    float acc = kx_acc[kx_f];
                    acc += kx_s0 * B[(size_t)k * N + j];
                    kx_acc[kx_f] = acc;
                }
            }
        }
    }
    #pragma unroll
    for (int kx_f = 0; kx_f < GEMM_NAIVE_COARSEN; ++kx_f) {
        int j = (blockIdx.x * blockDim.x + threadIdx.x) * GEMM_NAIVE_COARSEN + kx_f;
        if (kx_ok[kx_f]) {
            float acc = kx_acc[kx_f];
            C[(size_t)i * N + j] = alpha * acc + beta * C[(size_t)i * N + j];
        }
    }
}

void gemm(float* C, const float* A, const float* B, int M, int N, int K, float alpha, float beta)
{
    dim3 block(32, 8);
    dim3 grid((((N + block.x - 1) / block.x) + GEMM_NAIVE_COARSEN - 1) / GEMM_NAIVE_COARSEN, (M + block.y - 1) / block.y);
    gemm_naive<<<grid, block>>>(C, A, B, M, N, K, alpha, beta);
}
