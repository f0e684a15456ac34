// One Jacobi sweep (5-point, PolyBench jacobi-2d) as it is usually first written: one
// point per thread, five loads from global memory each; the boundary is copied.
#include <cuda_runtime.h>

#ifndef JACOBI2D_NAIVE_COARSEN
#define JACOBI2D_NAIVE_COARSEN 4
#endif
__global__ void jacobi2d_naive(float* B, const float* A, int N)
{
    const long long kx_v0 = (long long)(blockIdx.y * blockDim.y + threadIdx.y) * JACOBI2D_NAIVE_COARSEN;
    bool kx_overlap = false;
    long long kx_A_lo = ((long long)N) * (kx_v0 + (-1)) + ((long long)blockDim.x * (long long)blockIdx.x + (long long)threadIdx.x), kx_A_hi = kx_A_lo;
    { const long long kx_e = ((long long)N) * (kx_v0 + (1) + JACOBI2D_NAIVE_COARSEN - 1) + ((long long)blockDim.x * (long long)blockIdx.x + (long long)threadIdx.x);
      kx_A_lo = kx_e < kx_A_lo ? kx_e : kx_A_lo; kx_A_hi = kx_e > kx_A_hi ? kx_e : kx_A_hi; }
    long long kx_B_lo = ((long long)N) * (kx_v0) + ((long long)blockDim.x * (long long)blockIdx.x + (long long)threadIdx.x), kx_B_hi = kx_B_lo;
    { const long long kx_e = ((long long)N) * (kx_v0 + JACOBI2D_NAIVE_COARSEN - 1) + ((long long)blockDim.x * (long long)blockIdx.x + (long long)threadIdx.x);
      kx_B_lo = kx_e < kx_B_lo ? kx_e : kx_B_lo; kx_B_hi = kx_e > kx_B_hi ? kx_e : kx_B_hi; }
    kx_overlap = kx_overlap || (((long long)(A) + (kx_A_lo) * (long long)sizeof(A[0])) < ((long long)(B) + (kx_B_hi + 1) * (long long)sizeof(B[0])) && ((long long)(B) + (kx_B_lo) * (long long)sizeof(B[0])) < ((long long)(A) + (kx_A_hi + 1) * (long long)sizeof(A[0])));
    if (!kx_overlap) {
        float kx_r0[JACOBI2D_NAIVE_COARSEN + 2];
        bool kx_h0[JACOBI2D_NAIVE_COARSEN + 2] = {};
        #pragma unroll
        for (int kx_f = 0; kx_f < JACOBI2D_NAIVE_COARSEN; ++kx_f) {
            int j = blockIdx.x * blockDim.x + threadIdx.x;
            int i = (blockIdx.y * blockDim.y + threadIdx.y) * JACOBI2D_NAIVE_COARSEN + kx_f;
            if (i < N && j < N) {
                if (i > 0 && i < N - 1 && j > 0 && j < N - 1)
                    B[i * N + j] = 0.2f * ((kx_h0[kx_f + 1] ? kx_r0[kx_f + 1] : (kx_h0[kx_f + 1] = true) ? (kx_r0[kx_f + 1] = A[i * N + j]) : kx_r0[kx_f + 1]) + A[i * N + j - 1] + A[i * N + j + 1] + (kx_h0[kx_f + 2] ? kx_r0[kx_f + 2] : (kx_h0[kx_f + 2] = true) ? (kx_r0[kx_f + 2] = A[(i + 1) * N + j]) : kx_r0[kx_f + 2]) +
                                           (kx_h0[kx_f] ? kx_r0[kx_f] : (kx_h0[kx_f] = true) ? (kx_r0[kx_f] = A[(i - 1) * N + j]) : kx_r0[kx_f]));
                else
                    B[i * N + j] = (kx_h0[kx_f + 1] ? kx_r0[kx_f + 1] : (kx_h0[kx_f + 1] = true) ? (kx_r0[kx_f + 1] = A[i * N + j]) : kx_r0[kx_f + 1]);
            }
        }
    } else {
        #pragma unroll
        for (int kx_f = 0; kx_f < JACOBI2D_NAIVE_COARSEN; ++kx_f) {
            int j = blockIdx.x * blockDim.x + threadIdx.x;
            int i = (blockIdx.y * blockDim.y + threadIdx.y) * JACOBI2D_NAIVE_COARSEN + kx_f;
            if (i < N && j < N) {
                if (i > 0 && i < N - 1 && j > 0 && j < N - 1)
                    B[i * N + j] = 0.2f * (A[i * N + j] + A[i * N + j - 1] + A[i * N + j + 1] + A[(i + 1) * N + j] +
                                           A[(i - 1) * N + j]);
                else
                    B[i * N + j] = A[i * N + j];
            }
        }
    }
}

void jacobi2d_step(float* B, const float* A, int N)
{
    dim3 block(32, 8);
    dim3 grid((N + block.x - 1) / block.x, (((N + block.y - 1) / block.y) + JACOBI2D_NAIVE_COARSEN - 1) / JACOBI2D_NAIVE_COARSEN);
    jacobi2d_naive<<<grid, block>>>(B, A, N);
}
