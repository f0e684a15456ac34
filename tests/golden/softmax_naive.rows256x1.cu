// Row softmax as it is usually first written: one thread per row, three passes
// (maximum, sum of exponentials, output), scalar loads.
#include <cuda_runtime.h>

#ifndef SOFTMAX_NAIVE_LANES
#define SOFTMAX_NAIVE_LANES 256
#endif
#ifndef SOFTMAX_NAIVE_ROWS
#define SOFTMAX_NAIVE_ROWS 1
#endif
#if !defined(KXFORM_ROWS_BLOCK_MAX_FLOAT_DEFINED) && (defined(__CUDACC__) || defined(__HIPCC__))
#define KXFORM_ROWS_BLOCK_MAX_FLOAT_DEFINED
template <int G>
__device__ __forceinline__ float kxform_rows_block_max_float(float v, float* partial)
{
    static_assert(G > 32 && G <= 1024 && (G & (G - 1)) == 0, "lanes per row: a power of two, several warps");
    for (int offset = 16; offset > 0; offset >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    if ((threadIdx.x & 31u) == 0)
        partial[(threadIdx.x % G) / 32] = v;
    __syncthreads();  // every warp's partial is stored before any is read
    v = partial[0];
    for (int w = 1; w < G / 32; ++w)
        v = fmaxf(v, partial[w]);
    __syncthreads();  // every thread has read the partials before a later reduction stores its own
    return v;
}
#endif

#if !defined(KXFORM_ROWS_BLOCK_SUM_FLOAT_DEFINED) && (defined(__CUDACC__) || defined(__HIPCC__))
#define KXFORM_ROWS_BLOCK_SUM_FLOAT_DEFINED
template <int G>
__device__ __forceinline__ float kxform_rows_block_sum_float(float v, float* partial)
{
    static_assert(G > 32 && G <= 1024 && (G & (G - 1)) == 0, "lanes per row: a power of two, several warps");
    for (int offset = 16; offset > 0; offset >>= 1)
        v = v + __shfl_xor_sync(0xffffffffu, v, offset);
    if ((threadIdx.x & 31u) == 0)
        partial[(threadIdx.x % G) / 32] = v;
    __syncthreads();  // every warp's partial is stored before any is read
    v = partial[0];
    for (int w = 1; w < G / 32; ++w)
        v = v + partial[w];
    __syncthreads();  // every thread has read the partials before a later reduction stores its own
    return v;
}
#endif

__global__ void softmax_naive(float* out, const float* inp, int N, int C)
{
    const int rows_lane = threadIdx.x % SOFTMAX_NAIVE_LANES;
    bool rows_alias = false;
    {
        long long rows_inp_lo = ((long long)C * (long long)(blockDim.x / SOFTMAX_NAIVE_LANES) * (long long)blockIdx.x + (long long)C * (long long)(threadIdx.x / SOFTMAX_NAIVE_LANES)), rows_inp_hi = rows_inp_lo;
        { const long long rows_e = (-1LL + (long long)C + (long long)C * (long long)(blockDim.x / SOFTMAX_NAIVE_LANES) * (long long)blockIdx.x + (long long)C * (long long)(threadIdx.x / SOFTMAX_NAIVE_LANES));
          rows_inp_lo = rows_e < rows_inp_lo ? rows_e : rows_inp_lo; rows_inp_hi = rows_e > rows_inp_hi ? rows_e : rows_inp_hi; }
        long long rows_out_lo = ((long long)C * (long long)(blockDim.x / SOFTMAX_NAIVE_LANES) * (long long)blockIdx.x + (long long)C * (long long)(threadIdx.x / SOFTMAX_NAIVE_LANES)), rows_out_hi = rows_out_lo;
        { const long long rows_e = (-1LL + (long long)C + (long long)C * (long long)(blockDim.x / SOFTMAX_NAIVE_LANES) * (long long)blockIdx.x + (long long)C * (long long)(threadIdx.x / SOFTMAX_NAIVE_LANES));
          rows_out_lo = rows_e < rows_out_lo ? rows_e : rows_out_lo; rows_out_hi = rows_e > rows_out_hi ? rows_e : rows_out_hi; }
        rows_alias = rows_alias || (((long long)(out) + (rows_out_lo) * (long long)sizeof(out[0])) < ((long long)(inp) + (rows_inp_hi + 1) * (long long)sizeof(inp[0])) && ((long long)(inp) + (rows_inp_lo) * (long long)sizeof(inp[0])) < ((long long)(out) + (rows_out_hi + 1) * (long long)sizeof(out[0])));
    }
    const int rows_share = rows_alias ? 1 : SOFTMAX_NAIVE_LANES;
    __shared__ float rows_partial_float[32];
    int row = blockIdx.x * (blockDim.x / SOFTMAX_NAIVE_LANES) + (threadIdx.x / SOFTMAX_NAIVE_LANES);
    if (row >= N)
        return;
    const float* x = inp + (size_t)row * C;
    float* y = out + (size_t)row * C;
    float maxval = -INFINITY;
    for (int j = rows_lane; rows_lane < rows_share && j < C; j += rows_share)
        maxval = fmaxf(maxval, x[j]);
    maxval = kxform_rows_block_max_float<SOFTMAX_NAIVE_LANES>(maxval, rows_partial_float);
    float sum = 0.0f;
    for (int j = rows_lane; rows_lane < rows_share && j < C; j += rows_share)
        sum += expf(x[j] - maxval);
    sum = kxform_rows_block_sum_float<SOFTMAX_NAIVE_LANES>(sum, rows_partial_float);
    for (int j = rows_lane; rows_lane < rows_share && j < C; j += rows_share)
        y[j] = expf(x[j] - maxval) / sum;
}

void softmax_forward(float* out, const float* inp, int N, int C)
{
    const int block_size = SOFTMAX_NAIVE_ROWS;
    const int grid_size = (N + block_size - 1) / block_size;
    softmax_naive<<<grid_size, block_size * SOFTMAX_NAIVE_LANES>>>(out, inp, N, C);
}
