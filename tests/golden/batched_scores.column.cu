// Batched attention scores S[b] = scale * Q[b] * K[b]^T for all (batch * head) pairs.
//
//   Q: [batch, seq_q, head_dim], K: [batch, seq_k, head_dim], S: [batch, seq_q, seq_k]
//
// 2-D tiles of S per block; blockIdx.z selects the batch entry.

#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>

#define TILE 16

#define CUDA_CHECK(call)                                                        \
    do {                                                                        \
        cudaError_t e = (call);                                                 \
        if (e != cudaSuccess) {                                                 \
            fprintf(stderr, "%s:%d CUDA error: %s\n", __FILE__, __LINE__,       \
                    cudaGetErrorString(e));                                     \
            std::exit(EXIT_FAILURE);                                            \
        }                                                                       \
    } while (0)

#if !defined(KXFORM_SWIZZLE_COLUMN_DEFINED) && (defined(__CUDACC__) || defined(__HIPCC__))
#define KXFORM_SWIZZLE_COLUMN_DEFINED
/* kxform swizzle column: logical block (x, y) for physical block (bx, by).
   A bijection on every gx x gy grid with gx*gy < 2^32 (checked by kxform). */
static __device__ __forceinline__ uint2 kxform_swizzle_column(
    const unsigned bx, const unsigned by, const unsigned gx, const unsigned gy)
{
    const unsigned pid = by * gx + bx;
    return make_uint2(pid / gy, pid % gy);
}
#endif

__global__ void batched_qk_scores(const float *__restrict__ Q, const float *__restrict__ K,
                                  float *__restrict__ S, int seq_q, int seq_k, int head_dim,
                                  float scale)
{
    const uint2 kxform_block = kxform_swizzle_column(blockIdx.x, blockIdx.y, gridDim.x, gridDim.y);
    __shared__ float qs[TILE][TILE + 1];
    __shared__ float ks[TILE][TILE + 1];

    const int b = blockIdx.z;
    const float *q = Q + (size_t)b * seq_q * head_dim;
    const float *k = K + (size_t)b * seq_k * head_dim;
    float *s = S + (size_t)b * seq_q * seq_k;

    const int row = kxform_block.y * TILE + threadIdx.y;          // query
    const int col = kxform_block.x * TILE + threadIdx.x;          // key
    const int krow = kxform_block.x * TILE + threadIdx.y;         // key loaded by this thread

    float acc = 0.0f;
    for (int d0 = 0; d0 < head_dim; d0 += TILE) {
        const int d = d0 + threadIdx.x;
        qs[threadIdx.y][threadIdx.x] = (row < seq_q && d < head_dim) ? q[row * head_dim + d] : 0.0f;
        ks[threadIdx.y][threadIdx.x] = (krow < seq_k && d < head_dim) ? k[krow * head_dim + d] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int dd = 0; dd < TILE; ++dd)
            acc += qs[threadIdx.y][dd] * ks[threadIdx.x][dd];
        __syncthreads();
    }
    if (row < seq_q && col < seq_k)
        s[row * seq_k + col] = acc * scale;
}

void launch_batched_qk_scores(const float *Q, const float *K, float *S, int batch, int seq_q,
                              int seq_k, int head_dim, cudaStream_t stream)
{
    dim3 block(TILE, TILE);
    dim3 grid((seq_k + TILE - 1) / TILE, (seq_q + TILE - 1) / TILE, batch);
    const float scale = 1.0f / sqrtf((float)head_dim);
    batched_qk_scores<<<grid, block, 0, stream>>>(Q, K, S, seq_q, seq_k, head_dim, scale);
    CUDA_CHECK(cudaGetLastError());
}

int main()
{
    const int batch = 8 * 16;  // batch * heads
    const int seq = 1024, head_dim = 64;
    const size_t qk = (size_t)batch * seq * head_dim;
    const size_t ss = (size_t)batch * seq * seq;

    std::vector<float> hQ(qk), hK(qk);
    for (size_t i = 0; i < qk; ++i) {
        hQ[i] = std::sin(0.001f * i);
        hK[i] = std::cos(0.002f * i);
    }

    float *dQ, *dK, *dS;
    CUDA_CHECK(cudaMalloc(&dQ, qk * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dK, qk * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dS, ss * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(dQ, hQ.data(), qk * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dK, hK.data(), qk * sizeof(float), cudaMemcpyHostToDevice));

    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    launch_batched_qk_scores(dQ, dK, dS, batch, seq, seq, head_dim, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));

    float s0;
    CUDA_CHECK(cudaMemcpy(&s0, dS, sizeof(float), cudaMemcpyDeviceToHost));
    std::printf("S[0][0][0] = %f\n", s0);

    CUDA_CHECK(cudaStreamDestroy(stream));
    CUDA_CHECK(cudaFree(dQ));
    CUDA_CHECK(cudaFree(dK));
    CUDA_CHECK(cudaFree(dS));
    return 0;
}
