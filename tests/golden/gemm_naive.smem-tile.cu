// SGEMM as a naive loop nest: one output element per thread, no reuse of loads
// (every thread walks a row of A and a column of B through global memory).
//   C = alpha * A B + beta * C;  A is M x K, B is K x N, C is M x N, row-major
#include <cuda_runtime.h>

#include <cuda_pipeline_primitives.h>  // __pipeline_memcpy_async (cp.async)
#ifndef GEMM_NAIVE_BM
#define GEMM_NAIVE_BM 128
#endif
#ifndef GEMM_NAIVE_BN
#define GEMM_NAIVE_BN 128
#endif
#ifndef GEMM_NAIVE_BK
#define GEMM_NAIVE_BK 8
#endif
#ifndef GEMM_NAIVE_TM
#define GEMM_NAIVE_TM 8
#endif
#ifndef GEMM_NAIVE_TN
#define GEMM_NAIVE_TN 8
#endif
#ifndef GEMM_NAIVE_WM
#define GEMM_NAIVE_WM 32
#endif
#ifndef GEMM_NAIVE_WN
#define GEMM_NAIVE_WN 64
#endif
#ifndef GEMM_NAIVE_STAGES
#define GEMM_NAIVE_STAGES 2
#endif
#ifndef GEMM_NAIVE_PAD
#define GEMM_NAIVE_PAD 4
#endif
#ifndef GEMM_NAIVE_VEC
#define GEMM_NAIVE_VEC 4
#endif
__global__ void gemm_naive(float* C, const float* A, const float* B, int M, int N, int K, float alpha, float beta)
{
    // smem-tile: GEMM_NAIVE_BM x GEMM_NAIVE_BN outputs per block, GEMM_NAIVE_WM x GEMM_NAIVE_WN per warp, GEMM_NAIVE_TM x GEMM_NAIVE_TN per thread; operand slices of GEMM_NAIVE_BK staged in shared memory, GEMM_NAIVE_STAGES stages (cp.async)
    __shared__ __align__(16) float kx_s0[GEMM_NAIVE_STAGES][GEMM_NAIVE_BK][GEMM_NAIVE_BM + GEMM_NAIVE_PAD];  // A[(size_t)i * K + k], transposed
    __shared__ __align__(16) float kx_s1[GEMM_NAIVE_STAGES][GEMM_NAIVE_BK][GEMM_NAIVE_BN + GEMM_NAIVE_PAD];  // B[(size_t)k * N + j], as stored
    constexpr int kx_threads = (GEMM_NAIVE_BM / GEMM_NAIVE_TM) * (GEMM_NAIVE_BN / GEMM_NAIVE_TN);
    constexpr int kx_lanes_m = GEMM_NAIVE_WM / GEMM_NAIVE_TM, kx_lanes_n = GEMM_NAIVE_WN / GEMM_NAIVE_TN;  // a warp's threads along the rows and the columns
    const int kx_tid = (int)threadIdx.y * (GEMM_NAIVE_BN / GEMM_NAIVE_TN) + (int)threadIdx.x;
    const int kx_warp = kx_tid / (kx_lanes_m * kx_lanes_n), kx_lane = kx_tid % (kx_lanes_m * kx_lanes_n);
    // this thread's first row and column in the block: its warp's tile, then its lane's place in it
    const int kx_tm0 = (kx_warp / (GEMM_NAIVE_BN / GEMM_NAIVE_WN)) * GEMM_NAIVE_WM + (kx_lane / kx_lanes_n) * 4;
    const int kx_tn0 = (kx_warp % (GEMM_NAIVE_BN / GEMM_NAIVE_WN)) * GEMM_NAIVE_WN + (kx_lane % kx_lanes_n) * 4;
    const int kx_row0 = (int)blockIdx.y * GEMM_NAIVE_BM, kx_col0 = (int)blockIdx.x * GEMM_NAIVE_BN;
    float kx_acc[GEMM_NAIVE_TM][GEMM_NAIVE_TN] = {};
#pragma unroll
    for (int kx_a = 0; kx_a < GEMM_NAIVE_TM; kx_a++)
#pragma unroll
        for (int kx_b = 0; kx_b < GEMM_NAIVE_TN; kx_b++) {
            int i = kx_row0 + kx_tm0 + kx_a / 4 * (4 * kx_lanes_m) + kx_a % 4;
            int j = kx_col0 + kx_tn0 + kx_b / 4 * (4 * kx_lanes_n) + kx_b % 4;
            if (i < M && j < N)
                kx_acc[kx_a][kx_b] = 0.0f;
        }
    const int kx_slices = (K + GEMM_NAIVE_BK - 1) / GEMM_NAIVE_BK;
    static_assert(GEMM_NAIVE_STAGES >= 2, "the pipelined loop needs two stages or more");
    float4 kx_r0[(GEMM_NAIVE_BM * GEMM_NAIVE_BK / GEMM_NAIVE_VEC + kx_threads - 1) / kx_threads];  // this thread's share of the next slice of A[(size_t)i * K + k]
    for (int kx_t = 1 - GEMM_NAIVE_STAGES; kx_t < kx_slices; kx_t++) {
        // slice kx_t is accumulated from stage kx_t % GEMM_NAIVE_STAGES; slice kx_t + GEMM_NAIVE_STAGES - 1 is loaded into stage (kx_t + GEMM_NAIVE_STAGES - 1) % GEMM_NAIVE_STAGES
        __pipeline_wait_prior(GEMM_NAIVE_STAGES - 2);  // this thread's copies of slice kx_t have landed
        __syncthreads();  // every thread's slice kx_t is stored; stage (kx_t + GEMM_NAIVE_STAGES - 1) % GEMM_NAIVE_STAGES is no longer read
        const int kx_k0 = (kx_t + GEMM_NAIVE_STAGES - 1) * GEMM_NAIVE_BK;
        if (kx_k0 < K) {
#pragma unroll
            for (int kx_l = 0; kx_l < (GEMM_NAIVE_BM * GEMM_NAIVE_BK / GEMM_NAIVE_VEC + kx_threads - 1) / kx_threads; kx_l++) {
                const int kx_e = kx_tid + kx_l * kx_threads;
                if (kx_e < GEMM_NAIVE_BM * GEMM_NAIVE_BK / GEMM_NAIVE_VEC) {
                    const int kx_m = kx_e / (GEMM_NAIVE_BK / GEMM_NAIVE_VEC), kx_kk = (kx_e % (GEMM_NAIVE_BK / GEMM_NAIVE_VEC)) * GEMM_NAIVE_VEC;
                    const int i = kx_row0 + kx_m;
                    const int k = kx_k0 + kx_kk;
                    if (i < M && k + 3 < K && ((size_t)&A[(size_t)i * K + k] & 15) == 0)
                        kx_r0[kx_l] = __ldg(reinterpret_cast<const float4*>(&A[(size_t)i * K + k]));
                    else {
                        float kx_x[4];
                        for (int kx_v = 0; kx_v < 4; kx_v++) {
                            const int i = kx_row0 + kx_m;
                            const int k = kx_k0 + kx_kk + kx_v;
                            kx_x[kx_v] = (i < M && k < K) ? A[(size_t)i * K + k] : 0.0f;
                        }
                        kx_r0[kx_l] = make_float4(kx_x[0], kx_x[1], kx_x[2], kx_x[3]);
                    }
                }
            }
#pragma unroll
            for (int kx_l = 0; kx_l < (GEMM_NAIVE_BN * GEMM_NAIVE_BK / GEMM_NAIVE_VEC + kx_threads - 1) / kx_threads; kx_l++) {
                const int kx_e = kx_tid + kx_l * kx_threads;
                if (kx_e < GEMM_NAIVE_BN * GEMM_NAIVE_BK / GEMM_NAIVE_VEC) {
                    const int kx_m = (kx_e % (GEMM_NAIVE_BN / GEMM_NAIVE_VEC)) * GEMM_NAIVE_VEC, kx_kk = kx_e / (GEMM_NAIVE_BN / GEMM_NAIVE_VEC);
                    const int j = kx_col0 + kx_m;
                    const int k = kx_k0 + kx_kk;
                    if (k < K && j + 3 < N && ((size_t)&B[(size_t)k * N + j] & 15) == 0)
                        __pipeline_memcpy_async(&kx_s1[(kx_t + GEMM_NAIVE_STAGES - 1) % GEMM_NAIVE_STAGES][kx_kk][kx_m + 0], &B[(size_t)k * N + j], 16);
                    else
                        for (int kx_v = 0; kx_v < GEMM_NAIVE_VEC; kx_v++) {
                            const int j = kx_col0 + kx_m + kx_v;
                            const int k = kx_k0 + kx_kk;
                            if (j < N && k < K)
                                __pipeline_memcpy_async(&kx_s1[(kx_t + GEMM_NAIVE_STAGES - 1) % GEMM_NAIVE_STAGES][kx_kk][kx_m + kx_v], &B[(size_t)k * N + j], sizeof(float));
                            else
                                kx_s1[(kx_t + GEMM_NAIVE_STAGES - 1) % GEMM_NAIVE_STAGES][kx_kk][kx_m + kx_v] = (float)0;
                        }
                }
            }
        }
        __pipeline_commit();
        if (kx_t >= 0) {
            const int kx_k = kx_t * GEMM_NAIVE_BK;
            const int kx_kn = K - kx_k < GEMM_NAIVE_BK ? K - kx_k : GEMM_NAIVE_BK;
            if (kx_kn == GEMM_NAIVE_BK) {
#pragma unroll
                for (int kx_kk = 0; kx_kk < GEMM_NAIVE_BK; kx_kk++) {
                    float kx_f0[GEMM_NAIVE_TM];  // A[(size_t)i * K + k] for this thread's rows
#pragma unroll
                    for (int kx_g = 0; kx_g < GEMM_NAIVE_TM / 4; kx_g++) {
                        const float4 kx_v = *reinterpret_cast<const float4*>(&kx_s0[kx_t % GEMM_NAIVE_STAGES][kx_kk][kx_tm0 + kx_g * (4 * kx_lanes_m)]);
                        kx_f0[4 * kx_g + 0] = kx_v.x;
                        kx_f0[4 * kx_g + 1] = kx_v.y;
                        kx_f0[4 * kx_g + 2] = kx_v.z;
                        kx_f0[4 * kx_g + 3] = kx_v.w;
                    }
                    float kx_f1[GEMM_NAIVE_TN];  // B[(size_t)k * N + j] for this thread's columns
#pragma unroll
                    for (int kx_g = 0; kx_g < GEMM_NAIVE_TN / 4; kx_g++) {
                        const float4 kx_v = *reinterpret_cast<const float4*>(&kx_s1[kx_t % GEMM_NAIVE_STAGES][kx_kk][kx_tn0 + kx_g * (4 * kx_lanes_n)]);
                        kx_f1[4 * kx_g + 0] = kx_v.x;
                        kx_f1[4 * kx_g + 1] = kx_v.y;
                        kx_f1[4 * kx_g + 2] = kx_v.z;
                        kx_f1[4 * kx_g + 3] = kx_v.w;
                    }
#pragma unroll
                    for (int kx_a = 0; kx_a < GEMM_NAIVE_TM; kx_a++)
#pragma unroll
                        for (int kx_b = 0; kx_b < GEMM_NAIVE_TN; kx_b++) {
                            kx_acc[kx_a][kx_b] += kx_f0[kx_a] * kx_f1[kx_b];
                        }
                }
            } else {
                for (int kx_kk = 0; kx_kk < kx_kn; kx_kk++) {
                    float kx_f0[GEMM_NAIVE_TM];  // A[(size_t)i * K + k] for this thread's rows
#pragma unroll
                    for (int kx_g = 0; kx_g < GEMM_NAIVE_TM / 4; kx_g++) {
                        const float4 kx_v = *reinterpret_cast<const float4*>(&kx_s0[kx_t % GEMM_NAIVE_STAGES][kx_kk][kx_tm0 + kx_g * (4 * kx_lanes_m)]);
                        kx_f0[4 * kx_g + 0] = kx_v.x;
                        kx_f0[4 * kx_g + 1] = kx_v.y;
                        kx_f0[4 * kx_g + 2] = kx_v.z;
                        kx_f0[4 * kx_g + 3] = kx_v.w;
                    }
                    float kx_f1[GEMM_NAIVE_TN];  // B[(size_t)k * N + j] for this thread's columns
#pragma unroll
                    for (int kx_g = 0; kx_g < GEMM_NAIVE_TN / 4; kx_g++) {
                        const float4 kx_v = *reinterpret_cast<const float4*>(&kx_s1[kx_t % GEMM_NAIVE_STAGES][kx_kk][kx_tn0 + kx_g * (4 * kx_lanes_n)]);
                        kx_f1[4 * kx_g + 0] = kx_v.x;
                        kx_f1[4 * kx_g + 1] = kx_v.y;
                        kx_f1[4 * kx_g + 2] = kx_v.z;
                        kx_f1[4 * kx_g + 3] = kx_v.w;
                    }
#pragma unroll
                    for (int kx_a = 0; kx_a < GEMM_NAIVE_TM; kx_a++)
#pragma unroll
                        for (int kx_b = 0; kx_b < GEMM_NAIVE_TN; kx_b++) {
                            kx_acc[kx_a][kx_b] += kx_f0[kx_a] * kx_f1[kx_b];
                        }
                }
            }
        }
        if (kx_k0 < K) {
#pragma unroll
            for (int kx_l = 0; kx_l < (GEMM_NAIVE_BM * GEMM_NAIVE_BK / GEMM_NAIVE_VEC + kx_threads - 1) / kx_threads; kx_l++) {
                const int kx_e = kx_tid + kx_l * kx_threads;
                if (kx_e < GEMM_NAIVE_BM * GEMM_NAIVE_BK / GEMM_NAIVE_VEC) {
                    const int kx_m = kx_e / (GEMM_NAIVE_BK / GEMM_NAIVE_VEC), kx_kk = (kx_e % (GEMM_NAIVE_BK / GEMM_NAIVE_VEC)) * GEMM_NAIVE_VEC;
                    kx_s0[(kx_t + GEMM_NAIVE_STAGES - 1) % GEMM_NAIVE_STAGES][kx_kk + 0][kx_m] = kx_r0[kx_l].x;
                    kx_s0[(kx_t + GEMM_NAIVE_STAGES - 1) % GEMM_NAIVE_STAGES][kx_kk + 1][kx_m] = kx_r0[kx_l].y;
                    kx_s0[(kx_t + GEMM_NAIVE_STAGES - 1) % GEMM_NAIVE_STAGES][kx_kk + 2][kx_m] = kx_r0[kx_l].z;
                    kx_s0[(kx_t + GEMM_NAIVE_STAGES - 1) % GEMM_NAIVE_STAGES][kx_kk + 3][kx_m] = kx_r0[kx_l].w;
                }
            }
        }
    }
#pragma unroll
    for (int kx_a = 0; kx_a < GEMM_NAIVE_TM; kx_a++)
#pragma unroll
        for (int kx_b = 0; kx_b < GEMM_NAIVE_TN; kx_b++) {
            int i = kx_row0 + kx_tm0 + kx_a / 4 * (4 * kx_lanes_m) + kx_a % 4;
            int j = kx_col0 + kx_tn0 + kx_b / 4 * (4 * kx_lanes_n) + kx_b % 4;
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
