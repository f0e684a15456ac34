// One Jacobi sweep (5-point) as a performance engineer writes it (a yardstick, never an
// input to a pass): a 32 x 32 tile per block of 32 x 8 threads, staged with its one-point
// halo in shared memory (each point loaded once instead of five times), four points per
// thread, 64-bit indices.
#include <cuda_runtime.h>

#define TILE 32
#define ROWS 8

__global__ void __launch_bounds__(TILE * ROWS) jacobi2d_expert(float* __restrict__ B, const float* __restrict__ A,
                                                               int N)
{
    __shared__ float s[TILE + 2][TILE + 2 + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int i0 = blockIdx.y * TILE, j0 = blockIdx.x * TILE;
    for (int e = ty * TILE + tx; e < (TILE + 2) * (TILE + 2); e += TILE * ROWS) {
        const int r = e / (TILE + 2), c = e % (TILE + 2);
        const int y = i0 + r - 1, x = j0 + c - 1;
        s[r][c] = (y >= 0 && y < N && x >= 0 && x < N) ? A[(size_t)y * N + x] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE / ROWS; k++) {
        const int r = ty + k * ROWS + 1, c = tx + 1;
        const int i = i0 + r - 1, j = j0 + c - 1;
        if (i >= N || j >= N)
            continue;
        const size_t at = (size_t)i * N + j;
        if (i > 0 && i < N - 1 && j > 0 && j < N - 1)
            B[at] = 0.2f * (s[r][c] + s[r][c - 1] + s[r][c + 1] + s[r + 1][c] + s[r - 1][c]);
        else
            B[at] = s[r][c];
    }
}

void jacobi2d_step(float* B, const float* A, int N)
{
    dim3 grid((N + TILE - 1) / TILE, (N + TILE - 1) / TILE);
    jacobi2d_expert<<<grid, dim3(TILE, ROWS)>>>(B, A, N);
}
