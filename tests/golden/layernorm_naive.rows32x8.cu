// LayerNorm forward as it is usually first written: one thread per row, three
// passes over the row (mean, variance, output), scalar loads.
//   out[r, :] = (inp[r, :] - mean_r) * rstd_r * weight + bias
#include <cuda_runtime.h>

#ifndef LAYERNORM_NAIVE_LANES
#define LAYERNORM_NAIVE_LANES 32
#endif
#ifndef LAYERNORM_NAIVE_ROWS
#define LAYERNORM_NAIVE_ROWS 8
#endif
#if !defined(KXFORM_ROWS_WARP_SUM_FLOAT_DEFINED) && (defined(__CUDACC__) || defined(__HIPCC__))
#define KXFORM_ROWS_WARP_SUM_FLOAT_DEFINED
template <int G>
__device__ __forceinline__ float kxform_rows_warp_sum_float(float v)
{
    static_assert(G >= 1 && G <= 32 && (G & (G - 1)) == 0, "lanes per row: a power of two up to a warp");
    // the row's lanes: the aligned group of G lanes holding the caller
    const unsigned mask = (0xffffffffu >> (32 - G)) << ((threadIdx.x & 31u) & ~(unsigned)(G - 1));
    for (int offset = G / 2; offset > 0; offset >>= 1)
        v = v + __shfl_xor_sync(mask, v, offset);
    return v;
}
#endif

__global__ void layernorm_naive(float* out, const float* inp, const float* weight, const float* bias,
                                int N, int C)
{
    const int rows_lane = threadIdx.x % LAYERNORM_NAIVE_LANES;
    bool rows_alias = false;
    {
        long long rows_inp_lo = ((long long)C * (long long)(blockDim.x / LAYERNORM_NAIVE_LANES) * (long long)blockIdx.x + (long long)C * (long long)(threadIdx.x / LAYERNORM_NAIVE_LANES)), rows_inp_hi = rows_inp_lo;
        { const long long rows_e = (-1LL + (long long)C + (long long)C * (long long)(blockDim.x / LAYERNORM_NAIVE_LANES) * (long long)blockIdx.x + (long long)C * (long long)(threadIdx.x / LAYERNORM_NAIVE_LANES));
          rows_inp_lo = rows_e < rows_inp_lo ? rows_e : rows_inp_lo; rows_inp_hi = rows_e > rows_inp_hi ? rows_e : rows_inp_hi; }
        long long rows_weight_lo = 0LL, rows_weight_hi = rows_weight_lo;
        { const long long rows_e = (-1LL + (long long)C);
          rows_weight_lo = rows_e < rows_weight_lo ? rows_e : rows_weight_lo; rows_weight_hi = rows_e > rows_weight_hi ? rows_e : rows_weight_hi; }
        long long rows_bias_lo = 0LL, rows_bias_hi = rows_bias_lo;
        { const long long rows_e = (-1LL + (long long)C);
          rows_bias_lo = rows_e < rows_bias_lo ? rows_e : rows_bias_lo; rows_bias_hi = rows_e > rows_bias_hi ? rows_e : rows_bias_hi; }
        long long rows_out_lo = ((long long)C * (long long)(blockDim.x / LAYERNORM_NAIVE_LANES) * (long long)blockIdx.x + (long long)C * (long long)(threadIdx.x / LAYERNORM_NAIVE_LANES)), rows_out_hi = rows_out_lo;
        { const long long rows_e = (-1LL + (long long)C + (long long)C * (long long)(blockDim.x / LAYERNORM_NAIVE_LANES) * (long long)blockIdx.x + (long long)C * (long long)(threadIdx.x / LAYERNORM_NAIVE_LANES));
          rows_out_lo = rows_e < rows_out_lo ? rows_e : rows_out_lo; rows_out_hi = rows_e > rows_out_hi ? rows_e : rows_out_hi; }
        rows_alias = rows_alias || (((long long)(out) + (rows_out_lo) * (long long)sizeof(out[0])) < ((long long)(bias) + (rows_bias_hi + 1) * (long long)sizeof(bias[0])) && ((long long)(bias) + (rows_bias_lo) * (long long)sizeof(bias[0])) < ((long long)(out) + (rows_out_hi + 1) * (long long)sizeof(out[0])));
        rows_alias = rows_alias || (((long long)(out) + (rows_out_lo) * (long long)sizeof(out[0])) < ((long long)(inp) + (rows_inp_hi + 1) * (long long)sizeof(inp[0])) && ((long long)(inp) + (rows_inp_lo) * (long long)sizeof(inp[0])) < ((long long)(out) + (rows_out_hi + 1) * (long long)sizeof(out[0])));
        rows_alias = rows_alias || (((long long)(out) + (rows_out_lo) * (long long)sizeof(out[0])) < ((long long)(weight) + (rows_weight_hi + 1) * (long long)sizeof(weight[0])) && ((long long)(weight) + (rows_weight_lo) * (long long)sizeof(weight[0])) < ((long long)(out) + (rows_out_hi + 1) * (long long)sizeof(out[0])));
    }
    const int rows_share = rows_alias ? 1 : LAYERNORM_NAIVE_LANES;
    int row = blockIdx.x * (blockDim.x / LAYERNORM_NAIVE_LANES) + (threadIdx.x / LAYERNORM_NAIVE_LANES);
    if (row >= N)
        return;
    const float* x = inp + (size_t)row * C;
    float mean = 0.0f;
    for (int i = rows_lane; rows_lane < rows_share && i < C; i += rows_share)
        mean += x[i];
    mean = kxform_rows_warp_sum_float<LAYERNORM_NAIVE_LANES>(mean);
    mean /= C;
    float var = 0.0f;
    for (int i = rows_lane; rows_lane < rows_share && i < C; i += rows_share) {
        float d = x[i] - mean;
        var += d * d;
    }
    var = kxform_rows_warp_sum_float<LAYERNORM_NAIVE_LANES>(var);
    var /= C;
    float rstd = 1.0f / sqrtf(var + 1e-5f);
    float* o = out + (size_t)row * C;
    for (int i = rows_lane; rows_lane < rows_share && i < C; i += rows_share)
        o[i] = (x[i] - mean) * rstd * weight[i] + bias[i];
}

void layernorm_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C)
{
    const int block_size = LAYERNORM_NAIVE_ROWS;
    const int grid_size = (N + block_size - 1) / block_size;
    layernorm_naive<<<grid_size, block_size * LAYERNORM_NAIVE_LANES>>>(out, inp, weight, bias, N, C);
}
