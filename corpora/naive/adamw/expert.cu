// AdamW step as a performance engineer writes it (a yardstick, never an input to a
// pass): four parameters per thread through 16-byte loads and stores of all four
// streams, the same arithmetic per element, scalar tail.
#include <cuda_runtime.h>

__device__ __forceinline__ void adamw_one(float& p, float g, float& m, float& v, float lr, float beta1, float beta2,
                                          float beta1_correction, float beta2_correction, float eps,
                                          float weight_decay)
{
    m = beta1 * m + (1.0f - beta1) * g;
    v = beta2 * v + (1.0f - beta2) * g * g;
    const float m_hat = m / beta1_correction;
    const float v_hat = v / beta2_correction;
    p -= lr * (m_hat / (sqrtf(v_hat) + eps) + weight_decay * p);
}

__global__ void __launch_bounds__(256) adamw_expert(float* __restrict__ params, const float* __restrict__ grads,
                                                    float* __restrict__ m, float* __restrict__ v, int N, float lr,
                                                    float beta1, float beta2, float beta1_correction,
                                                    float beta2_correction, float eps, float weight_decay)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = 4 * k;
    if (i + 3 < N) {
        float4 p = reinterpret_cast<float4*>(params)[k];
        const float4 g = reinterpret_cast<const float4*>(grads)[k];
        float4 mm = reinterpret_cast<float4*>(m)[k];
        float4 vv = reinterpret_cast<float4*>(v)[k];
        adamw_one(p.x, g.x, mm.x, vv.x, lr, beta1, beta2, beta1_correction, beta2_correction, eps, weight_decay);
        adamw_one(p.y, g.y, mm.y, vv.y, lr, beta1, beta2, beta1_correction, beta2_correction, eps, weight_decay);
        adamw_one(p.z, g.z, mm.z, vv.z, lr, beta1, beta2, beta1_correction, beta2_correction, eps, weight_decay);
        adamw_one(p.w, g.w, mm.w, vv.w, lr, beta1, beta2, beta1_correction, beta2_correction, eps, weight_decay);
        reinterpret_cast<float4*>(params)[k] = p;
        reinterpret_cast<float4*>(m)[k] = mm;
        reinterpret_cast<float4*>(v)[k] = vv;
    } else {
        for (int j = i; j < N; j++)
            adamw_one(params[j], grads[j], m[j], v[j], lr, beta1, beta2, beta1_correction, beta2_correction, eps,
                      weight_decay);
    }
}

void adamw_step(float* params, const float* grads, float* m, float* v, int N, float lr, float beta1, float beta2,
                int t, float eps, float weight_decay)
{
    const int block_size = 256;
    const int vectors = (N + 3) / 4;
    adamw_expert<<<(vectors + block_size - 1) / block_size, block_size>>>(
        params, grads, m, v, N, lr, beta1, beta2, 1.0f - powf(beta1, t), 1.0f - powf(beta2, t), eps, weight_decay);
}
