// Row softmax over a strided matrix (rows of length C, leading dimension ld >= C).
#include <cuda_runtime.h>
#include <math.h>

__global__ void softmax_rows_strided(float* __restrict__ out, const float* __restrict__ in, int rows, int C, int ld) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        const float* src = in + (long)r * ld;
        float* dst = out + (long)r * ld;
        float m = -INFINITY;
        for (int j = 0; j < C; ++j) m = fmaxf(m, src[j]);
        float s = 0.f;
        for (int j = 0; j < C; ++j) s += expf(src[j] - m);
        float inv = 1.f / s;
        for (int j = 0; j < C; ++j) dst[j] = expf(src[j] - m) * inv;
    }
}

static inline int cdiv(int a, int b) { return (a + b - 1) / b; }

void softmax_strided(float* out, const float* in, int rows, int C, int ld, cudaStream_t stream) {
    const int threads = 128;
    softmax_rows_strided<<<cdiv(rows, threads), threads, 0, stream>>>(out, in, rows, C, ld);
}
