// Merge two partial attention results with their log-sum-exp values
// (split-KV / prefix-caching attention, bf16 outputs with fp32 LSE).
//
//   output[t, h, :]   = p_out * exp(p_lse - m) / s + s_out * exp(s_lse - m) / s
//   output_lse[h, t]  = log(s) + m,   m = max(p_lse, s_lse), s = exp(p_lse - m) + exp(s_lse - m)
//
// Outputs are [num_tokens, num_heads, head_size]; LSE vectors [num_heads, num_tokens].
// Each thread handles one 128-bit pack (8 bf16 values) of one head.

#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define CHECK_CUDA_SUCCESS(expr)                                                  \
    do {                                                                          \
        const cudaError_t status = (expr);                                        \
        if (status != cudaSuccess) {                                              \
            fprintf(stderr, "%s failed with %s\n", #expr, cudaGetErrorString(status)); \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

#define NUM_THREADS 128

using pack_128b_t = uint4;

__global__ void merge_attn_states_kernel(__nv_bfloat16 *output, float *output_lse,
                                         const __nv_bfloat16 *prefix_output,
                                         const float *prefix_lse,
                                         const __nv_bfloat16 *suffix_output,
                                         const float *suffix_lse, const uint num_tokens,
                                         const uint num_heads, const uint head_size)
{
    constexpr uint pack_size = 16 / sizeof(__nv_bfloat16);
    const uint threads_per_head = head_size / pack_size;

    const uint global_idx = blockIdx.x * NUM_THREADS + threadIdx.x;
    const uint token_head_threads = num_tokens * num_heads * threads_per_head;
    if (global_idx >= token_head_threads)
        return;

    const uint token_head_idx = global_idx / threads_per_head;
    const uint pack_idx = global_idx % threads_per_head;
    const uint token_idx = token_head_idx / num_heads;
    const uint head_idx = token_head_idx % num_heads;

    const uint pack_offset = pack_idx * pack_size;
    const uint head_offset = token_idx * num_heads * head_size + head_idx * head_size;
    const __nv_bfloat16 *prefix_head_ptr = prefix_output + head_offset;
    const __nv_bfloat16 *suffix_head_ptr = suffix_output + head_offset;
    __nv_bfloat16 *output_head_ptr = output + head_offset;

    float p_lse = prefix_lse[head_idx * num_tokens + token_idx];
    float s_lse = suffix_lse[head_idx * num_tokens + token_idx];
    p_lse = isinf(p_lse) ? -INFINITY : p_lse;
    s_lse = isinf(s_lse) ? -INFINITY : s_lse;

    const float max_lse = fmaxf(p_lse, s_lse);
    p_lse = p_lse - max_lse;
    s_lse = s_lse - max_lse;
    const float p_se = expf(p_lse);
    const float s_se = expf(s_lse);
    const float out_se = p_se + s_se;
    const float p_scale = p_se / out_se;
    const float s_scale = s_se / out_se;

    if (pack_offset < head_size) {
        pack_128b_t p_out_pack =
            reinterpret_cast<const pack_128b_t *>(prefix_head_ptr)[pack_offset / pack_size];
        pack_128b_t s_out_pack =
            reinterpret_cast<const pack_128b_t *>(suffix_head_ptr)[pack_offset / pack_size];
        pack_128b_t o_out_pack;

#pragma unroll
        for (uint i = 0; i < pack_size; ++i) {
            const float p_out_f =
                __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(&p_out_pack)[i]);
            const float s_out_f =
                __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(&s_out_pack)[i]);
            const float o_out_f = p_out_f * p_scale + (s_out_f * s_scale);
            reinterpret_cast<__nv_bfloat16 *>(&o_out_pack)[i] = __float2bfloat16(o_out_f);
        }
        reinterpret_cast<pack_128b_t *>(output_head_ptr)[pack_offset / pack_size] = o_out_pack;
    }

    if (output_lse != nullptr && pack_idx == 0) {
        const float out_lse = logf(out_se) + max_lse;
        output_lse[head_idx * num_tokens + token_idx] = out_lse;
    }
}

void merge_attn_states(__nv_bfloat16 *output, float *output_lse,
                       const __nv_bfloat16 *prefix_output, const float *prefix_lse,
                       const __nv_bfloat16 *suffix_output, const float *suffix_lse,
                       int num_tokens, int num_heads, int head_size, cudaStream_t stream)
{
    if (head_size % 8 != 0) {
        fprintf(stderr, "head_size must be a multiple of 8, got %d\n", head_size);
        exit(1);
    }
    const uint threads_per_head = head_size / 8;
    const uint total_threads = (uint)num_tokens * num_heads * threads_per_head;
    dim3 block(NUM_THREADS);
    dim3 grid((total_threads + NUM_THREADS - 1) / NUM_THREADS);
    merge_attn_states_kernel<<<grid, block, 0, stream>>>(output, output_lse, prefix_output,
                                                         prefix_lse, suffix_output, suffix_lse,
                                                         num_tokens, num_heads, head_size);
    CHECK_CUDA_SUCCESS(cudaGetLastError());
}

int main()
{
    const int num_tokens = 512, num_heads = 32, head_size = 128;
    const size_t n = (size_t)num_tokens * num_heads * head_size;
    const size_t nl = (size_t)num_tokens * num_heads;

    std::vector<__nv_bfloat16> h_p(n), h_s(n);
    std::vector<float> h_pl(nl), h_sl(nl);
    for (size_t i = 0; i < n; ++i) {
        h_p[i] = __float2bfloat16(sinf((float)i));
        h_s[i] = __float2bfloat16(cosf((float)i));
    }
    for (size_t i = 0; i < nl; ++i) {
        h_pl[i] = 8.0f + sinf(0.1f * i);
        h_sl[i] = 8.0f + cosf(0.1f * i);
    }

    __nv_bfloat16 *d_out, *d_p, *d_s;
    float *d_lse, *d_pl, *d_sl;
    CHECK_CUDA_SUCCESS(cudaMalloc(&d_out, n * sizeof(__nv_bfloat16)));
    CHECK_CUDA_SUCCESS(cudaMalloc(&d_p, n * sizeof(__nv_bfloat16)));
    CHECK_CUDA_SUCCESS(cudaMalloc(&d_s, n * sizeof(__nv_bfloat16)));
    CHECK_CUDA_SUCCESS(cudaMalloc(&d_lse, nl * sizeof(float)));
    CHECK_CUDA_SUCCESS(cudaMalloc(&d_pl, nl * sizeof(float)));
    CHECK_CUDA_SUCCESS(cudaMalloc(&d_sl, nl * sizeof(float)));
    CHECK_CUDA_SUCCESS(cudaMemcpy(d_p, h_p.data(), n * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));
    CHECK_CUDA_SUCCESS(cudaMemcpy(d_s, h_s.data(), n * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));
    CHECK_CUDA_SUCCESS(cudaMemcpy(d_pl, h_pl.data(), nl * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA_SUCCESS(cudaMemcpy(d_sl, h_sl.data(), nl * sizeof(float), cudaMemcpyHostToDevice));

    cudaStream_t stream;
    CHECK_CUDA_SUCCESS(cudaStreamCreate(&stream));
    merge_attn_states(d_out, d_lse, d_p, d_pl, d_s, d_sl, num_tokens, num_heads, head_size, stream);
    CHECK_CUDA_SUCCESS(cudaStreamSynchronize(stream));

    float lse0;
    CHECK_CUDA_SUCCESS(cudaMemcpy(&lse0, d_lse, sizeof(float), cudaMemcpyDeviceToHost));
    printf("output_lse[0] = %f\n", lse0);

    CHECK_CUDA_SUCCESS(cudaStreamDestroy(stream));
    cudaFree(d_out);
    cudaFree(d_p);
    cudaFree(d_s);
    cudaFree(d_lse);
    cudaFree(d_pl);
    cudaFree(d_sl);
    return 0;
}
