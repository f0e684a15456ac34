// y = relu(x + bias[col]) over a 2-D grid of 16x16 blocks, rows with a leading dimension.
#include <cuda_runtime.h>

__global__ void bias_relu_2d(float* y, const float* x, const float* bias, int rows, int cols, int ldx, int ldy) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows && col < cols) {
        float v = x[row * ldx + col] + bias[col];
        y[row * ldy + col] = v > 0.0f ? v : 0.0f;
    }
}

void bias_relu(float* y, const float* x, const float* bias, int rows, int cols) {
    dim3 threads(16, 16);
    dim3 blocks((cols + threads.x - 1) / threads.x, (rows + threads.y - 1) / threads.y);
    bias_relu_2d<<<blocks, threads>>>(y, x, bias, rows, cols, cols, cols);
}
