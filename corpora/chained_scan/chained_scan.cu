// Single-pass inclusive prefix sum with chained block prefixes.
//
// Every block scans its 512-element chunk in shared memory, then its last
// thread waits until block blockIdx.x - 1 has published the inclusive sum of
// everything before it, adds its own total and publishes the result for block
// blockIdx.x + 1. This relies on blocks being dispatched in blockIdx order: a
// block that spins on a predecessor that was never scheduled would hang.
// (flags must be zeroed before every launch.)

#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define BLOCK 512

#define CUDA_CHECK(ans)                                                          \
    {                                                                            \
        cudaError_t e_ = (ans);                                                  \
        if (e_ != cudaSuccess) {                                                 \
            fprintf(stderr, "CUDA_CHECK: %s %s %d\n", cudaGetErrorString(e_),    \
                    __FILE__, __LINE__);                                         \
            exit(e_);                                                            \
        }                                                                        \
    }

__global__ void chained_scan(const int *__restrict__ in, int *__restrict__ out,
                             int *block_incl, volatile int *flags, int n)
{
    __shared__ int temp[2][BLOCK];
    __shared__ int block_prefix;

    const int tid = threadIdx.x;
    const int gid = blockIdx.x * BLOCK + tid;

    // Hillis-Steele inclusive scan of the chunk, double-buffered.
    int pout = 0;
    temp[pout][tid] = (gid < n) ? in[gid] : 0;
    __syncthreads();
    for (int offset = 1; offset < BLOCK; offset <<= 1) {
        pout = 1 - pout;
        const int pin = 1 - pout;
        if (tid >= offset)
            temp[pout][tid] = temp[pin][tid] + temp[pin][tid - offset];
        else
            temp[pout][tid] = temp[pin][tid];
        __syncthreads();
    }
    const int incl = temp[pout][tid];

    // Chain: wait for the predecessor's inclusive prefix, publish ours.
    if (tid == BLOCK - 1) {
        int prev = 0;
        if (blockIdx.x > 0) {
            while (flags[blockIdx.x - 1] == 0) {
                // spin until block blockIdx.x - 1 has published
            }
            __threadfence();
            prev = ((volatile int *)block_incl)[blockIdx.x - 1];
        }
        block_incl[blockIdx.x] = prev + incl;
        __threadfence();
        flags[blockIdx.x] = 1;
        block_prefix = prev;
    }
    __syncthreads();

    if (gid < n)
        out[gid] = incl + block_prefix;
}

int main(int argc, char **argv)
{
    const int n = argc > 1 ? atoi(argv[1]) : (1 << 24);
    const int blocks = (n + BLOCK - 1) / BLOCK;

    std::vector<int> h_in(n), h_out(n);
    for (int i = 0; i < n; ++i)
        h_in[i] = (i % 7) - 3;

    int *d_in, *d_out, *d_block_incl, *d_flags;
    CUDA_CHECK(cudaMalloc(&d_in, n * sizeof(int)));
    CUDA_CHECK(cudaMalloc(&d_out, n * sizeof(int)));
    CUDA_CHECK(cudaMalloc(&d_block_incl, blocks * sizeof(int)));
    CUDA_CHECK(cudaMalloc(&d_flags, blocks * sizeof(int)));
    CUDA_CHECK(cudaMemcpy(d_in, h_in.data(), n * sizeof(int), cudaMemcpyHostToDevice));

    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    CUDA_CHECK(cudaMemsetAsync(d_flags, 0, blocks * sizeof(int), stream));
    chained_scan<<<blocks, BLOCK, 0, stream>>>(d_in, d_out, d_block_incl, d_flags, n);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaMemcpy(h_out.data(), d_out, n * sizeof(int), cudaMemcpyDeviceToHost));

    long long running = 0;
    int errors = 0;
    for (int i = 0; i < n; ++i) {
        running += h_in[i];
        if (h_out[i] != (int)running)
            ++errors;
    }
    printf("%s (%d errors)\n", errors ? "FAILED" : "PASSED", errors);

    CUDA_CHECK(cudaStreamDestroy(stream));
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaFree(d_block_incl));
    CUDA_CHECK(cudaFree(d_flags));
    return errors ? 1 : 0;
}
