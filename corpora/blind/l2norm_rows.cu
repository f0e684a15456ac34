// Normalise every row to unit L2 norm; one thread per row.
#include <cuda_runtime.h>

__global__ void l2_normalize(float* __restrict__ y, const float* __restrict__ x, int n_rows, int dim) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n_rows) {
        float sum_sq = 0.0f;
        for (int i = 0; i < dim; i++) {
            float v = x[row * dim + i];
            sum_sq += v * v;
        }
        float inv = 1.0f / sqrtf(sum_sq + 1e-12f);
        for (int i = 0; i < dim; i++) y[row * dim + i] = x[row * dim + i] * inv;
    }
}

void l2_normalize_rows(float* y, const float* x, int n_rows, int dim) {
    int threads = 64;
    int blocks = (n_rows + threads - 1) / threads;
    l2_normalize<<<blocks, threads>>>(y, x, n_rows, dim);
}
