// tanh-approximation GELU with a grid-stride loop and a fixed grid.
#include <cuda_runtime.h>
#include <math.h>

__global__ void gelu_grid_stride(float* y, const float* x, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        float v = x[i];
        float inner = 0.7978845608f * (v + 0.044715f * v * v * v);
        y[i] = 0.5f * v * (1.0f + tanhf(inner));
    }
}

void gelu(float* y, const float* x, long n) { gelu_grid_stride<<<1024, 256>>>(y, x, n); }
