// 2MM (PolyBench) as naive loop nests: two kernels, one output element per thread, no
// reuse of loads.
//   tmp = alpha * A B            A is NI x NK, B is NK x NJ
//   D   = tmp C + beta * D       C is NJ x NL, D is NI x NL (row-major)
#include <cuda_runtime.h>

__global__ void mm2_kernel1(float* tmp, const float* A, const float* B, int NI, int NJ, int NK, float alpha)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < NI && j < NJ) {
        float acc = 0.0f;
        for (int k = 0; k < NK; k++)
            acc += alpha * A[(size_t)i * NK + k] * B[(size_t)k * NJ + j];
        tmp[(size_t)i * NJ + j] = acc;
    }
}

__global__ void mm2_kernel2(float* D, const float* tmp, const float* C, int NI, int NJ, int NL, float beta)
{
    int l = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < NI && l < NL) {
        float acc = D[(size_t)i * NL + l] * beta;
        for (int j = 0; j < NJ; j++)
            acc += tmp[(size_t)i * NJ + j] * C[(size_t)j * NL + l];
        D[(size_t)i * NL + l] = acc;
    }
}

void mm2(float* tmp, float* D, const float* A, const float* B, const float* C, int NI, int NJ, int NK, int NL,
         float alpha, float beta)
{
    dim3 block(32, 8);
    dim3 grid1((NJ + block.x - 1) / block.x, (NI + block.y - 1) / block.y);
    mm2_kernel1<<<grid1, block>>>(tmp, A, B, NI, NJ, NK, alpha);
    dim3 grid2((NL + block.x - 1) / block.x, (NI + block.y - 1) / block.y);
    mm2_kernel2<<<grid2, block>>>(D, tmp, C, NI, NJ, NL, beta);
}
