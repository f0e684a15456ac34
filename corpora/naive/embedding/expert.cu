// Token + position embedding as a performance engineer writes it (a yardstick, never an
// input to a pass): one thread per four channels of one (batch, position), 16-byte loads
// and stores where C allows them, so a warp reads contiguous memory.
#include <cuda_runtime.h>

__global__ void __launch_bounds__(256) embedding_expert(float* __restrict__ out, const int* __restrict__ tokens,
                                                        const float* __restrict__ wte,
                                                        const float* __restrict__ wpe, int B, int T, int C)
{
    const int per_row = (C + 3) / 4;
    const long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= (long long)B * T * per_row)
        return;
    const int bt = (int)(v / per_row);
    const int c = 4 * (int)(v % per_row);
    const int t = bt % T;
    const float* w = wte + (size_t)tokens[bt] * C;
    const float* p = wpe + (size_t)t * C;
    float* o = out + (size_t)bt * C;
    if ((C & 3) == 0) {
        const float4 a = reinterpret_cast<const float4*>(w + c)[0];
        const float4 b = reinterpret_cast<const float4*>(p + c)[0];
        reinterpret_cast<float4*>(o + c)[0] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    } else {
        for (int i = c; i < c + 4 && i < C; i++)
            o[i] = w[i] + p[i];
    }
}

void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T, int C)
{
    const int block_size = 256;
    const long long threads = (long long)B * T * ((C + 3) / 4);
    embedding_expert<<<(unsigned)((threads + block_size - 1) / block_size), block_size>>>(out, tokens, wte, wpe, B,
                                                                                        T, C);
}
