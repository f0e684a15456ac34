// Bias gradient (column sums of dout) as a performance engineer writes it (a yardstick,
// never an input to a pass): a 32 x 32 block owns 32 columns; its 32 rows of threads
// stride over the rows (coalesced 128-byte rows), then the block combines its partial
// sums through a padded shared-memory tile and a warp shuffle reduction.
#include <cuda_runtime.h>

__global__ void __launch_bounds__(1024) bias_grad_expert(float* __restrict__ dbias, const float* __restrict__ dout,
                                                         int N, int C)
{
    __shared__ float partial[32][33];
    const int c = blockIdx.x * 32 + threadIdx.x;
    float sum = 0.0f;
    if (c < C)
        for (int r = threadIdx.y; r < N; r += 32)
            sum += dout[(size_t)r * C + c];
    partial[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    // warp y reduces column y of the tile: lane x holds row x of that column
    float v = partial[threadIdx.x][threadIdx.y];
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    const int col = blockIdx.x * 32 + threadIdx.y;
    if (threadIdx.x == 0 && col < C)
        dbias[col] = v;
}

void bias_backward(float* dbias, const float* dout, int N, int C)
{
    dim3 block(32, 32);
    bias_grad_expert<<<(C + 31) / 32, block>>>(dbias, dout, N, C);
}
