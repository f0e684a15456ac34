// Cross-entropy forward as a performance engineer writes it (a yardstick, never an
// input to a pass): one warp per row, one pass with an online maximum and rescaled sum
// per lane (16-byte loads where the row length allows them), merged by butterfly shuffles.
#include <cuda_runtime.h>

__device__ __forceinline__ void online_merge(float& m, float& s, float m2, float s2)
{
    const float mm = fmaxf(m, m2);
    s = (m == -INFINITY ? 0.0f : s * expf(m - mm)) + (m2 == -INFINITY ? 0.0f : s2 * expf(m2 - mm));
    m = mm;
}

__device__ __forceinline__ void online_add(float& m, float& s, float x)
{
    if (x > m) {
        s = s * expf(m - x) + 1.0f;
        m = x;
    } else {
        s += expf(x - m);
    }
}

__global__ void __launch_bounds__(256) cross_entropy_expert(float* __restrict__ losses,
                                                            const float* __restrict__ logits,
                                                            const int* __restrict__ targets, int B, int V)
{
    const int lane = threadIdx.x & 31;
    const int b = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (b >= B)
        return;
    const float* x = logits + (size_t)b * V;
    const int V4 = (V & 3) == 0 ? V >> 2 : 0;
    float m = -INFINITY, s = 0.0f;
    for (int i = lane; i < V4; i += 32) {
        const float4 v = reinterpret_cast<const float4*>(x)[i];
        online_add(m, s, v.x);
        online_add(m, s, v.y);
        online_add(m, s, v.z);
        online_add(m, s, v.w);
    }
    for (int i = 4 * V4 + lane; i < V; i += 32)
        online_add(m, s, x[i]);
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, offset);
        online_merge(m, s, m2, s2);
    }
    if (lane == 0)
        losses[b] = logf(s) + m - x[targets[b]];
}

void cross_entropy_forward(float* losses, const float* logits, const int* targets, int B, int V)
{
    cross_entropy_expert<<<(B + 7) / 8, 256>>>(losses, logits, targets, B, V);
}
