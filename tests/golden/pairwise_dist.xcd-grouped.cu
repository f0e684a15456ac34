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
#define ROW (kxform_block.y * TILE + threadIdx.y)
#define COL (kxform_block.x * TILE + threadIdx.x)
#define YROW (kxform_block.x * TILE + threadIdx.y)  /* Y point loaded by this thread */

#define CUDA_ERR(call)                                                          \
    {                                                                           \
        cudaError_t e = (call);                                                 \
        if (e != cudaSuccess) {                                                 \
            fprintf(stderr, "cuda: %s (%s line %d)\n", cudaGetErrorString(e),  \
                    __FILE__, __LINE__);                                        \
            exit(1);                                                            \
        }                                                                       \
    }

#if !defined(KXFORM_SWIZZLE_XCD_GROUPED_ALONGY_GROUP4_XCDS8_DEFINED) && (defined(__CUDACC__) || defined(__HIPCC__))
#define KXFORM_SWIZZLE_XCD_GROUPED_ALONGY_GROUP4_XCDS8_DEFINED
/* kxform swizzle xcd-grouped(along=y,group=4,xcds=8): logical block (x, y) for physical block (bx, by).
   A bijection on every gx x gy grid with gx*gy < 2^32 (checked by kxform). */
static __device__ __forceinline__ uint2 kxform_swizzle_xcd_grouped_alongy_group4_xcds8(
    const unsigned bx, const unsigned by, const unsigned gx, const unsigned gy)
{
    const unsigned pid = by * gx + bx;
    const unsigned total = gx * gy;
    const unsigned per = total / 8u + (total % 8u != 0u);  /* blocks per XCD, rounded up */
    const unsigned tall = total % 8u == 0u ? 8u : total % 8u;  /* XCDs that get `per` blocks */
    const unsigned xcd = pid % 8u, local = pid / 8u;
    const unsigned id = xcd < tall ? xcd * per + local : tall * per + (xcd - tall) * (per - 1u) + local;
    /* blocks in one group of 4 rows (a group past 2^32 - 1 holds every block) */
    const unsigned per_group = gx <= 0xffffffffu / 4u ? 4u * gx : 0xffffffffu;
    const unsigned first = (id / per_group) * 4u;
    const unsigned size = gy - first < 4u ? gy - first : 4u;  /* last group may be short */
    const unsigned in_group = id % per_group;
    return make_uint2(in_group / size, first + in_group % size);
}
#endif

__global__ void pairwise_sqdist(const float *X, const float *Y, float *D, int n, int m, int dim)
{
    const uint2 kxform_block = kxform_swizzle_xcd_grouped_alongy_group4_xcds8(blockIdx.x, blockIdx.y, gridDim.x, gridDim.y);
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
