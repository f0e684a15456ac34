// Persistent Jacobi solver: all sweeps in one cooperative launch.
//
// The grid is sized to be co-resident (occupancy API) and launched with
// cudaLaunchCooperativeKernel; blocks cover the domain with 2-D grid-stride
// loops and meet at cg::this_grid().sync() between sweeps. Every block must
// reach the grid barrier, so the kernel depends on all blocks being resident
// at once.

#include <cstdio>
#include <cstdlib>
#include <cooperative_groups.h>
#include <cuda_runtime.h>

namespace cg = cooperative_groups;

#define BDIM_X 32
#define BDIM_Y 8

#define CUDA_CHECK(call)                                                        \
    do {                                                                        \
        cudaError_t err = call;                                                 \
        if (err != cudaSuccess) {                                               \
            fprintf(stderr, "CUDA error in %s:%d: %s\n", __FILE__, __LINE__,    \
                    cudaGetErrorString(err));                                   \
            exit(EXIT_FAILURE);                                                 \
        }                                                                       \
    } while (0)

__global__ void jacobi_persistent(float *a, float *b, int nx, int ny, int iters)
{
    cg::grid_group grid = cg::this_grid();

    for (int it = 0; it < iters; ++it) {
        for (int y = blockIdx.y * blockDim.y + threadIdx.y; y < ny; y += gridDim.y * blockDim.y) {
            for (int x = blockIdx.x * blockDim.x + threadIdx.x; x < nx; x += gridDim.x * blockDim.x) {
                const int idx = y * nx + x;
                if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1)
                    b[idx] = a[idx];
                else
                    b[idx] = 0.25f * (a[idx - 1] + a[idx + 1] + a[idx - nx] + a[idx + nx]);
            }
        }
        grid.sync();
        float *t = a;
        a = b;
        b = t;
    }
}

int main(int argc, char **argv)
{
    const int nx = argc > 2 ? atoi(argv[1]) : 4096;
    const int ny = argc > 2 ? atoi(argv[2]) : 4096;
    int iters = argc > 3 ? atoi(argv[3]) : 100;
    const size_t bytes = (size_t)nx * ny * sizeof(float);

    int dev = 0, supports_coop = 0, num_sms = 0, blocks_per_sm = 0;
    CUDA_CHECK(cudaSetDevice(dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&supports_coop, cudaDevAttrCooperativeLaunch, dev));
    if (!supports_coop) {
        fprintf(stderr, "device does not support cooperative launch\n");
        return 1;
    }
    CUDA_CHECK(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, dev));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, jacobi_persistent,
                                                             BDIM_X * BDIM_Y, 0));

    float *d_a, *d_b;
    CUDA_CHECK(cudaMalloc(&d_a, bytes));
    CUDA_CHECK(cudaMalloc(&d_b, bytes));
    CUDA_CHECK(cudaMemset(d_a, 0, bytes));
    CUDA_CHECK(cudaMemset(d_b, 0, bytes));

    // A 2-D grid of co-resident blocks: as square as the budget allows.
    const int max_blocks = num_sms * blocks_per_sm;
    int gx = 1;
    while ((gx * 2) * (gx * 2) <= max_blocks)
        gx *= 2;
    const int gy = max_blocks / gx;
    dim3 block(BDIM_X, BDIM_Y);
    dim3 grid(gx, gy);

    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    int nx_ = nx, ny_ = ny;
    void *args[] = {&d_a, &d_b, &nx_, &ny_, &iters};
    CUDA_CHECK(cudaLaunchCooperativeKernel((void *)jacobi_persistent, grid, block, args, 0, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    printf("ran %d sweeps on a %dx%d grid of blocks\n", iters, gx, gy);

    CUDA_CHECK(cudaStreamDestroy(stream));
    CUDA_CHECK(cudaFree(d_a));
    CUDA_CHECK(cudaFree(d_b));
    return 0;
}
