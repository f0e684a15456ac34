// Batched dot products: out[r] = sum_k a[r, k] * b[r, k], one thread per row.
#include <cuda_runtime.h>

__global__ void row_dot(float* out, const float* a, const float* b, int R, int K) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    const int base = r * K;
    if (r >= R) return;
    float acc = 0.f;
    for (int k = 0; k < K; k++) acc += a[base + k] * b[base + k];
    out[r] = acc;
}

int ceil_div(int a, int b) { return (a + b - 1) / b; }

void row_dot_forward(float* out, const float* a, const float* b, int R, int K, const int block_size) {
    const int grid_size = ceil_div(R, block_size);
    row_dot<<<grid_size, block_size>>>(out, a, b, R, K);
}
