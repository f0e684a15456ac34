// AdamW step as it is usually first written: one parameter per thread.
#include <cuda_runtime.h>

__global__ void adamw_naive(float* params, const float* grads, float* m, float* v, int N, float lr, float beta1,
                            float beta2, float beta1_correction, float beta2_correction, float eps,
                            float weight_decay)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N)
        return;
    float g = grads[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float m_hat = mi / beta1_correction;
    float v_hat = vi / beta2_correction;
    params[i] -= lr * (m_hat / (sqrtf(v_hat) + eps) + weight_decay * params[i]);
}

void adamw_step(float* params, const float* grads, float* m, float* v, int N, float lr, float beta1, float beta2,
                int t, float eps, float weight_decay)
{
    const int block_size = 512;
    const int grid_size = (N + block_size - 1) / block_size;
    adamw_naive<<<grid_size, block_size>>>(params, grads, m, v, N, lr, beta1, beta2, 1.0f - powf(beta1, t),
                                           1.0f - powf(beta2, t), eps, weight_decay);
}
