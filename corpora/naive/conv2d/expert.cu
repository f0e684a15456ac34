// 2-D convolution (5 x 5 filter, zero padding) as a performance engineer writes it (a
// yardstick, never an input to a pass): a 32 x 32 output tile per block of 32 x 8
// threads, its input tile with a 2-pixel halo and the filter staged in shared memory,
// four outputs per thread (rows 8 apart) so each staged pixel is reused 25 times.
#include <cuda_runtime.h>

#define RADIUS 2
#define TILE 32
#define ROWS 8

__global__ void __launch_bounds__(TILE * ROWS) conv2d_expert(float* __restrict__ out, const float* __restrict__ in,
                                                             const float* __restrict__ filt, int H, int W)
{
    __shared__ float tile[TILE + 2 * RADIUS][TILE + 2 * RADIUS + 1];
    __shared__ float f[(2 * RADIUS + 1) * (2 * RADIUS + 1)];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int i0 = blockIdx.y * TILE, j0 = blockIdx.x * TILE;
    const int tid = ty * TILE + tx;
    if (tid < (2 * RADIUS + 1) * (2 * RADIUS + 1))
        f[tid] = filt[tid];
    for (int e = tid; e < (TILE + 2 * RADIUS) * (TILE + 2 * RADIUS); e += TILE * ROWS) {
        const int r = e / (TILE + 2 * RADIUS), c = e % (TILE + 2 * RADIUS);
        const int y = i0 + r - RADIUS, x = j0 + c - RADIUS;
        tile[r][c] = (y >= 0 && y < H && x >= 0 && x < W) ? in[(size_t)y * W + x] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE / ROWS; k++) {
        const int r = ty + k * ROWS;
        const int i = i0 + r, j = j0 + tx;
        if (i >= H || j >= W)
            continue;
        float acc = 0.0f;
#pragma unroll
        for (int p = 0; p < 2 * RADIUS + 1; p++)
#pragma unroll
            for (int q = 0; q < 2 * RADIUS + 1; q++) {
                const int y = i + p - RADIUS, x = j + q - RADIUS;
                if (y >= 0 && y < H && x >= 0 && x < W)  // the same terms, in the same order, as one pixel
                    acc += f[p * (2 * RADIUS + 1) + q] * tile[r + p][tx + q];
            }
        out[(size_t)i * W + j] = acc;
    }
}

void conv2d(float* out, const float* in, const float* filt, int H, int W)
{
    dim3 block(TILE, ROWS);
    dim3 grid((W + TILE - 1) / TILE, (H + TILE - 1) / TILE);
    conv2d_expert<<<grid, block>>>(out, in, filt, H, W);
}
