// Tiled matrix multiply templated on element type and tile size.
//
//   C = A * B, A: M x K, B: K x N, C: M x N (row-major)
//
// The same kernel is instantiated for float with 16x16 tiles and for double
// with 32x32 tiles; main() runs both and compares them.

#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>

#define CUDA_CHECK(call)                                                         \
    do {                                                                         \
        cudaError_t err_ = (call);                                               \
        if (err_ != cudaSuccess) {                                               \
            fprintf(stderr, "CUDA error: %s at %s:%d\n", cudaGetErrorString(err_), \
                    __FILE__, __LINE__);                                         \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

template <typename T, int TILE>
__global__ void matmul_tiled(const T *__restrict__ A, const T *__restrict__ B, T *__restrict__ C,
                             int M, int N, int K)
{
    __shared__ T sA[TILE][TILE];
    __shared__ T sB[TILE][TILE];

    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    T sum = T(0);

    for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
        const int a_col = t * TILE + threadIdx.x;
        const int b_row = t * TILE + threadIdx.y;
        sA[threadIdx.y][threadIdx.x] = (row < M && a_col < K) ? A[row * K + a_col] : T(0);
        sB[threadIdx.y][threadIdx.x] = (b_row < K && col < N) ? B[b_row * N + col] : T(0);
        __syncthreads();
        for (int k = 0; k < TILE; ++k)
            sum += sA[threadIdx.y][k] * sB[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = sum;
}

template <typename T, int TILE>
double run_matmul(int M, int N, int K, const std::vector<double> &a, const std::vector<double> &b,
                  std::vector<double> &c)
{
    std::vector<T> hA(a.begin(), a.end()), hB(b.begin(), b.end()), hC((size_t)M * N);
    T *dA, *dB, *dC;
    CUDA_CHECK(cudaMalloc(&dA, hA.size() * sizeof(T)));
    CUDA_CHECK(cudaMalloc(&dB, hB.size() * sizeof(T)));
    CUDA_CHECK(cudaMalloc(&dC, hC.size() * sizeof(T)));
    CUDA_CHECK(cudaMemcpy(dA, hA.data(), hA.size() * sizeof(T), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dB, hB.data(), hB.size() * sizeof(T), cudaMemcpyHostToDevice));

    cudaStream_t stream;
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaStreamCreate(&stream));
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));

    dim3 block(TILE, TILE);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    CUDA_CHECK(cudaEventRecord(start, stream));
    matmul_tiled<T, TILE><<<grid, block, 0, stream>>>(dA, dB, dC, M, N, K);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));

    CUDA_CHECK(cudaMemcpy(hC.data(), dC, hC.size() * sizeof(T), cudaMemcpyDeviceToHost));
    c.assign(hC.begin(), hC.end());

    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    CUDA_CHECK(cudaStreamDestroy(stream));
    CUDA_CHECK(cudaFree(dA));
    CUDA_CHECK(cudaFree(dB));
    CUDA_CHECK(cudaFree(dC));
    return ms;
}

int main(int argc, char **argv)
{
    const int M = argc > 3 ? atoi(argv[1]) : 2048;
    const int N = argc > 3 ? atoi(argv[2]) : 2048;
    const int K = argc > 3 ? atoi(argv[3]) : 2048;

    std::vector<double> a((size_t)M * K), b((size_t)K * N), c32, c64;
    for (auto &x : a) x = (double)rand() / RAND_MAX - 0.5;
    for (auto &x : b) x = (double)rand() / RAND_MAX - 0.5;

    const double ms32 = run_matmul<float, 16>(M, N, K, a, b, c32);
    const double ms64 = run_matmul<double, 32>(M, N, K, a, b, c64);

    double max_diff = 0.0;
    for (size_t i = 0; i < c64.size(); ++i)
        max_diff = fmax(max_diff, fabs(c32[i] - c64[i]));
    printf("float<16>: %.3f ms, double<32>: %.3f ms, max |diff| = %.3e\n", ms32, ms64, max_diff);
    return 0;
}
