// GELU (tanh approximation) as it is usually first written: one element per thread.
#include <cuda_runtime.h>

#define GELU_SCALING_FACTOR sqrtf(2.0f / M_PI)

__global__ void gelu_f32_naive(float* out, const float* inp, int N)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        float x = inp[i];
        float cube = 0.044715f * x * x * x;
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x + cube)));
    }
}

void gelu_forward(float* out, const float* inp, int N)
{
    const int block_size = 128;
    const int grid_size = (N + block_size - 1) / block_size;
    gelu_f32_naive<<<grid_size, block_size>>>(out, inp, N);
}
