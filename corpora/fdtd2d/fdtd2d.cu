/**
 * fdtd2d.cu: 2-D finite-difference time-domain kernel (PolyBench/GPU style).
 *
 * Three kernels per time step update the electric fields ey and ex from the
 * magnetic field hz, then hz from the new ex and ey. Array shapes:
 *   ex: nx x (ny + 1),  ey: (nx + 1) x ny,  hz: nx x ny,  _fict_: tmax
 * Problem size comes from the command line instead of compile-time macros.
 */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda_runtime.h>

/* Thread block dimensions */
#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8

typedef float DATA_TYPE;

#define CUDA_SAFE_CALL(x)                                                         \
    do {                                                                          \
        cudaError_t e = (x);                                                      \
        if (e != cudaSuccess) {                                                   \
            printf("%s failed: %s (%s:%d)\n", #x, cudaGetErrorString(e), __FILE__, \
                   __LINE__);                                                     \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

__global__ void fdtd_step1_kernel(DATA_TYPE *_fict_, DATA_TYPE *ex, DATA_TYPE *ey,
                                  DATA_TYPE *hz, int t, int nx, int ny)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;

    if ((i < nx) && (j < ny)) {
        if (i == 0) {
            ey[i * ny + j] = _fict_[t];
        } else {
            ey[i * ny + j] = ey[i * ny + j] - 0.5f * (hz[i * ny + j] - hz[(i - 1) * ny + j]);
        }
    }
}

__global__ void fdtd_step2_kernel(DATA_TYPE *ex, DATA_TYPE *ey, DATA_TYPE *hz, int t,
                                  int nx, int ny)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;

    if ((i < nx) && (j < ny) && (j > 0)) {
        ex[i * (ny + 1) + j] = ex[i * (ny + 1) + j] - 0.5f * (hz[i * ny + j] - hz[i * ny + (j - 1)]);
    }
}

__global__ void fdtd_step3_kernel(DATA_TYPE *ex, DATA_TYPE *ey, DATA_TYPE *hz, int t,
                                  int nx, int ny)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;

    if ((i < nx) && (j < ny)) {
        hz[i * ny + j] = hz[i * ny + j] - 0.7f * (ex[i * (ny + 1) + (j + 1)] - ex[i * (ny + 1) + j] +
                                                  ey[(i + 1) * ny + j] - ey[i * ny + j]);
    }
}

void init_arrays(int tmax, int nx, int ny, DATA_TYPE *_fict_, DATA_TYPE *ex, DATA_TYPE *ey,
                 DATA_TYPE *hz)
{
    for (int i = 0; i < tmax; i++)
        _fict_[i] = (DATA_TYPE)i;
    for (int i = 0; i < nx; i++)
        for (int j = 0; j <= ny; j++)
            ex[i * (ny + 1) + j] = ((DATA_TYPE)i * (j + 1) + 1) / nx;
    for (int i = 0; i <= nx; i++)
        for (int j = 0; j < ny; j++)
            ey[i * ny + j] = ((DATA_TYPE)(i - 1) * (j + 2) + 2) / nx;
    for (int i = 0; i < nx; i++)
        for (int j = 0; j < ny; j++)
            hz[i * ny + j] = ((DATA_TYPE)(i - 9) * (j + 4) + 3) / nx;
}

void fdtdCuda(int tmax, int nx, int ny, DATA_TYPE *_fict_, DATA_TYPE *ex, DATA_TYPE *ey,
              DATA_TYPE *hz, DATA_TYPE *hz_outputFromGpu)
{
    DATA_TYPE *_fict_gpu, *ex_gpu, *ey_gpu, *hz_gpu;
    CUDA_SAFE_CALL(cudaMalloc((void **)&_fict_gpu, sizeof(DATA_TYPE) * tmax));
    CUDA_SAFE_CALL(cudaMalloc((void **)&ex_gpu, sizeof(DATA_TYPE) * nx * (ny + 1)));
    CUDA_SAFE_CALL(cudaMalloc((void **)&ey_gpu, sizeof(DATA_TYPE) * (nx + 1) * ny));
    CUDA_SAFE_CALL(cudaMalloc((void **)&hz_gpu, sizeof(DATA_TYPE) * nx * ny));

    CUDA_SAFE_CALL(cudaMemcpy(_fict_gpu, _fict_, sizeof(DATA_TYPE) * tmax, cudaMemcpyHostToDevice));
    CUDA_SAFE_CALL(cudaMemcpy(ex_gpu, ex, sizeof(DATA_TYPE) * nx * (ny + 1), cudaMemcpyHostToDevice));
    CUDA_SAFE_CALL(cudaMemcpy(ey_gpu, ey, sizeof(DATA_TYPE) * (nx + 1) * ny, cudaMemcpyHostToDevice));
    CUDA_SAFE_CALL(cudaMemcpy(hz_gpu, hz, sizeof(DATA_TYPE) * nx * ny, cudaMemcpyHostToDevice));

    dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
    dim3 grid((size_t)ceil(((float)ny) / ((float)block.x)), (size_t)ceil(((float)nx) / ((float)block.y)));
    cudaStream_t stream;
    CUDA_SAFE_CALL(cudaStreamCreate(&stream));

    for (int t = 0; t < tmax; t++) {
        fdtd_step1_kernel<<<grid, block, 0, stream>>>(_fict_gpu, ex_gpu, ey_gpu, hz_gpu, t, nx, ny);
        fdtd_step2_kernel<<<grid, block, 0, stream>>>(ex_gpu, ey_gpu, hz_gpu, t, nx, ny);
        fdtd_step3_kernel<<<grid, block, 0, stream>>>(ex_gpu, ey_gpu, hz_gpu, t, nx, ny);
    }
    CUDA_SAFE_CALL(cudaGetLastError());
    CUDA_SAFE_CALL(cudaStreamSynchronize(stream));

    CUDA_SAFE_CALL(cudaMemcpy(hz_outputFromGpu, hz_gpu, sizeof(DATA_TYPE) * nx * ny, cudaMemcpyDeviceToHost));

    CUDA_SAFE_CALL(cudaStreamDestroy(stream));
    cudaFree(_fict_gpu);
    cudaFree(ex_gpu);
    cudaFree(ey_gpu);
    cudaFree(hz_gpu);
}

int main(int argc, char *argv[])
{
    int tmax = 500, nx = 2048, ny = 2048;
    if (argc == 4) {
        tmax = atoi(argv[1]);
        nx = atoi(argv[2]);
        ny = atoi(argv[3]);
    }

    DATA_TYPE *_fict_ = (DATA_TYPE *)malloc(tmax * sizeof(DATA_TYPE));
    DATA_TYPE *ex = (DATA_TYPE *)malloc(nx * (ny + 1) * sizeof(DATA_TYPE));
    DATA_TYPE *ey = (DATA_TYPE *)malloc((nx + 1) * ny * sizeof(DATA_TYPE));
    DATA_TYPE *hz = (DATA_TYPE *)malloc(nx * ny * sizeof(DATA_TYPE));
    DATA_TYPE *hz_outputFromGpu = (DATA_TYPE *)malloc(nx * ny * sizeof(DATA_TYPE));

    init_arrays(tmax, nx, ny, _fict_, ex, ey, hz);
    fdtdCuda(tmax, nx, ny, _fict_, ex, ey, hz, hz_outputFromGpu);
    printf("hz[0] = %f\n", hz_outputFromGpu[0]);

    free(_fict_);
    free(ex);
    free(ey);
    free(hz);
    free(hz_outputFromGpu);
    return 0;
}
