// SwiGLU on a [T, 2*H] activation: one block per token, threads stride over the hidden size.
#include <cuda_runtime.h>

__device__ __forceinline__ float silu(float v) { return v / (1.0f + __expf(-v)); }

__global__ void swiglu_per_token(float* out, const float* act, int H) {
    const int t = blockIdx.x;
    const float* gate = act + (size_t)t * 2 * H;
    const float* up = gate + H;
    for (int i = threadIdx.x; i < H; i += blockDim.x) {
        out[(size_t)t * H + i] = silu(gate[i]) * up[i];
    }
}

void swiglu(float* out, const float* act, int T, int H) {
    dim3 grid(T);
    dim3 block(256);
    swiglu_per_token<<<grid, block>>>(out, act, H);
}
