// Bias gradient (column sums of dout) as it is usually first written: one thread per
// column, a loop over all rows.
//   dbias[c] = sum_r dout[r, c]
#include <cuda_runtime.h>

#ifndef BIAS_GRAD_NAIVE_SPLIT_THREADS
#define BIAS_GRAD_NAIVE_SPLIT_THREADS 4
#endif
#ifndef BIAS_GRAD_NAIVE_SPLIT_BLOCKS
#define BIAS_GRAD_NAIVE_SPLIT_BLOCKS 8
#endif
__global__ void bias_grad_naive(float* dbias, const float* dout, int N, int C, float* kx_part_sum = nullptr, unsigned int* kx_arrivals = nullptr)
{
    const unsigned int kx_split = kx_arrivals != nullptr ? blockIdx.y * blockDim.y + threadIdx.y : 0u;
    const unsigned int kx_splits = kx_arrivals != nullptr ? gridDim.y * blockDim.y : 1u;
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) {
        float sum = 0.0f;
        for (int r = kx_split; r < N; r += kx_splits)
            sum += dout[(size_t)r * C + c];
        if (kx_splits > 1) {
            const unsigned long long kx_column = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
            const unsigned long long kx_columns = (unsigned long long)gridDim.x * blockDim.x;
            kx_part_sum[kx_split * kx_columns + kx_column] = sum;
            __threadfence();  // the partials are visible before the arrival is counted
            if (atomicAdd(&kx_arrivals[kx_column], 1u) != kx_splits - 1)
                return;  // the column's last worker to arrive combines; the others are done
            __threadfence();  // every counted worker's partials are visible here
            sum = __ldcg(&kx_part_sum[kx_column]);
            for (unsigned int kx_w = 1; kx_w < kx_splits; ++kx_w) {
                sum = sum + __ldcg(&kx_part_sum[kx_w * kx_columns + kx_column]);
            }
            kx_arrivals[kx_column] = 0u;  // as the launch found it, for the next launch
        }
        dbias[c] = sum;
    }
}

void bias_backward(float* dbias, const float* dout, int N, int C)
{
    const int block_size = 128;
    const int grid_size = (C + block_size - 1) / block_size;
    {  // split-reduce: bias_grad_naive's reduction over BIAS_GRAD_NAIVE_SPLIT_THREADS x BIAS_GRAD_NAIVE_SPLIT_BLOCKS workers per column
        dim3 kx_grid(grid_size, BIAS_GRAD_NAIVE_SPLIT_BLOCKS);
        dim3 kx_block(block_size, BIAS_GRAD_NAIVE_SPLIT_THREADS);
        while (kx_block.y > 1 && kx_block.x * kx_block.y > 1024)
            kx_block.y /= 2;
        const size_t kx_columns = (size_t)kx_grid.x * kx_block.x;
        const size_t kx_workers = (size_t)kx_grid.y * kx_block.y;
        float* kx_part_sum = nullptr;
        unsigned int* kx_arrivals = nullptr;
        if (kx_workers > 1 && !(cudaMallocAsync((void**)&kx_arrivals, kx_columns * sizeof(unsigned int), 0) == cudaSuccess &&
                cudaMemsetAsync(kx_arrivals, 0, kx_columns * sizeof(unsigned int), 0) == cudaSuccess &&
                cudaMallocAsync((void**)&kx_part_sum, kx_columns * kx_workers * sizeof(float), 0) == cudaSuccess)) {
            (void)cudaGetLastError();  // no workspace: one worker per column, the kernel as written
            if (kx_arrivals) cudaFreeAsync(kx_arrivals, 0);
            if (kx_part_sum) cudaFreeAsync(kx_part_sum, 0);
            kx_arrivals = nullptr;
            kx_part_sum = nullptr;
            kx_grid.y = kx_block.y = 1;
        }
        bias_grad_naive<<<kx_grid, kx_block>>>(dbias, dout, N, C, kx_part_sum, kx_arrivals);
        if (kx_arrivals) cudaFreeAsync(kx_arrivals, 0);
        if (kx_part_sum) cudaFreeAsync(kx_part_sum, 0);
    }
}
