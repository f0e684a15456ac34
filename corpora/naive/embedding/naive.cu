// Token + position embedding as it is usually first written: one thread per
// (batch, position), a loop over the channels.
//   out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]
#include <cuda_runtime.h>

__global__ void embedding_naive(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T,
                                int C)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < B * T) {
        int t = idx % T;
        int token = tokens[idx];
        float* o = out + (size_t)idx * C;
        const float* w = wte + (size_t)token * C;
        const float* p = wpe + (size_t)t * C;
        for (int i = 0; i < C; i++)
            o[i] = w[i] + p[i];
    }
}

void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T, int C)
{
    const int block_size = 256;
    const int grid_size = (B * T + block_size - 1) / block_size;
    embedding_naive<<<grid_size, block_size>>>(out, tokens, wte, wpe, B, T, C);
}
