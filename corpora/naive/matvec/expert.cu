// Matrix-vector product as a performance engineer writes it (a yardstick, never an
// input to a pass): one warp per row, coalesced 16-byte loads of A and x where the row
// length allows them, a butterfly shuffle reduction.
#include <cuda_runtime.h>

__global__ void __launch_bounds__(256) matvec_expert(float* __restrict__ y, const float* __restrict__ A,
                                                     const float* __restrict__ x, int M, int N)
{
    const int lane = threadIdx.x & 31;
    const int i = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (i >= M)
        return;
    const float* a = A + (size_t)i * N;
    const int N4 = (N & 3) == 0 ? N >> 2 : 0;
    float acc = 0.0f;
    for (int j = lane; j < N4; j += 32) {
        const float4 u = reinterpret_cast<const float4*>(a)[j];
        const float4 v = reinterpret_cast<const float4*>(x)[j];
        acc += (u.x * v.x + u.y * v.y) + (u.z * v.z + u.w * v.w);
    }
    for (int j = 4 * N4 + lane; j < N; j += 32)
        acc += a[j] * x[j];
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, offset);
    if (lane == 0)
        y[i] = acc;
}

void matvec(float* y, const float* A, const float* x, int M, int N)
{
    matvec_expert<<<(M + 7) / 8, 256>>>(y, A, x, M, N);
}
