// Row-wise softmax: one thread block per row, three passes (max, sum, scale).
//
// input and output are [rows, cols] row-major. The row max is subtracted before
// exponentiation for numerical stability.

#include <cstdio>
#include <cstdlib>
#include <cfloat>
#include <cuda_runtime.h>

#define BLOCK_SIZE 256

#define gpuErrchk(ans) { gpuAssert((ans), __FILE__, __LINE__); }
inline void gpuAssert(cudaError_t code, const char *file, int line, bool abort = true)
{
    if (code != cudaSuccess) {
        fprintf(stderr, "GPUassert: %s %s %d\n", cudaGetErrorString(code), file, line);
        if (abort)
            exit(code);
    }
}

__global__ void softmax_rows(const float *__restrict__ input, float *__restrict__ output,
                             int rows, int cols)
{
    __shared__ float sdata[BLOCK_SIZE];
    const int row = blockIdx.x;
    const int tid = threadIdx.x;
    if (row >= rows)
        return;

    const float *in = input + (size_t)row * cols;
    float *out = output + (size_t)row * cols;

    // 1. row maximum
    float local_max = -FLT_MAX;
    for (int i = tid; i < cols; i += blockDim.x)
        local_max = fmaxf(local_max, in[i]);
    sdata[tid] = local_max;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s)
            sdata[tid] = fmaxf(sdata[tid], sdata[tid + s]);
        __syncthreads();
    }
    const float row_max = sdata[0];
    __syncthreads();

    // 2. sum of exponentials
    float local_sum = 0.0f;
    for (int i = tid; i < cols; i += blockDim.x)
        local_sum += expf(in[i] - row_max);
    sdata[tid] = local_sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s)
            sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    const float inv_sum = 1.0f / sdata[0];

    // 3. normalise
    for (int i = tid; i < cols; i += blockDim.x)
        out[i] = expf(in[i] - row_max) * inv_sum;
}

int main(int argc, char *argv[])
{
    int rows = 4096, cols = 4096;
    if (argc == 3) {
        rows = atoi(argv[1]);
        cols = atoi(argv[2]);
    }
    size_t bytes = (size_t)rows * cols * sizeof(float);

    float *h_in = (float *)malloc(bytes);
    float *h_out = (float *)malloc(bytes);
    for (size_t i = 0; i < (size_t)rows * cols; i++)
        h_in[i] = (float)(rand() % 1000) / 100.0f;

    float *d_in, *d_out;
    gpuErrchk(cudaMalloc(&d_in, bytes));
    gpuErrchk(cudaMalloc(&d_out, bytes));
    gpuErrchk(cudaMemcpy(d_in, h_in, bytes, cudaMemcpyHostToDevice));

    cudaStream_t stream;
    gpuErrchk(cudaStreamCreate(&stream));
    softmax_rows<<<rows, BLOCK_SIZE, 0, stream>>>(d_in, d_out, rows, cols);
    gpuErrchk(cudaPeekAtLastError());
    gpuErrchk(cudaStreamSynchronize(stream));
    gpuErrchk(cudaMemcpy(h_out, d_out, bytes, cudaMemcpyDeviceToHost));

    double total = 0.0;
    for (int j = 0; j < cols; j++)
        total += h_out[j];
    printf("row 0 sums to %.6f\n", total);

    gpuErrchk(cudaStreamDestroy(stream));
    cudaFree(d_in);
    cudaFree(d_out);
    free(h_in);
    free(h_out);
    return 0;
}
