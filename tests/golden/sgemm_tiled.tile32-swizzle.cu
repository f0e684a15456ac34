// sgemm_tiled.cu - shared-memory tiled SGEMM, C = alpha * A * B + beta * C
//
// A is M x K, B is K x N, C is M x N, all row-major. Each 16x16 thread block
// computes one 16x16 tile of C, staging tiles of A and B through shared memory.
// Sizes that are not multiples of the tile are handled by zero-filling the
// shared tiles and guarding the final store.
//
// Build: nvcc -O3 -arch=sm_90 sgemm_tiled.cu -o sgemm_tiled
// Usage: ./sgemm_tiled [M N K]

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#ifndef TILE
#define TILE 32
#endif

#define CUDA_CHECK(call)                                                       \
    do {                                                                       \
        cudaError_t err__ = (call);                                            \
        if (err__ != cudaSuccess) {                                            \
            fprintf(stderr, "CUDA error %s at %s:%d\n",                        \
                    cudaGetErrorString(err__), __FILE__, __LINE__);            \
            exit(EXIT_FAILURE);                                                \
        }                                                                      \
    } while (0)

#if !defined(KXFORM_SWIZZLE_GROUPED_ALONGY_GROUP8_DEFINED) && (defined(__CUDACC__) || defined(__HIPCC__))
#define KXFORM_SWIZZLE_GROUPED_ALONGY_GROUP8_DEFINED
/* kxform swizzle grouped(along=y,group=8): logical block (x, y) for physical block (bx, by).
   A bijection on every gx x gy grid with gx*gy < 2^32 (checked by kxform). */
static __device__ __forceinline__ uint2 kxform_swizzle_grouped_alongy_group8(
    const unsigned bx, const unsigned by, const unsigned gx, const unsigned gy)
{
    const unsigned pid = by * gx + bx;
    /* blocks in one group of 8 rows (a group past 2^32 - 1 holds every block) */
    const unsigned per_group = gx <= 0xffffffffu / 8u ? 8u * gx : 0xffffffffu;
    const unsigned first = (pid / per_group) * 8u;
    const unsigned size = gy - first < 8u ? gy - first : 8u;  /* last group may be short */
    const unsigned in_group = pid % per_group;
    return make_uint2(in_group / size, first + in_group % size);
}
#endif

__global__ void sgemm_tiled(int M, int N, int K, float alpha, const float *A,
                            const float *B, float beta, float *C)
{
    const uint2 kxform_block = kxform_swizzle_grouped_alongy_group8(blockIdx.x, blockIdx.y, gridDim.x, gridDim.y);
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = kxform_block.y * TILE + ty;
    const int col = kxform_block.x * TILE + tx;

    float acc = 0.0f;
    for (int t = 0; t < K; t += TILE) {
        As[ty][tx] = (row < M && t + tx < K) ? A[row * K + t + tx] : 0.0f;
        Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;
        __syncthreads();

#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }

    if (row < M && col < N)
        C[row * N + col] = alpha * acc + beta * C[row * N + col];
}

static void fill_random(std::vector<float> &v)
{
    for (auto &x : v)
        x = 2.0f * (float)rand() / (float)RAND_MAX - 1.0f;
}

int main(int argc, char **argv)
{
    int M = 1024, N = 1024, K = 1024;
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

    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));

    dim3 block(TILE, TILE);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);

    // warm-up
    sgemm_tiled<<<grid, block, 0, stream>>>(M, N, K, alpha, dA, dB, beta, dC);
    CUDA_CHECK(cudaGetLastError());

    const int iters = 10;
    CUDA_CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < iters; ++i)
        sgemm_tiled<<<grid, block, 0, stream>>>(M, N, K, alpha, dA, dB, beta, dC);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));

    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    ms /= iters;
    double gflops = 2.0 * M * N * (double)K / (ms * 1e6);
    printf("sgemm_tiled %dx%dx%d: %.3f ms, %.1f GFLOP/s\n", M, N, K, ms, gflops);

    CUDA_CHECK(cudaMemcpy(hC.data(), dC, hC.size() * sizeof(float), cudaMemcpyDeviceToHost));

    // spot-check a few entries against the CPU
    int bad = 0;
    for (int s = 0; s < 16; ++s) {
        int i = rand() % M, j = rand() % N;
        double ref = 0.0;
        for (int k = 0; k < K; ++k)
            ref += (double)hA[(size_t)i * K + k] * hB[(size_t)k * N + j];
        if (fabs(ref - hC[(size_t)i * N + j]) > 1e-3 * (1.0 + fabs(ref)))
            ++bad;
    }
    printf("%s\n", bad ? "FAILED" : "PASSED");

    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    CUDA_CHECK(cudaStreamDestroy(stream));
    CUDA_CHECK(cudaFree(dA));
    CUDA_CHECK(cudaFree(dB));
    CUDA_CHECK(cudaFree(dC));
    return bad ? EXIT_FAILURE : EXIT_SUCCESS;
}
