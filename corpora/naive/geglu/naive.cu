// GeGLU (GELU-and-mul, the gated activation of a transformer's MLP) as serving engines
// first write it: one block per token, its threads stride over the hidden dimension.
// The input row holds the gate, then the up half.
//   out[t, d] = gelu_tanh(inp[t, d]) * inp[t, D + d]
#include <cuda_runtime.h>

__global__ void geglu_naive(float* out, const float* inp, int D)
{
    const int t = blockIdx.x;
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
        const float g = inp[(size_t)t * 2 * D + i];
        const float u = inp[(size_t)t * 2 * D + D + i];
        const float inner = 0.7978845608f * (g + 0.044715f * g * g * g);
        out[(size_t)t * D + i] = 0.5f * g * (1.0f + tanhf(inner)) * u;
    }
}

void geglu(float* out, const float* inp, int T, int D)
{
    const int block_size = 256;
    geglu_naive<<<T, block_size>>>(out, inp, D);
}
