// Layer norm backward, the weight and bias gradients, as a performance engineer writes
// them (a yardstick, never an input to a pass): a 32 x 32 block owns 32 channels and a
// slice of the rows; its 32 rows of threads stride over the slice (coalesced 128-byte
// rows, the row's mean and rstd read once per warp), the block combines its partial sums
// through a padded shared-memory tile and a warp shuffle reduction, and one atomic add
// per channel and block accumulates into the gradients (the order of the blocks' adds is
// not fixed: the tolerance covers it).
#include <cuda_runtime.h>

#define ROWS_PER_BLOCK 1024

__global__ void __launch_bounds__(1024) layernorm_wgrad_expert(float* __restrict__ dweight,
                                                               float* __restrict__ dbias,
                                                               const float* __restrict__ dout,
                                                               const float* __restrict__ inp,
                                                               const float* __restrict__ mean,
                                                               const float* __restrict__ rstd, int N, int C)
{
    __shared__ float part_w[32][33];
    __shared__ float part_b[32][33];
    const int c = blockIdx.x * 32 + threadIdx.x;
    const int first = blockIdx.y * ROWS_PER_BLOCK;
    const int last = min(N, first + ROWS_PER_BLOCK);
    float dw = 0.0f, db = 0.0f;
    if (c < C)
        for (int n = first + threadIdx.y; n < last; n += 32) {
            const float d = dout[(size_t)n * C + c];
            dw += d * (inp[(size_t)n * C + c] - mean[n]) * rstd[n];
            db += d;
        }
    part_w[threadIdx.y][threadIdx.x] = dw;
    part_b[threadIdx.y][threadIdx.x] = db;
    __syncthreads();
    // warp y reduces channel y of the tile: lane x holds row x of that channel
    float w = part_w[threadIdx.x][threadIdx.y];
    float b = part_b[threadIdx.x][threadIdx.y];
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        w += __shfl_xor_sync(0xffffffffu, w, offset);
        b += __shfl_xor_sync(0xffffffffu, b, offset);
    }
    const int channel = blockIdx.x * 32 + threadIdx.y;
    if (threadIdx.x == 0 && channel < C) {
        atomicAdd(&dweight[channel], w);
        atomicAdd(&dbias[channel], b);
    }
}

void layernorm_backward_weights(float* dweight, float* dbias, const float* dout, const float* inp,
                                const float* mean, const float* rstd, int N, int C)
{
    dim3 block(32, 32);
    dim3 grid((C + 31) / 32, (N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    layernorm_wgrad_expert<<<grid, block>>>(dweight, dbias, dout, inp, mean, rstd, N, C);
}
