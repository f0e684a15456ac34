// Out-of-place transpose with leading dimensions: out[c * ldo + r] = in[r * ldi + c].
#include <cuda_runtime.h>

__global__ void transpose_ld(float* out, const float* in, int R, int C, int ldi, int ldo) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < R && c < C) out[c * ldo + r] = in[r * ldi + c];
}

void transpose(float* out, const float* in, int R, int C) {
    dim3 block(32, 8);
    dim3 grid((C + 31) / 32, (R + 7) / 8);
    transpose_ld<<<grid, block>>>(out, in, R, C, C, R);
}
