// bf16 GEMM on tensor cores with the WMMA API, fp32 accumulation.
//
//   C[M, N] = A[M, K] * B[K, N]      A, B bf16 row-major, C fp32 row-major
//
// A 128-thread block (4 warps, 2x2) computes a 64x64 tile of C; each warp owns
// a 32x32 sub-tile (2x2 WMMA 16x16x16 fragments). Tiles of A and B are staged
// in shared memory with zero fill outside the matrix, so M, N and K need not be
// multiples of anything; the accumulators go through shared memory so the
// final store can be bounds-checked.
//
// Build: nvcc -O3 -arch=sm_90 gemm_bf16_wmma.cu -o gemm_bf16_wmma

#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

using namespace nvcuda;

#define BM 64
#define BN 64
#define BK 32
#define WM 32
#define WN 32
#define SKEW 8  // bf16 elements of padding per shared row (keeps ldm a multiple of 8)
#define THREADS 128

#define CUDA_CHECK(call)                                                         \
    do {                                                                         \
        cudaError_t err = (call);                                                \
        if (err != cudaSuccess) {                                                \
            fprintf(stderr, "CUDA error at %s:%d: %s\n", __FILE__, __LINE__,     \
                    cudaGetErrorString(err));                                    \
            exit(EXIT_FAILURE);                                                  \
        }                                                                        \
    } while (0)

__global__ void __launch_bounds__(THREADS)
gemm_bf16_wmma(const __nv_bfloat16 *__restrict__ A, const __nv_bfloat16 *__restrict__ B,
               float *__restrict__ C, int M, int N, int K)
{
    __shared__ __align__(32) __nv_bfloat16 As[BM][BK + SKEW];
    __shared__ __align__(32) __nv_bfloat16 Bs[BK][BN + SKEW];
    __shared__ __align__(32) float Cs[BM][BN + 4];

    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int warp_m = warp / 2;  // 0..1
    const int warp_n = warp % 2;  // 0..1
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
            wmma::fill_fragment(acc[i][j], 0.0f);

    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = tid; e < BM * BK; e += THREADS) {
            const int r = e / BK, c = e % BK;
            const int gr = block_row + r, gc = k0 + c;
            As[r][c] = (gr < M && gc < K) ? A[(size_t)gr * K + gc] : __float2bfloat16(0.0f);
        }
        for (int e = tid; e < BK * BN; e += THREADS) {
            const int r = e / BN, c = e % BN;
            const int gr = k0 + r, gc = block_col + c;
            Bs[r][c] = (gr < K && gc < N) ? B[(size_t)gr * N + gc] : __float2bfloat16(0.0f);
        }
        __syncthreads();

#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a_frag[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b_frag[2];
#pragma unroll
            for (int i = 0; i < 2; ++i)
                wmma::load_matrix_sync(a_frag[i], &As[warp_m * WM + i * 16][kk], BK + SKEW);
#pragma unroll
            for (int j = 0; j < 2; ++j)
                wmma::load_matrix_sync(b_frag[j], &Bs[kk][warp_n * WN + j * 16], BN + SKEW);
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j)
                    wmma::mma_sync(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
            wmma::store_matrix_sync(&Cs[warp_m * WM + i * 16][warp_n * WN + j * 16], acc[i][j],
                                    BN + 4, wmma::mem_row_major);
    __syncthreads();

    for (int e = tid; e < BM * BN; e += THREADS) {
        const int r = e / BN, c = e % BN;
        const int gr = block_row + r, gc = block_col + c;
        if (gr < M && gc < N)
            C[(size_t)gr * N + gc] = Cs[r][c];
    }
}

void gemm_bf16(const __nv_bfloat16 *A, const __nv_bfloat16 *B, float *C, int M, int N, int K,
               cudaStream_t stream)
{
    dim3 block(THREADS);
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    gemm_bf16_wmma<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
    CUDA_CHECK(cudaGetLastError());
}

int main(int argc, char **argv)
{
    int M = 4096, N = 4096, K = 4096;
    if (argc == 4) {
        M = atoi(argv[1]);
        N = atoi(argv[2]);
        K = atoi(argv[3]);
    }

    std::vector<__nv_bfloat16> hA((size_t)M * K), hB((size_t)K * N);
    for (auto &x : hA)
        x = __float2bfloat16((float)(rand() % 200) / 100.0f - 1.0f);
    for (auto &x : hB)
        x = __float2bfloat16((float)(rand() % 200) / 100.0f - 1.0f);

    __nv_bfloat16 *dA, *dB;
    float *dC;
    CUDA_CHECK(cudaMalloc(&dA, hA.size() * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMalloc(&dB, hB.size() * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMalloc(&dC, (size_t)M * N * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(dA, hA.data(), hA.size() * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dB, hB.data(), hB.size() * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));

    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    cudaEvent_t t0, t1;
    CUDA_CHECK(cudaEventCreate(&t0));
    CUDA_CHECK(cudaEventCreate(&t1));

    gemm_bf16(dA, dB, dC, M, N, K, stream);
    CUDA_CHECK(cudaEventRecord(t0, stream));
    gemm_bf16(dA, dB, dC, M, N, K, stream);
    CUDA_CHECK(cudaEventRecord(t1, stream));
    CUDA_CHECK(cudaEventSynchronize(t1));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
    printf("gemm_bf16_wmma %dx%dx%d: %.3f ms, %.1f TFLOP/s\n", M, N, K, ms,
           2.0 * M * N * (double)K / (ms * 1e9));

    CUDA_CHECK(cudaEventDestroy(t0));
    CUDA_CHECK(cudaEventDestroy(t1));
    CUDA_CHECK(cudaStreamDestroy(stream));
    CUDA_CHECK(cudaFree(dA));
    CUDA_CHECK(cudaFree(dB));
    CUDA_CHECK(cudaFree(dC));
    return 0;
}
