// Matrix transpose through a padded shared-memory tile (after the CUDA SDK
// "transposeNoBankConflicts" sample), extended with bounds checks so that any
// width and height work.
//
// idata is height x width (row-major); odata is width x height.
// Each 32x8 block moves one 32x32 tile; the +1 column of padding keeps the
// column-wise shared-memory reads free of bank conflicts.

#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#ifndef TILE_DIM
#define TILE_DIM 32
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 8
#endif

inline cudaError_t checkCuda(cudaError_t result)
{
    if (result != cudaSuccess) {
        fprintf(stderr, "CUDA Runtime Error: %s\n", cudaGetErrorString(result));
        exit(1);
    }
    return result;
}

__global__ void transposeNoBankConflicts(float *odata, const float *idata, int width, int height)
{
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];

    int xIndex = blockIdx.x * TILE_DIM + threadIdx.x;
    int yIndex = blockIdx.y * TILE_DIM + threadIdx.y;

    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (xIndex < width && yIndex + j < height)
            tile[threadIdx.y + j][threadIdx.x] = idata[(yIndex + j) * width + xIndex];

    __syncthreads();

    xIndex = blockIdx.y * TILE_DIM + threadIdx.x;
    yIndex = blockIdx.x * TILE_DIM + threadIdx.y;

    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (xIndex < height && yIndex + j < width)
            odata[(yIndex + j) * height + xIndex] = tile[threadIdx.x][threadIdx.y + j];
}

int main(int argc, char **argv)
{
    const int width = argc > 2 ? atoi(argv[1]) : 8192;
    const int height = argc > 2 ? atoi(argv[2]) : 8192;
    const size_t mem_size = (size_t)width * height * sizeof(float);

    dim3 dimGrid((width + TILE_DIM - 1) / TILE_DIM, (height + TILE_DIM - 1) / TILE_DIM, 1);
    dim3 dimBlock(TILE_DIM, BLOCK_ROWS, 1);

    float *h_idata = (float *)malloc(mem_size);
    float *h_odata = (float *)malloc(mem_size);
    for (size_t i = 0; i < (size_t)width * height; i++)
        h_idata[i] = (float)i;

    float *d_idata, *d_odata;
    checkCuda(cudaMalloc(&d_idata, mem_size));
    checkCuda(cudaMalloc(&d_odata, mem_size));
    checkCuda(cudaMemcpy(d_idata, h_idata, mem_size, cudaMemcpyHostToDevice));

    cudaStream_t stream;
    checkCuda(cudaStreamCreate(&stream));
    cudaEvent_t startEvent, stopEvent;
    checkCuda(cudaEventCreate(&startEvent));
    checkCuda(cudaEventCreate(&stopEvent));

    transposeNoBankConflicts<<<dimGrid, dimBlock, 0, stream>>>(d_odata, d_idata, width, height);
    checkCuda(cudaGetLastError());

    const int NUM_REPS = 100;
    checkCuda(cudaEventRecord(startEvent, stream));
    for (int i = 0; i < NUM_REPS; i++)
        transposeNoBankConflicts<<<dimGrid, dimBlock, 0, stream>>>(d_odata, d_idata, width, height);
    checkCuda(cudaEventRecord(stopEvent, stream));
    checkCuda(cudaEventSynchronize(stopEvent));
    float ms;
    checkCuda(cudaEventElapsedTime(&ms, startEvent, stopEvent));
    printf("%-25s %8.2f GB/s\n", "transposeNoBankConflicts",
           2e-6 * mem_size * NUM_REPS / ms);

    checkCuda(cudaMemcpy(h_odata, d_odata, mem_size, cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int r = 0; r < width && ok; r++)
        for (int c = 0; c < height; c++)
            if (h_odata[(size_t)r * height + c] != h_idata[(size_t)c * width + r]) {
                ok = false;
                break;
            }
    printf("%s\n", ok ? "PASSED" : "FAILED");

    checkCuda(cudaEventDestroy(startEvent));
    checkCuda(cudaEventDestroy(stopEvent));
    checkCuda(cudaStreamDestroy(stream));
    checkCuda(cudaFree(d_idata));
    checkCuda(cudaFree(d_odata));
    free(h_idata);
    free(h_odata);
    return ok ? 0 : 1;
}
