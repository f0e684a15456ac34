// y = A^T x for a row-major M x N matrix: one thread per output column sums over the rows.
#include <cuda_runtime.h>

__global__ void gemv_t(float* y, const float* A, const float* x, int M, int N) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < N) {
        float s = 0.0f;
        for (int i = 0; i < M; ++i) s += A[(size_t)i * N + j] * x[i];
        y[j] = s;
    }
}

void gemv_transposed(float* y, const float* A, const float* x, int M, int N, cudaStream_t stream) {
    dim3 block(128);
    dim3 grid((N + block.x - 1) / block.x);
    gemv_t<<<grid, block, 0, stream>>>(y, A, x, M, N);
}
