// Matrix transpose as a performance engineer writes it (a yardstick, never an input to
// a pass): a 32 x 32 tile per block of 32 x 8 threads through a padded shared-memory
// tile (no bank conflicts), so both the reads and the writes are coalesced.
#include <cuda_runtime.h>

#define TILE 32
#define ROWS 8

__global__ void __launch_bounds__(TILE * ROWS) transpose_expert(float* __restrict__ out,
                                                                const float* __restrict__ in, int rows, int cols)
{
    __shared__ float tile[TILE][TILE + 1];
    const int j = blockIdx.x * TILE + threadIdx.x;
    const int i0 = blockIdx.y * TILE;
#pragma unroll
    for (int k = threadIdx.y; k < TILE; k += ROWS)
        if (i0 + k < rows && j < cols)
            tile[k][threadIdx.x] = in[(size_t)(i0 + k) * cols + j];
    __syncthreads();
    const int i = i0 + threadIdx.x;
    const int j0 = blockIdx.x * TILE;
#pragma unroll
    for (int k = threadIdx.y; k < TILE; k += ROWS)
        if (j0 + k < cols && i < rows)
            out[(size_t)(j0 + k) * rows + i] = tile[threadIdx.x][k];
}

void transpose(float* out, const float* in, int rows, int cols)
{
    dim3 grid((cols + TILE - 1) / TILE, (rows + TILE - 1) / TILE);
    transpose_expert<<<grid, dim3(TILE, ROWS)>>>(out, in, rows, cols);
}
