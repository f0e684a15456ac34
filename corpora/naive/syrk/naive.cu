// SYRK (PolyBench) as a naive loop nest: one element of the lower triangle per thread,
// no reuse of loads.
//   C = alpha * A A^T + beta * C on the lower triangle (j <= i); A is N x M, C is N x N
#include <cuda_runtime.h>

__global__ void syrk_naive(float* C, const float* A, int N, int M, float alpha, float beta)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < N && j <= i) {
        float acc = 0.0f;
        for (int k = 0; k < M; k++)
            acc += A[(size_t)i * M + k] * A[(size_t)j * M + k];
        C[(size_t)i * N + j] = beta * C[(size_t)i * N + j] + alpha * acc;
    }
}

void syrk(float* C, const float* A, int N, int M, float alpha, float beta)
{
    dim3 block(32, 8);
    dim3 grid((N + block.x - 1) / block.x, (N + block.y - 1) / block.y);
    syrk_naive<<<grid, block>>>(C, A, N, M, alpha, beta);
}
