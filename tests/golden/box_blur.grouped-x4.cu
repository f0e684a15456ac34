// 3x3 box blur of a single-channel float image with clamp-to-edge borders.
//
// Each 16x16 block loads its tile plus a one-pixel halo into shared memory.
// The tile origin is computed by a small __device__ helper that reads
// blockIdx, used both by the loader and by the kernel body.

#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define TILE_W 16
#define TILE_H 16
#define HALO 1

#define CUDA_CALL(x)                                                             \
    do {                                                                         \
        if ((x) != cudaSuccess) {                                                \
            printf("Error at %s:%d: %s\n", __FILE__, __LINE__,                   \
                   cudaGetErrorString(cudaGetLastError()));                      \
            exit(EXIT_FAILURE);                                                  \
        }                                                                        \
    } while (0)

// Top-left pixel of the tile this block produces.
#if !defined(KXFORM_SWIZZLE_GROUPED_ALONGX_GROUP4_DEFINED) && (defined(__CUDACC__) || defined(__HIPCC__))
#define KXFORM_SWIZZLE_GROUPED_ALONGX_GROUP4_DEFINED
/* kxform swizzle grouped(along=x,group=4): logical block (x, y) for physical block (bx, by).
   A bijection on every gx x gy grid with gx*gy < 2^32 (checked by kxform). */
static __device__ __forceinline__ uint2 kxform_swizzle_grouped_alongx_group4(
    const unsigned bx, const unsigned by, const unsigned gx, const unsigned gy)
{
    const unsigned pid = by * gx + bx;
    /* blocks in one group of 4 columns (a group past 2^32 - 1 holds every block) */
    const unsigned per_group = gy <= 0xffffffffu / 4u ? 4u * gy : 0xffffffffu;
    const unsigned first = (pid / per_group) * 4u;
    const unsigned size = gx - first < 4u ? gx - first : 4u;  /* last group may be short */
    const unsigned in_group = pid % per_group;
    return make_uint2(first + in_group % size, in_group / size);
}
#endif

__device__ __forceinline__ int2 tile_origin(const uint2 kxform_block)
{
    return make_int2(kxform_block.x * TILE_W, kxform_block.y * TILE_H);
}

__device__ void load_tile(const uint2 kxform_block, const float *__restrict__ img, float tile[TILE_H + 2 * HALO][TILE_W + 2 * HALO],
                          int width, int height)
{
    const int2 o = tile_origin(kxform_block);
    for (int y = threadIdx.y; y < TILE_H + 2 * HALO; y += blockDim.y) {
        for (int x = threadIdx.x; x < TILE_W + 2 * HALO; x += blockDim.x) {
            const int gx = min(max(o.x + x - HALO, 0), width - 1);
            const int gy = min(max(o.y + y - HALO, 0), height - 1);
            tile[y][x] = img[gy * width + gx];
        }
    }
}

__global__ void box_blur3x3(const float *__restrict__ in, float *__restrict__ out, int width,
                            int height)
{
    const uint2 kxform_block = kxform_swizzle_grouped_alongx_group4(blockIdx.x, blockIdx.y, gridDim.x, gridDim.y);
    __shared__ float tile[TILE_H + 2 * HALO][TILE_W + 2 * HALO];
    load_tile(kxform_block, in, tile, width, height);
    __syncthreads();

    const int2 o = tile_origin(kxform_block);
    const int x = o.x + threadIdx.x;
    const int y = o.y + threadIdx.y;
    if (x >= width || y >= height)
        return;

    float sum = 0.0f;
#pragma unroll
    for (int dy = 0; dy < 3; ++dy)
#pragma unroll
        for (int dx = 0; dx < 3; ++dx)
            sum += tile[threadIdx.y + dy][threadIdx.x + dx];
    out[y * width + x] = sum * (1.0f / 9.0f);
}

int main(int argc, char **argv)
{
    const int width = argc > 2 ? atoi(argv[1]) : 7680;
    const int height = argc > 2 ? atoi(argv[2]) : 4320;
    const size_t bytes = (size_t)width * height * sizeof(float);

    float *h_img = (float *)malloc(bytes);
    for (int y = 0; y < height; ++y)
        for (int x = 0; x < width; ++x)
            h_img[(size_t)y * width + x] = ((x / 8 + y / 8) % 2) ? 1.0f : 0.0f;

    float *d_in, *d_out;
    CUDA_CALL(cudaMalloc(&d_in, bytes));
    CUDA_CALL(cudaMalloc(&d_out, bytes));
    CUDA_CALL(cudaMemcpy(d_in, h_img, bytes, cudaMemcpyHostToDevice));

    cudaStream_t stream;
    CUDA_CALL(cudaStreamCreate(&stream));
    dim3 block(TILE_W, TILE_H);
    dim3 grid((width + TILE_W - 1) / TILE_W, (height + TILE_H - 1) / TILE_H);
    box_blur3x3<<<grid, block, 0, stream>>>(d_in, d_out, width, height);
    CUDA_CALL(cudaGetLastError());
    CUDA_CALL(cudaStreamSynchronize(stream));
    CUDA_CALL(cudaMemcpy(h_img, d_out, bytes, cudaMemcpyDeviceToHost));
    printf("out[8][7] = %f\n", h_img[8 * width + 7]);

    CUDA_CALL(cudaStreamDestroy(stream));
    CUDA_CALL(cudaFree(d_in));
    CUDA_CALL(cudaFree(d_out));
    free(h_img);
    return 0;
}
