// LayerNorm forward as a performance engineer writes it (a yardstick, never an input
// to a pass): one warp per row, 16-byte loads where the row length allows them,
// butterfly (xor) shuffle reductions so every lane holds the statistics.
#include <cuda_runtime.h>

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__global__ void __launch_bounds__(256) layernorm_expert(float* __restrict__ out, const float* __restrict__ inp,
                                                        const float* __restrict__ weight,
                                                        const float* __restrict__ bias, int N, int C)
{
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N)
        return;  // the whole warp leaves together
    const float* x = inp + (size_t)row * C;
    float* o = out + (size_t)row * C;
    const bool vec = (C & 3) == 0;  // every row starts 16-byte aligned
    const int C4 = vec ? C >> 2 : 0;
    const float4* x4 = reinterpret_cast<const float4*>(x);

    float sum = 0.0f;
    for (int i = lane; i < C4; i += 32) {
        const float4 v = x4[i];
        sum += (v.x + v.y) + (v.z + v.w);
    }
    for (int i = 4 * C4 + lane; i < C; i += 32)
        sum += x[i];
    const float mean = warp_sum(sum) / C;

    float var = 0.0f;
    for (int i = lane; i < C4; i += 32) {
        const float4 v = x4[i];
        const float a = v.x - mean, b = v.y - mean, c = v.z - mean, d = v.w - mean;
        var += (a * a + b * b) + (c * c + d * d);
    }
    for (int i = 4 * C4 + lane; i < C; i += 32) {
        const float d = x[i] - mean;
        var += d * d;
    }
    const float rstd = rsqrtf(warp_sum(var) / C + 1e-5f);

    const float4* w4 = reinterpret_cast<const float4*>(weight);
    const float4* b4 = reinterpret_cast<const float4*>(bias);
    float4* o4 = reinterpret_cast<float4*>(o);
    for (int i = lane; i < C4; i += 32) {
        const float4 v = x4[i], w = w4[i], b = b4[i];
        o4[i] = make_float4((v.x - mean) * rstd * w.x + b.x, (v.y - mean) * rstd * w.y + b.y,
                            (v.z - mean) * rstd * w.z + b.z, (v.w - mean) * rstd * w.w + b.w);
    }
    for (int i = 4 * C4 + lane; i < C; i += 32)
        o[i] = (x[i] - mean) * rstd * weight[i] + bias[i];
}

void layernorm_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C)
{
    const int block_size = 256;
    const int rows_per_block = block_size / 32;
    layernorm_expert<<<(N + rows_per_block - 1) / rows_per_block, block_size>>>(out, inp, weight, bias, N, C);
}
