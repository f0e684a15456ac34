// SiLU-and-mul activation of a gated MLP (SwiGLU), bf16.
//
//   input: [num_tokens, 2 * d]  (gate half, then up half)
//   out:   [num_tokens, d]      out = silu(gate) * up
//
// One block per token, threads stride over the hidden dimension. silu is
// computed in fp32 and rounded to bf16 before the product, as the fused
// activation kernels of LLM serving engines do.

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <vector>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define CUDA_CHECK(x)                                                           \
    do {                                                                        \
        cudaError_t err = (x);                                                  \
        if (err != cudaSuccess) {                                               \
            fprintf(stderr, "CUDA error %d (%s) at %s:%d\n", (int)err,          \
                    cudaGetErrorString(err), __FILE__, __LINE__);               \
            abort();                                                            \
        }                                                                       \
    } while (0)

__device__ __forceinline__ __nv_bfloat16 silu(const __nv_bfloat16 &x)
{
    const float f = __bfloat162float(x);
    return __float2bfloat16(f / (1.0f + expf(-f)));
}

__global__ void silu_and_mul_kernel(__nv_bfloat16 *__restrict__ out,          // [..., d]
                                    const __nv_bfloat16 *__restrict__ input,  // [..., 2, d]
                                    const int d)
{
    const int64_t token_idx = blockIdx.x;
    for (int64_t idx = threadIdx.x; idx < d; idx += blockDim.x) {
        const __nv_bfloat16 x = input[token_idx * 2 * d + idx];
        const __nv_bfloat16 y = input[token_idx * 2 * d + d + idx];
        out[token_idx * d + idx] = __hmul(silu(x), y);
    }
}

void silu_and_mul(__nv_bfloat16 *out, const __nv_bfloat16 *input, int num_tokens, int d,
                  cudaStream_t stream)
{
    dim3 grid(num_tokens);
    dim3 block(std::min(d, 1024));
    silu_and_mul_kernel<<<grid, block, 0, stream>>>(out, input, d);
    CUDA_CHECK(cudaGetLastError());
}

int main()
{
    const int num_tokens = 4096, d = 11008;
    std::vector<__nv_bfloat16> h_in((size_t)num_tokens * 2 * d);
    for (size_t i = 0; i < h_in.size(); ++i)
        h_in[i] = __float2bfloat16((float)((i * 2654435761u) % 1000) / 250.0f - 2.0f);

    __nv_bfloat16 *d_in, *d_out;
    CUDA_CHECK(cudaMalloc(&d_in, h_in.size() * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMalloc(&d_out, (size_t)num_tokens * d * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMemcpy(d_in, h_in.data(), h_in.size() * sizeof(__nv_bfloat16),
                          cudaMemcpyHostToDevice));

    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    silu_and_mul(d_out, d_in, num_tokens, d, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));

    __nv_bfloat16 first;
    CUDA_CHECK(cudaMemcpy(&first, d_out, sizeof(first), cudaMemcpyDeviceToHost));
    printf("out[0] = %f\n", __bfloat162float(first));

    CUDA_CHECK(cudaStreamDestroy(stream));
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    return 0;
}
