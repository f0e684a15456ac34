// GELU forward (tanh approximation), one element per thread.

#include <cmath>
#include <cuda_runtime.h>

#define GELU_SCALING_FACTOR 0.7978845608f

__global__ void gelu_forward(float *out, const float *inp, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = inp[i];
        float cube = 0.044715f * x * x * x;
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x + cube)));
    }
}

#ifndef GELU_FORWARD_BLOCK_X
#define GELU_FORWARD_BLOCK_X 256
#endif
void gelu(float *out, const float *inp, int n)
{
    gelu_forward<<<(n + GELU_FORWARD_BLOCK_X - 1) / GELU_FORWARD_BLOCK_X, GELU_FORWARD_BLOCK_X>>>(out, inp, n);
}
