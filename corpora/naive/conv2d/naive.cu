// 2-D convolution (5 x 5 filter, zero padding) as it is usually first written: one
// output pixel per thread, every input and filter tap read from global memory.
//   out[i, j] = sum_{p, q} filt[p, q] * in[i + p - 2, j + q - 2]
#include <cuda_runtime.h>

#define RADIUS 2

__global__ void conv2d_naive(float* out, const float* in, const float* filt, int H, int W)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < H && j < W) {
        float acc = 0.0f;
        for (int p = 0; p < 2 * RADIUS + 1; p++)
            for (int q = 0; q < 2 * RADIUS + 1; q++) {
                int y = i + p - RADIUS, x = j + q - RADIUS;
                if (y >= 0 && y < H && x >= 0 && x < W)
                    acc += filt[p * (2 * RADIUS + 1) + q] * in[(size_t)y * W + x];
            }
        out[(size_t)i * W + j] = acc;
    }
}

void conv2d(float* out, const float* in, const float* filt, int H, int W)
{
    dim3 block(16, 16);
    dim3 grid((W + block.x - 1) / block.x, (H + block.y - 1) / block.y);
    conv2d_naive<<<grid, block>>>(out, in, filt, H, W);
}
