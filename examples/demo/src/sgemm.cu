// Shared-memory tiled SGEMM, C = A * B (row-major; any M, N, K).
#include "demo.h"
#include "tile.cuh"

#define TILE DEMO_TILE

__global__ void sgemm(int M, int N, int K, const float *A, const float *B, float *C)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = tile_origin(blockIdx.y, TILE) + ty;
    const int col = tile_origin(blockIdx.x, TILE) + tx;
    float acc = 0.0f;
    for (int t = 0; t < K; t += TILE) {
        As[ty][tx] = (row < M && t + tx < K) ? A[row * K + t + tx] : 0.0f;
        Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = acc;
}

void launch_sgemm(int M, int N, int K, const float *A, const float *B, float *C)
{
    dim3 block(TILE, TILE);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    sgemm<<<grid, block>>>(M, N, K, A, B, C);
}
