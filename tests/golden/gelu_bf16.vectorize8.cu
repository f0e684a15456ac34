// GELU (tanh approximation) on bf16 as it is usually first written: one element per
// thread, a 2-byte load and store each.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define GELU_SCALING_FACTOR sqrtf(2.0f / M_PI)

#ifndef GELU_BF16_NAIVE_VEC
#define GELU_BF16_NAIVE_VEC 8
#endif
__global__ void gelu_bf16_naive(__nv_bfloat16* out, const __nv_bfloat16* inp, int N)
{
    const int kx_v = blockIdx.x * blockDim.x + threadIdx.x;
    const int kx_first = kx_v * GELU_BF16_NAIVE_VEC;
    if (kx_first + GELU_BF16_NAIVE_VEC <= (N) &&
        (unsigned long long)(inp) % 16 == 0 &&
        (unsigned long long)(out) % 16 == 0 &&
        (((unsigned long long)(inp + (N)) <= (unsigned long long)(out)) || ((unsigned long long)(out + (N)) <= (unsigned long long)(inp)))) {
        static_assert(sizeof(uint4) == GELU_BF16_NAIVE_VEC * sizeof(__nv_bfloat16), "GELU_BF16_NAIVE_VEC: one uint4 of __nv_bfloat16 per thread");
        __nv_bfloat16 kx_e_inp[GELU_BF16_NAIVE_VEC];
        { const uint4 kx_t = reinterpret_cast<const uint4*>(inp)[kx_v]; memcpy(kx_e_inp, &kx_t, sizeof(kx_t)); }
        __nv_bfloat16 kx_e_out[GELU_BF16_NAIVE_VEC];
        #pragma unroll
        for (int kx_j = 0; kx_j < GELU_BF16_NAIVE_VEC; ++kx_j) {
            float x = __bfloat162float(kx_e_inp[kx_j]);
            float cube = 0.044715f * x * x * x;
            kx_e_out[kx_j] = __float2bfloat16(0.5f * x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x + cube))));
        }
        { uint4 kx_t; memcpy(&kx_t, kx_e_out, sizeof(kx_t)); reinterpret_cast<uint4*>(out)[kx_v] = kx_t; }
    } else {
        for (int kx_j = 0; kx_j < GELU_BF16_NAIVE_VEC; ++kx_j) {
            int i = kx_first + kx_j;
            if (i < N) {
                float x = __bfloat162float(inp[i]);
                float cube = 0.044715f * x * x * x;
                out[i] = __float2bfloat16(0.5f * x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x + cube))));
            }
        }
    }
}

void gelu_forward(__nv_bfloat16* out, const __nv_bfloat16* inp, int N)
{
    const int block_size = 128;
    const int grid_size = (((N + GELU_BF16_NAIVE_VEC - 1) / GELU_BF16_NAIVE_VEC) + block_size - 1) / block_size;
    gelu_bf16_naive<<<grid_size, block_size>>>(out, inp, N);
}
