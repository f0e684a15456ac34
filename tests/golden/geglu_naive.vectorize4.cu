// GeGLU (GELU-and-mul, the gated activation of a transformer's MLP) as serving engines
// first write it: one block per token, its threads stride over the hidden dimension.
// The input row holds the gate, then the up half.
//   out[t, d] = gelu_tanh(inp[t, d]) * inp[t, D + d]
#include <cuda_runtime.h>

#ifndef GEGLU_NAIVE_VEC
#define GEGLU_NAIVE_VEC 4
#endif
__global__ void geglu_naive(float* out, const float* inp, int D)
{
    const int t = blockIdx.x;
    for (int i = (threadIdx.x) * GEGLU_NAIVE_VEC; i < D; i += (blockDim.x) * GEGLU_NAIVE_VEC) {
        const int kx_first = i;
        if (kx_first + GEGLU_NAIVE_VEC <= (D) &&
            (unsigned long long)(&inp[(size_t)t * 2 * D + i]) % 16 == 0 &&
            (unsigned long long)(&inp[(size_t)t * 2 * D + D + i]) % 16 == 0 &&
            (unsigned long long)(&out[(size_t)t * D + i]) % 16 == 0 &&
            ((unsigned long long)(&out[(size_t)t * D + i]) + 16 <= (unsigned long long)(&inp[(size_t)t * 2 * D + i]) || (unsigned long long)(&inp[(size_t)t * 2 * D + i]) + 16 <= (unsigned long long)(&out[(size_t)t * D + i])) &&
            ((unsigned long long)(&out[(size_t)t * D + i]) + 16 <= (unsigned long long)(&inp[(size_t)t * 2 * D + D + i]) || (unsigned long long)(&inp[(size_t)t * 2 * D + D + i]) + 16 <= (unsigned long long)(&out[(size_t)t * D + i]))) {
            float kx_e0[GEGLU_NAIVE_VEC];
            { const uint4 kx_t = *reinterpret_cast<const uint4*>(&inp[(size_t)t * 2 * D + i]); memcpy(kx_e0, &kx_t, sizeof(kx_t)); }
            float kx_e1[GEGLU_NAIVE_VEC];
            { const uint4 kx_t = *reinterpret_cast<const uint4*>(&inp[(size_t)t * 2 * D + D + i]); memcpy(kx_e1, &kx_t, sizeof(kx_t)); }
            float kx_e2[GEGLU_NAIVE_VEC];
            #pragma unroll
            for (int kx_j = 0; kx_j < GEGLU_NAIVE_VEC; ++kx_j) {
                const float g = kx_e0[kx_j];
                const float u = kx_e1[kx_j];
                const float inner = 0.7978845608f * (g + 0.044715f * g * g * g);
                kx_e2[kx_j] = 0.5f * g * (1.0f + tanhf(inner)) * u;
            }
            { uint4 kx_t; memcpy(&kx_t, kx_e2, sizeof(kx_t)); *reinterpret_cast<uint4*>(&out[(size_t)t * D + i]) = kx_t; }
        } else {
            for (int kx_j = 0; kx_j < GEGLU_NAIVE_VEC && kx_first + kx_j < (D); ++kx_j) {
                const int i = kx_first + kx_j;
                const float g = inp[(size_t)t * 2 * D + i];
                const float u = inp[(size_t)t * 2 * D + D + i];
                const float inner = 0.7978845608f * (g + 0.044715f * g * g * g);
                out[(size_t)t * D + i] = 0.5f * g * (1.0f + tanhf(inner)) * u;
            }
        }
    }
}

void geglu(float* out, const float* inp, int T, int D)
{
    const int block_size = 256;
    geglu_naive<<<T, block_size>>>(out, inp, D);
}
