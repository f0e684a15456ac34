// SGEMM as a naive loop nest: one output element per thread, no reuse of loads
// (every thread walks a row of A and a column of B through global memory).
//   C = alpha * A B + beta * C;  A is M x K, B is K x N, C is M x N, row-major
#include <cuda_runtime.h>

#ifndef GEMM_NAIVE_BM
#define GEMM_NAIVE_BM 64
#endif
#ifndef GEMM_NAIVE_BN
#define GEMM_NAIVE_BN 64
#endif
#ifndef GEMM_NAIVE_BK
#define GEMM_NAIVE_BK 16
#endif
#ifndef GEMM_NAIVE_TM
#define GEMM_NAIVE_TM 4
#endif
#ifndef GEMM_NAIVE_TN
#define GEMM_NAIVE_TN 4
#endif
#ifndef GEMM_NAIVE_PAD
#define GEMM_NAIVE_PAD 4
#endif
#ifndef GEMM_NAIVE_VEC
#define GEMM_NAIVE_VEC 1
#endif
__global__ void gemm_naive(float* C, const float* A, const float* B, int M, int N, int K, float alpha, float beta)
{
    // smem-tile: GEMM_NAIVE_BM x GEMM_NAIVE_BN outputs per block, GEMM_NAIVE_TM x GEMM_NAIVE_TN per thread, operands staged in shared memory
    __shared__ float kx_s0[GEMM_NAIVE_BK][GEMM_NAIVE_BM + GEMM_NAIVE_PAD];  // A[(size_t)i * K + k], transposed
    __shared__ float kx_s1[GEMM_NAIVE_BK][GEMM_NAIVE_BN + GEMM_NAIVE_PAD];  // B[(size_t)k * N + j], transposed
    const int kx_tid = (int)threadIdx.y * (GEMM_NAIVE_BN / GEMM_NAIVE_TN) + (int)threadIdx.x;
    const int kx_row0 = (int)blockIdx.y * GEMM_NAIVE_BM, kx_col0 = (int)blockIdx.x * GEMM_NAIVE_BN;
    float kx_acc[GEMM_NAIVE_TM][GEMM_NAIVE_TN] = {};
#pragma unroll
    for (int kx_a = 0; kx_a < GEMM_NAIVE_TM; kx_a++)
#pragma unroll
        for (int kx_b = 0; kx_b < GEMM_NAIVE_TN; kx_b++) {
            int i = kx_row0 + (int)threadIdx.y + kx_a * (GEMM_NAIVE_BM / GEMM_NAIVE_TM);
            int j = kx_col0 + (int)threadIdx.x + kx_b * (GEMM_NAIVE_BN / GEMM_NAIVE_TN);
            if (i < M && j < N)
                kx_acc[kx_a][kx_b] = 0.0f;
        }
    for (int kx_k0 = 0; kx_k0 < K; kx_k0 += GEMM_NAIVE_BK) {
        for (int kx_e = kx_tid; kx_e < GEMM_NAIVE_BM * GEMM_NAIVE_BK / GEMM_NAIVE_VEC; kx_e += ((GEMM_NAIVE_BM / GEMM_NAIVE_TM) * (GEMM_NAIVE_BN / GEMM_NAIVE_TN))) {
            const int kx_m = kx_e / (GEMM_NAIVE_BK / GEMM_NAIVE_VEC), kx_kk = (kx_e % (GEMM_NAIVE_BK / GEMM_NAIVE_VEC)) * GEMM_NAIVE_VEC;
            bool kx_vector = false;
            if (GEMM_NAIVE_VEC == 4) {
                const int i = kx_row0 + kx_m;
                const int k = kx_k0 + kx_kk;
                kx_vector = i < M && k + 3 < K && ((size_t)&A[(size_t)i * K + k] & 15) == 0;
                if (kx_vector) {
                    const float4 kx_v = *reinterpret_cast<const float4*>(&A[(size_t)i * K + k]);
                    kx_s0[kx_kk + 0][kx_m] = kx_v.x;
                    kx_s0[kx_kk + 1][kx_m] = kx_v.y;
                    kx_s0[kx_kk + 2][kx_m] = kx_v.z;
                    kx_s0[kx_kk + 3][kx_m] = kx_v.w;
                }
            }
            if (!kx_vector)
                for (int kx_v = 0; kx_v < GEMM_NAIVE_VEC; kx_v++) {
                    const int i = kx_row0 + kx_m;
                    const int k = kx_k0 + kx_kk + kx_v;
                    kx_s0[kx_kk + kx_v][kx_m] = (i < M && k < K) ? A[(size_t)i * K + k] : (float)0;
                }
        }
        for (int kx_e = kx_tid; kx_e < GEMM_NAIVE_BN * GEMM_NAIVE_BK / GEMM_NAIVE_VEC; kx_e += ((GEMM_NAIVE_BM / GEMM_NAIVE_TM) * (GEMM_NAIVE_BN / GEMM_NAIVE_TN))) {
            const int kx_m = (kx_e % (GEMM_NAIVE_BN / GEMM_NAIVE_VEC)) * GEMM_NAIVE_VEC, kx_kk = kx_e / (GEMM_NAIVE_BN / GEMM_NAIVE_VEC);
            bool kx_vector = false;
            if (GEMM_NAIVE_VEC == 4) {
                const int j = kx_col0 + kx_m;
                const int k = kx_k0 + kx_kk;
                kx_vector = k < K && j + 3 < N && ((size_t)&B[(size_t)k * N + j] & 15) == 0;
                if (kx_vector) {
                    const float4 kx_v = *reinterpret_cast<const float4*>(&B[(size_t)k * N + j]);
                    kx_s1[kx_kk][kx_m + 0] = kx_v.x;
                    kx_s1[kx_kk][kx_m + 1] = kx_v.y;
                    kx_s1[kx_kk][kx_m + 2] = kx_v.z;
                    kx_s1[kx_kk][kx_m + 3] = kx_v.w;
                }
            }
            if (!kx_vector)
                for (int kx_v = 0; kx_v < GEMM_NAIVE_VEC; kx_v++) {
                    const int j = kx_col0 + kx_m + kx_v;
                    const int k = kx_k0 + kx_kk;
                    kx_s1[kx_kk][kx_m + kx_v] = (j < N && k < K) ? B[(size_t)k * N + j] : (float)0;
                }
        }
        __syncthreads();
        const int kx_kn = K - kx_k0 < GEMM_NAIVE_BK ? K - kx_k0 : GEMM_NAIVE_BK;
        if (kx_kn == GEMM_NAIVE_BK) {
#pragma unroll
            for (int kx_kk = 0; kx_kk < GEMM_NAIVE_BK; kx_kk++) {
#pragma unroll
            for (int kx_a = 0; kx_a < GEMM_NAIVE_TM; kx_a++)
#pragma unroll
                for (int kx_b = 0; kx_b < GEMM_NAIVE_TN; kx_b++) {
                    kx_acc[kx_a][kx_b] += kx_s0[kx_kk][(int)threadIdx.y + kx_a * (GEMM_NAIVE_BM / GEMM_NAIVE_TM)] * kx_s1[kx_kk][(int)threadIdx.x + kx_b * (GEMM_NAIVE_BN / GEMM_NAIVE_TN)];
                }
            }
        } else {
            for (int kx_kk = 0; kx_kk < kx_kn; kx_kk++) {
#pragma unroll
            for (int kx_a = 0; kx_a < GEMM_NAIVE_TM; kx_a++)
#pragma unroll
                for (int kx_b = 0; kx_b < GEMM_NAIVE_TN; kx_b++) {
                    kx_acc[kx_a][kx_b] += kx_s0[kx_kk][(int)threadIdx.y + kx_a * (GEMM_NAIVE_BM / GEMM_NAIVE_TM)] * kx_s1[kx_kk][(int)threadIdx.x + kx_b * (GEMM_NAIVE_BN / GEMM_NAIVE_TN)];
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int kx_a = 0; kx_a < GEMM_NAIVE_TM; kx_a++)
#pragma unroll
        for (int kx_b = 0; kx_b < GEMM_NAIVE_TN; kx_b++) {
            int i = kx_row0 + (int)threadIdx.y + kx_a * (GEMM_NAIVE_BM / GEMM_NAIVE_TM);
            int j = kx_col0 + (int)threadIdx.x + kx_b * (GEMM_NAIVE_BN / GEMM_NAIVE_TN);
            if (i < M && j < N) {
                C[(size_t)i * N + j] = alpha * kx_acc[kx_a][kx_b] + beta * C[(size_t)i * N + j];
            }
        }
}

void gemm(float* C, const float* A, const float* B, int M, int N, int K, float alpha, float beta)
{
    dim3 block(32, 8);
    dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
    gemm_naive<<<dim3((N + GEMM_NAIVE_BN - 1) / GEMM_NAIVE_BN, (M + GEMM_NAIVE_BM - 1) / GEMM_NAIVE_BM), dim3(GEMM_NAIVE_BN / GEMM_NAIVE_TN, GEMM_NAIVE_BM / GEMM_NAIVE_TM)>>>(C, A, B, M, N, K, alpha, beta);
}
