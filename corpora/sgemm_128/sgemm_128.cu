// sgemm_128.cu - register-blocked fp32 SGEMM, C = alpha * A * B + beta * C
//
// A is M x K, B is K x N, C is M x N, all row-major. Each block of 256 threads
// computes one 128x128 tile of C; each thread accumulates an 8x8 sub-tile in
// registers. Per step of BK = 8 along K the block stages a 128x8 slice of A
// (stored transposed, so the inner loop reads it as rows) and an 8x128 slice of B
// through shared memory; every thread loads 4 elements of each. Sizes that are not
// multiples of the tile are handled by zero-filling the shared slices and guarding
// the final stores.
//
// Build: nvcc -O3 -arch=sm_90 sgemm_128.cu -o sgemm_128
// Usage: ./sgemm_128 [M N K]

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8
#define THREADS 256

#define CUDA_CHECK(call)                                                       \
    do {                                                                       \
        cudaError_t err__ = (call);                                            \
        if (err__ != cudaSuccess) {                                            \
            fprintf(stderr, "CUDA error %s at %s:%d\n",                        \
                    cudaGetErrorString(err__), __FILE__, __LINE__);            \
            exit(EXIT_FAILURE);                                                \
        }                                                                      \
    } while (0)

__global__ void __launch_bounds__(THREADS)
sgemm_128(int M, int N, int K, float alpha, const float *A, const float *B, float beta, float *C)
{
    __shared__ float As[BK][BM];  // A slice, transposed: As[k][m]
    __shared__ float Bs[BK][BN];

    const int tid = threadIdx.x;
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;
    const int tr = (tid / (BN / TN)) * TM;  // first row of this thread's 8x8 sub-tile
    const int tc = (tid % (BN / TN)) * TN;  // first column

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
            acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // 128x8 slice of A and 8x128 slice of B: 1024 elements each, 4 per thread.
#pragma unroll
        for (int l = 0; l < (BM * BK) / THREADS; ++l) {
            const int e = tid + l * THREADS;
            const int am = e / BK, ak = e % BK;
            const int gr = row0 + am, gk = k0 + ak;
            As[ak][am] = (gr < M && gk < K) ? A[(size_t)gr * K + gk] : 0.0f;
            const int bk = e / BN, bn = e % BN;
            const int gkb = k0 + bk, gc = col0 + bn;
            Bs[bk][bn] = (gkb < K && gc < N) ? B[(size_t)gkb * N + gc] : 0.0f;
        }
        __syncthreads();

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i)
                a[i] = As[k][tr + i];
#pragma unroll
            for (int j = 0; j < TN; ++j)
                b[j] = Bs[k][tc + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = row0 + tr + i;
        if (r >= M)
            continue;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int c = col0 + tc + j;
            if (c < N)
                C[(size_t)r * N + c] = alpha * acc[i][j] + beta * C[(size_t)r * N + c];
        }
    }
}

static void fill_random(std::vector<float> &v)
{
    for (auto &x : v)
        x = 2.0f * (float)rand() / (float)RAND_MAX - 1.0f;
}

int main(int argc, char **argv)
{
    int M = 4096, N = 4096, K = 4096;
    if (argc == 4) {
        M = atoi(argv[1]);
        N = atoi(argv[2]);
        K = atoi(argv[3]);
    }
    const float alpha = 1.0f, beta = 0.0f;

    std::vector<float> hA((size_t)M * K), hB((size_t)K * N), hC((size_t)M * N, 0.0f);
    srand(2024);
    fill_random(hA);
    fill_random(hB);

    float *dA, *dB, *dC;
    CUDA_CHECK(cudaMalloc(&dA, hA.size() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dB, hB.size() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dC, hC.size() * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(dA, hA.data(), hA.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dB, hB.data(), hB.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dC, hC.data(), hC.size() * sizeof(float), cudaMemcpyHostToDevice));

    dim3 block(THREADS);
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    sgemm_128<<<grid, block>>>(M, N, K, alpha, dA, dB, beta, dC);  // warm-up
    CUDA_CHECK(cudaGetLastError());

    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    const int iters = 10;
    CUDA_CHECK(cudaEventRecord(start));
    for (int i = 0; i < iters; ++i)
        sgemm_128<<<grid, block>>>(M, N, K, alpha, dA, dB, beta, dC);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    ms /= iters;
    printf("sgemm_128 %dx%dx%d: %.3f ms, %.1f GFLOP/s\n", M, N, K, ms, 2.0 * M * N * (double)K / (ms * 1e6));

    CUDA_CHECK(cudaMemcpy(hC.data(), dC, hC.size() * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int s = 0; s < 16; ++s) {
        const int i = rand() % M, j = rand() % N;
        double ref = 0.0;
        for (int k = 0; k < K; ++k)
            ref += (double)hA[(size_t)i * K + k] * hB[(size_t)k * N + j];
        if (fabs(ref - hC[(size_t)i * N + j]) > 1e-3 * (1.0 + fabs(ref)))
            ++bad;
    }
    printf("%s\n", bad ? "FAILED" : "PASSED");

    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    CUDA_CHECK(cudaFree(dA));
    CUDA_CHECK(cudaFree(dB));
    CUDA_CHECK(cudaFree(dC));
    return bad ? EXIT_FAILURE : EXIT_SUCCESS;
}
