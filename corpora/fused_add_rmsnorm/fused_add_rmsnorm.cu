// Fused residual add + RMSNorm for fp16 activations (LLM serving layer norm).
//
//   residual <- input + residual            (stored back in fp16)
//   input    <- fp16(residual * rsqrt(mean(residual^2) + eps)) * weight
//
// One block per token; statistics accumulate in fp32. Both tensors are updated
// in place, as the serving engine reuses their memory for the next layer.

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <vector>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define CUDA_CHECK(cmd)                                                         \
    do {                                                                        \
        cudaError_t e = cmd;                                                    \
        if (e != cudaSuccess) {                                                 \
            printf("Failed: Cuda error %s:%d '%s'\n", __FILE__, __LINE__,       \
                   cudaGetErrorString(e));                                      \
            exit(EXIT_FAILURE);                                                 \
        }                                                                       \
    } while (0)

namespace {

__device__ __forceinline__ float warp_reduce_sum(float val)
{
#pragma unroll
    for (int mask = 16; mask > 0; mask >>= 1)
        val += __shfl_xor_sync(0xffffffff, val, mask, 32);
    return val;
}

// blockDim.x must be a multiple of 32 (the launcher rounds it up).
__device__ __forceinline__ float block_reduce_sum(float val)
{
    __shared__ float shared[32];
    const int lane = threadIdx.x & 31;
    const int wid = threadIdx.x >> 5;

    val = warp_reduce_sum(val);
    if (lane == 0)
        shared[wid] = val;
    __syncthreads();

    val = (lane < (blockDim.x >> 5)) ? shared[lane] : 0.0f;
    val = warp_reduce_sum(val);
    return val;
}

}  // namespace

__global__ void fused_add_rms_norm_kernel(__half *__restrict__ input,     // [num_tokens, hidden_size]
                                          __half *__restrict__ residual,  // [num_tokens, hidden_size]
                                          const __half *__restrict__ weight,  // [hidden_size]
                                          const float epsilon, const int num_tokens,
                                          const int hidden_size)
{
    __shared__ float s_variance;
    float variance = 0.0f;

    for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
        const size_t off = (size_t)blockIdx.x * hidden_size + idx;
        __half z = __hadd(input[off], residual[off]);
        const float x = __half2float(z);
        variance += x * x;
        residual[off] = z;
    }
    variance = block_reduce_sum(variance);
    if (threadIdx.x == 0)
        s_variance = rsqrtf(variance / hidden_size + epsilon);
    __syncthreads();

    for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
        const size_t off = (size_t)blockIdx.x * hidden_size + idx;
        const float x = __half2float(residual[off]);
        input[off] = __hmul(__float2half(x * s_variance), weight[idx]);
    }
}

void fused_add_rms_norm(__half *input, __half *residual, const __half *weight, float epsilon,
                        int num_tokens, int hidden_size, cudaStream_t stream)
{
    dim3 grid(num_tokens);
    dim3 block(std::min((hidden_size + 31) / 32 * 32, 1024));
    fused_add_rms_norm_kernel<<<grid, block, 0, stream>>>(input, residual, weight, epsilon,
                                                          num_tokens, hidden_size);
    CUDA_CHECK(cudaGetLastError());
}

int main()
{
    const int num_tokens = 2048, hidden_size = 4096;
    const size_t n = (size_t)num_tokens * hidden_size;

    std::vector<__half> h_in(n), h_res(n), h_w(hidden_size);
    for (size_t i = 0; i < n; ++i) {
        h_in[i] = __float2half((float)((i * 37) % 101) / 50.0f - 1.0f);
        h_res[i] = __float2half((float)((i * 11) % 53) / 26.0f - 1.0f);
    }
    for (int i = 0; i < hidden_size; ++i)
        h_w[i] = __float2half(1.0f);

    __half *d_in, *d_res, *d_w;
    CUDA_CHECK(cudaMalloc(&d_in, n * sizeof(__half)));
    CUDA_CHECK(cudaMalloc(&d_res, n * sizeof(__half)));
    CUDA_CHECK(cudaMalloc(&d_w, hidden_size * sizeof(__half)));
    CUDA_CHECK(cudaMemcpy(d_in, h_in.data(), n * sizeof(__half), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_res, h_res.data(), n * sizeof(__half), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_w, h_w.data(), hidden_size * sizeof(__half), cudaMemcpyHostToDevice));

    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    fused_add_rms_norm(d_in, d_res, d_w, 1e-6f, num_tokens, hidden_size, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));

    CUDA_CHECK(cudaMemcpy(h_in.data(), d_in, n * sizeof(__half), cudaMemcpyDeviceToHost));
    printf("out[0] = %f\n", __half2float(h_in[0]));

    CUDA_CHECK(cudaStreamDestroy(stream));
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_res));
    CUDA_CHECK(cudaFree(d_w));
    return 0;
}
