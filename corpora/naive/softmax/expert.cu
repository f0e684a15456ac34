// Row softmax as a performance engineer writes it (a yardstick, never an input to a
// pass): one warp per row, 16-byte loads where the row length allows them, max and sum
// by butterfly shuffles, the reciprocal of the sum computed once.
#include <cuda_runtime.h>

__device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__global__ void __launch_bounds__(256) softmax_expert(float* __restrict__ out, const float* __restrict__ inp,
                                                      int N, int C)
{
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N)
        return;
    const float* x = inp + (size_t)row * C;
    float* y = out + (size_t)row * C;
    const int C4 = (C & 3) == 0 ? C >> 2 : 0;
    const float4* x4 = reinterpret_cast<const float4*>(x);

    float m = -INFINITY;
    for (int i = lane; i < C4; i += 32) {
        const float4 v = x4[i];
        m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
    }
    for (int i = 4 * C4 + lane; i < C; i += 32)
        m = fmaxf(m, x[i]);
    m = warp_max(m);

    float s = 0.0f;
    for (int i = lane; i < C4; i += 32) {
        const float4 v = x4[i];
        s += (expf(v.x - m) + expf(v.y - m)) + (expf(v.z - m) + expf(v.w - m));
    }
    for (int i = 4 * C4 + lane; i < C; i += 32)
        s += expf(x[i] - m);
    const float inv = 1.0f / warp_sum(s);

    float4* y4 = reinterpret_cast<float4*>(y);
    for (int i = lane; i < C4; i += 32) {
        const float4 v = x4[i];
        y4[i] = make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv, expf(v.z - m) * inv, expf(v.w - m) * inv);
    }
    for (int i = 4 * C4 + lane; i < C; i += 32)
        y[i] = expf(x[i] - m) * inv;
}

void softmax_forward(float* out, const float* inp, int N, int C)
{
    const int rows_per_block = 8;
    softmax_expert<<<(N + rows_per_block - 1) / rows_per_block, 32 * rows_per_block>>>(out, inp, N, C);
}
