// Naive SGEMM for ROCm/HIP: C = A * B, one thread per output element.
//
// A is M x K, B is K x N, C is M x N (row-major). Written with the HIP index
// built-ins and hipLaunchKernelGGL; 2-D grid-stride loops cover any size.
//
// Build: hipcc -O3 --offload-arch=gfx942 sgemm_naive.hip -o sgemm_naive

#include <hip/hip_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define HIP_CHECK(command)                                                       \
    {                                                                            \
        hipError_t status = command;                                             \
        if (status != hipSuccess) {                                              \
            std::fprintf(stderr, "Error: HIP reports %s at %s:%d\n",             \
                         hipGetErrorString(status), __FILE__, __LINE__);         \
            std::exit(EXIT_FAILURE);                                             \
        }                                                                        \
    }

constexpr int BLOCK_X = 16;
constexpr int BLOCK_Y = 16;

#if !defined(KXFORM_SWIZZLE_DIAGONAL_DEFINED) && (defined(__CUDACC__) || defined(__HIPCC__))
#define KXFORM_SWIZZLE_DIAGONAL_DEFINED
/* kxform swizzle diagonal: logical block (x, y) for physical block (bx, by).
   A bijection on every gx x gy grid with gx*gy < 2^32 (checked by kxform). */
static __device__ __forceinline__ uint2 kxform_swizzle_diagonal(
    const unsigned bx, const unsigned by, const unsigned gx, const unsigned gy)
{
    const unsigned pid = by * gx + bx;
    const unsigned ly = pid % gy;
    return make_uint2((pid / gy + ly) % gx, ly);
}
#endif

__global__ void sgemm_naive(const float* __restrict__ A, const float* __restrict__ B,
                            float* __restrict__ C, int M, int N, int K)
{
    const uint2 kxform_block = kxform_swizzle_diagonal(hipBlockIdx_x, hipBlockIdx_y, hipGridDim_x, hipGridDim_y);
    for (int row = kxform_block.y * hipBlockDim_y + hipThreadIdx_y; row < M;
         row += hipGridDim_y * hipBlockDim_y) {
        for (int col = kxform_block.x * hipBlockDim_x + hipThreadIdx_x; col < N;
             col += hipGridDim_x * hipBlockDim_x) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k)
                acc += A[row * K + k] * B[k * N + col];
            C[row * N + col] = acc;
        }
    }
}

int main(int argc, char** argv)
{
    int M = 4096, N = 4096, K = 4096;
    if (argc == 4) {
        M = std::atoi(argv[1]);
        N = std::atoi(argv[2]);
        K = std::atoi(argv[3]);
    }

    std::vector<float> hA((size_t)M * K), hB((size_t)K * N), hC((size_t)M * N);
    for (auto& x : hA) x = static_cast<float>(std::rand()) / RAND_MAX;
    for (auto& x : hB) x = static_cast<float>(std::rand()) / RAND_MAX;

    float *dA, *dB, *dC;
    HIP_CHECK(hipMalloc(&dA, hA.size() * sizeof(float)));
    HIP_CHECK(hipMalloc(&dB, hB.size() * sizeof(float)));
    HIP_CHECK(hipMalloc(&dC, hC.size() * sizeof(float)));
    HIP_CHECK(hipMemcpy(dA, hA.data(), hA.size() * sizeof(float), hipMemcpyHostToDevice));
    HIP_CHECK(hipMemcpy(dB, hB.data(), hB.size() * sizeof(float), hipMemcpyHostToDevice));

    hipStream_t stream;
    HIP_CHECK(hipStreamCreate(&stream));
    const dim3 block(BLOCK_X, BLOCK_Y);
    const dim3 grid((N + BLOCK_X - 1) / BLOCK_X, (M + BLOCK_Y - 1) / BLOCK_Y);
    hipLaunchKernelGGL(sgemm_naive, grid, block, 0, stream, dA, dB, dC, M, N, K);
    HIP_CHECK(hipGetLastError());
    HIP_CHECK(hipStreamSynchronize(stream));

    HIP_CHECK(hipMemcpy(hC.data(), dC, hC.size() * sizeof(float), hipMemcpyDeviceToHost));
    std::printf("C[0] = %f\n", hC[0]);

    HIP_CHECK(hipStreamDestroy(stream));
    HIP_CHECK(hipFree(dA));
    HIP_CHECK(hipFree(dB));
    HIP_CHECK(hipFree(dC));
    return 0;
}
