// Mean of every column of a row-major B x D matrix: one thread per column walks all rows.
#include <cuda_runtime.h>

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

__global__ void column_mean(const float* x, float* mean, int B, int D) {
    int d = blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= D) return;
    float acc = 0.0f;
    for (int b = 0; b < B; ++b) {
        acc += x[b * D + d];
    }
    mean[d] = acc / (float)B;
}

void column_mean_launch(const float* x, float* mean, int B, int D) {
    int block = 256;
    int grid = CEIL_DIV(D, block);
    column_mean<<<grid, block>>>(x, mean, B, D);
}
