// Cross-entropy loss per row: loss[r] = logsumexp(logits[r, :]) - logits[r, target[r]].
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <math.h>

__global__ void cross_entropy_rows(float* loss, const float* logits, const int* target, int B, int V) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= B) return;
    const float* z = logits + (size_t)r * V;
    float mx = -INFINITY;
    for (int v = 0; v < V; v++) mx = fmaxf(mx, z[v]);
    float sum = 0.0f;
    for (int v = 0; v < V; v++) sum += expf(z[v] - mx);
    loss[r] = logf(sum) + mx - z[target[r]];
}

void cross_entropy(float* loss, const float* logits, const int* target, int B, int V, int block_size) {
    cross_entropy_rows<<<(B + block_size - 1) / block_size, block_size>>>(loss, logits, target, B, V);
}
