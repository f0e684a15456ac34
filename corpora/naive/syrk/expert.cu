// SYRK as a performance engineer writes it (a yardstick, never an input to a pass):
// 64 x 64 tiles of C, the tiles above the diagonal skipped, 16-deep slices of the two
// row panels of A staged in padded shared memory, 4 x 4 outputs per thread in registers.
#include <cuda_runtime.h>

#define BT 64
#define BK 16

__global__ void __launch_bounds__(256) syrk_expert(float* __restrict__ C, const float* __restrict__ A, int N, int M,
                                                   float alpha, float beta)
{
    if (blockIdx.x > blockIdx.y)
        return;  // strictly above the diagonal: nothing to compute
    __shared__ float Rs[BK][BT + 4];  // rows i of A, transposed
    __shared__ float Cs[BK][BT + 4];  // rows j of A, transposed
    const int tid = threadIdx.x;
    const int tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * BT, col0 = blockIdx.x * BT;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < M; k0 += BK) {
        for (int e = tid; e < BT * BK; e += 256) {
            const int m = e / BK, k = e % BK;
            const bool in_k = k0 + k < M;
            Rs[k][m] = (row0 + m < N && in_k) ? A[(size_t)(row0 + m) * M + k0 + k] : 0.0f;
            Cs[k][m] = (col0 + m < N && in_k) ? A[(size_t)(col0 + m) * M + k0 + k] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; k++) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                a[i] = Rs[k][ty + 16 * i];
                b[i] = Cs[k][tx + 16 * i];
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
            if (r < N && c <= r)
                C[(size_t)r * N + c] = beta * C[(size_t)r * N + c] + alpha * acc[i][j];
        }
}

void syrk(float* C, const float* A, int N, int M, float alpha, float beta)
{
    dim3 grid((N + BT - 1) / BT, (N + BT - 1) / BT);
    syrk_expert<<<grid, 256>>>(C, A, N, M, alpha, beta);
}
