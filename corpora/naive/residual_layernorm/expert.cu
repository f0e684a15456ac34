// Residual add fused with LayerNorm as a performance engineer writes it (a yardstick,
// never an input to a pass): one warp per row, the residual row kept in shared memory
// (written once to global memory, never read back), 16-byte loads where the row length
// allows them, butterfly shuffle reductions. Dynamic shared memory: 4 * C floats.
#include <cuda_runtime.h>

#define ROWS_PER_BLOCK 4

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__global__ void __launch_bounds__(32 * ROWS_PER_BLOCK)
residual_layernorm_expert(float* __restrict__ residual, float* __restrict__ out, const float* __restrict__ inp1,
                          const float* __restrict__ inp2, const float* __restrict__ weight,
                          const float* __restrict__ bias, int N, int C)
{
    extern __shared__ float4 rows[];  // ROWS_PER_BLOCK rows of C floats
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int row = blockIdx.x * ROWS_PER_BLOCK + warp;
    if (row >= N)
        return;
    float* r = reinterpret_cast<float*>(rows) + (size_t)warp * C;
    const size_t base = (size_t)row * C;
    const int C4 = (C & 3) == 0 ? C >> 2 : 0;

    float sum = 0.0f;
    for (int i = lane; i < C4; i += 32) {
        const float4 a = reinterpret_cast<const float4*>(inp1 + base)[i];
        const float4 b = reinterpret_cast<const float4*>(inp2 + base)[i];
        const float4 v = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
        reinterpret_cast<float4*>(r)[i] = v;
        reinterpret_cast<float4*>(residual + base)[i] = v;
        sum += (v.x + v.y) + (v.z + v.w);
    }
    for (int i = 4 * C4 + lane; i < C; i += 32) {
        const float v = inp1[base + i] + inp2[base + i];
        r[i] = v;
        residual[base + i] = v;
        sum += v;
    }
    const float mean = warp_sum(sum) / C;
    float var = 0.0f;
    for (int i = lane; i < C; i += 32) {  // each lane reads back only what it wrote
        const float d = r[i] - mean;
        var += d * d;
    }
    const float rstd = rsqrtf(warp_sum(var) / C + 1e-5f);
    for (int i = lane; i < C4; i += 32) {
        const float4 v = reinterpret_cast<const float4*>(r)[i];
        const float4 w = reinterpret_cast<const float4*>(weight)[i];
        const float4 b = reinterpret_cast<const float4*>(bias)[i];
        reinterpret_cast<float4*>(out + base)[i] =
            make_float4((v.x - mean) * rstd * w.x + b.x, (v.y - mean) * rstd * w.y + b.y,
                        (v.z - mean) * rstd * w.z + b.z, (v.w - mean) * rstd * w.w + b.w);
    }
    for (int i = 4 * C4 + lane; i < C; i += 32)
        out[base + i] = (r[i] - mean) * rstd * weight[i] + bias[i];
}

void residual_layernorm_forward(float* residual, float* out, const float* inp1, const float* inp2,
                                const float* weight, const float* bias, int N, int C)
{
    const size_t smem = (size_t)ROWS_PER_BLOCK * C * sizeof(float);
    residual_layernorm_expert<<<(N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, 32 * ROWS_PER_BLOCK, smem>>>(
        residual, out, inp1, inp2, weight, bias, N, C);
}
