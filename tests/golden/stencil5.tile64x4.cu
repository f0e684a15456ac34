// 2-D five-point Jacobi stencil, one thread per grid point.
//
//   out[y][x] = c0 * in[y][x] + c1 * (in[y][x-1] + in[y][x+1] + in[y-1][x] + in[y+1][x])
//
// Boundary points are copied unchanged. The host runs a fixed number of
// sweeps, swapping the two buffers between launches.

#include <cstdio>
#include <cstdlib>
#include <utility>
#include <cuda_runtime.h>

#ifndef BX
#define BX 64
#endif
#ifndef BY
#define BY 4
#endif

#define CHECK_CUDA(call)                                                        \
    do {                                                                        \
        cudaError_t status_ = call;                                             \
        if (status_ != cudaSuccess) {                                           \
            fprintf(stderr, "CUDA error (%s:%d): %s\n", __FILE__, __LINE__,     \
                    cudaGetErrorString(status_));                               \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

__global__ void jacobi5(const float *__restrict__ in, float *__restrict__ out, int nx,
                        int ny, float c0, float c1)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny)
        return;

    const int idx = y * nx + x;
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
        out[idx] = in[idx];
        return;
    }
    out[idx] = c0 * in[idx] + c1 * (in[idx - 1] + in[idx + 1] + in[idx - nx] + in[idx + nx]);
}

int main(int argc, char **argv)
{
    const int nx = argc > 2 ? atoi(argv[1]) : 8192;
    const int ny = argc > 2 ? atoi(argv[2]) : 8192;
    const int sweeps = argc > 3 ? atoi(argv[3]) : 100;
    const size_t bytes = (size_t)nx * ny * sizeof(float);

    float *h = (float *)malloc(bytes);
    for (int y = 0; y < ny; ++y)
        for (int x = 0; x < nx; ++x)
            h[(size_t)y * nx + x] = (x == 0) ? 1.0f : 0.0f;  // hot left wall

    float *d_a, *d_b;
    CHECK_CUDA(cudaMalloc(&d_a, bytes));
    CHECK_CUDA(cudaMalloc(&d_b, bytes));
    CHECK_CUDA(cudaMemcpy(d_a, h, bytes, cudaMemcpyHostToDevice));

    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreate(&stream));
    dim3 block(BX, BY);
    dim3 grid((nx + BX - 1) / BX, (ny + BY - 1) / BY);
    for (int s = 0; s < sweeps; ++s) {
        jacobi5<<<grid, block, 0, stream>>>(d_a, d_b, nx, ny, 0.2f, 0.2f);
        std::swap(d_a, d_b);
    }
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaMemcpy(h, d_a, bytes, cudaMemcpyDeviceToHost));
    printf("u[ny/2][1] = %f\n", h[(size_t)(ny / 2) * nx + 1]);

    CHECK_CUDA(cudaStreamDestroy(stream));
    CHECK_CUDA(cudaFree(d_a));
    CHECK_CUDA(cudaFree(d_b));
    free(h);
    return 0;
}
