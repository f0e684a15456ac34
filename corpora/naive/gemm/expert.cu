// SGEMM as a performance engineer writes it (a yardstick, never an input to a pass):
// 64 x 64 output tiles, 16-deep slices of A and B staged in padded shared memory, each
// of the 256 threads accumulating a 4 x 4 block of outputs in registers.
#include <cuda_runtime.h>

#define BM 64
#define BN 64
#define BK 16

__global__ void __launch_bounds__(256) gemm_expert(float* __restrict__ C, const float* __restrict__ A,
                                                   const float* __restrict__ B, int M, int N, int K, float alpha,
                                                   float beta)
{
    __shared__ float As[BK][BM + 4];  // A's slice, transposed: As[k][m]
    __shared__ float Bs[BK][BN + 4];
    const int tid = threadIdx.x;
    const int tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = tid; e < BM * BK; e += 256) {
            const int m = e / BK, k = e % BK;
            As[k][m] = (row0 + m < M && k0 + k < K) ? A[(size_t)(row0 + m) * K + k0 + k] : 0.0f;
        }
        for (int e = tid; e < BK * BN; e += 256) {
            const int k = e / BN, n = e % BN;
            Bs[k][n] = (k0 + k < K && col0 + n < N) ? B[(size_t)(k0 + k) * N + col0 + n] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; k++) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                a[i] = As[k][ty + 16 * i];
                b[i] = Bs[k][tx + 16 * i];
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
            if (r < M && c < N)
                C[(size_t)r * N + c] = alpha * acc[i][j] + beta * C[(size_t)r * N + c];
        }
}

void gemm(float* C, const float* A, const float* B, int M, int N, int K, float alpha, float beta)
{
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    gemm_expert<<<grid, 256>>>(C, A, B, M, N, K, alpha, beta);
}
