// Pairwise squared Euclidean distances between two point sets (k-NN / k-means).
//
//   D[i][j] = sum_k (X[i][k] - Y[j][k])^2     X: n x dim, Y: m x dim, D: n x m
//
// 16x16 blocks; tiles of X and Y are staged through shared memory. Row and
// column indices are spelled as macros, as in many older CUDA codes.

#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>

#define TILE 16
#define ROW (blockIdx.y * TILE + threadIdx.y)
#define COL (blockIdx.x * TILE + threadIdx.x)
#define YROW (blockIdx.x * TILE + threadIdx.y)  /* Y point loaded by this thread */

#define CUDA_ERR(call)                                                          \
    {                                                                           \
        cudaError_t e = (call);                                                 \
        if (e != cudaSuccess) {                                                 \
            fprintf(stderr, "cuda: %s (%s line %d)\n", cudaGetErrorString(e),  \
                    __FILE__, __LINE__);                                        \
            exit(1);                                                            \
        }                                                                       \
    }

__global__ void pairwise_sqdist(const float *X, const float *Y, float *D, int n, int m, int dim)
{
    __shared__ float xs[TILE][TILE + 1];
    __shared__ float ys[TILE][TILE + 1];

    float acc = 0.0f;
    for (int k0 = 0; k0 < dim; k0 += TILE) {
        const int k = k0 + threadIdx.x;
        xs[threadIdx.y][threadIdx.x] = (ROW < n && k < dim) ? X[ROW * dim + k] : 0.0f;
        ys[threadIdx.y][threadIdx.x] = (YROW < m && k < dim) ? Y[YROW * dim + k] : 0.0f;
        __syncthreads();

        for (int kk = 0; kk < TILE; ++kk) {
            const float d = xs[threadIdx.y][kk] - ys[threadIdx.x][kk];
            acc += d * d;
        }
        __syncthreads();
    }

    if (ROW < n && COL < m)
        D[ROW * m + COL] = acc;
}

int main(int argc, char **argv)
{
    int n = 8192, m = 8192, dim = 64;
    if (argc == 4) {
        n = atoi(argv[1]);
        m = atoi(argv[2]);
        dim = atoi(argv[3]);
    }

    float *hX = (float *)malloc((size_t)n * dim * sizeof(float));
    float *hY = (float *)malloc((size_t)m * dim * sizeof(float));
    for (size_t i = 0; i < (size_t)n * dim; i++) hX[i] = rand() / (float)RAND_MAX;
    for (size_t i = 0; i < (size_t)m * dim; i++) hY[i] = rand() / (float)RAND_MAX;

    float *dX, *dY, *dD;
    CUDA_ERR(cudaMalloc((void **)&dX, (size_t)n * dim * sizeof(float)));
    CUDA_ERR(cudaMalloc((void **)&dY, (size_t)m * dim * sizeof(float)));
    CUDA_ERR(cudaMalloc((void **)&dD, (size_t)n * m * sizeof(float)));
    CUDA_ERR(cudaMemcpy(dX, hX, (size_t)n * dim * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_ERR(cudaMemcpy(dY, hY, (size_t)m * dim * sizeof(float), cudaMemcpyHostToDevice));

    dim3 threads(TILE, TILE);
    dim3 blocks((m + TILE - 1) / TILE, (n + TILE - 1) / TILE);
    pairwise_sqdist<<<blocks, threads, 0, 0>>>(dX, dY, dD, n, m, dim);
    CUDA_ERR(cudaGetLastError());
    CUDA_ERR(cudaDeviceSynchronize());

    float d00;
    CUDA_ERR(cudaMemcpy(&d00, dD, sizeof(float), cudaMemcpyDeviceToHost));
    printf("D[0][0] = %f\n", d00);

    cudaFree(dX);
    cudaFree(dY);
    cudaFree(dD);
    free(hX);
    free(hY);
    return 0;
}
