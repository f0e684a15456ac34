// Cross-entropy forward as it is usually first written: one thread per row of logits,
// three passes (maximum, sum of exponentials, the target's term), scalar loads.
//   losses[b] = log(sum_j exp(logits[b, j])) - logits[b, targets[b]]
#include <cuda_runtime.h>

__global__ void cross_entropy_naive(float* losses, const float* logits, const int* targets, int B, int V)
{
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < B) {
        const float* x = logits + (size_t)b * V;
        float maxval = -INFINITY;
        for (int j = 0; j < V; j++)
            maxval = fmaxf(maxval, x[j]);
        float sum = 0.0f;
        for (int j = 0; j < V; j++)
            sum += expf(x[j] - maxval);
        losses[b] = logf(sum) + maxval - x[targets[b]];
    }
}

void cross_entropy_forward(float* losses, const float* logits, const int* targets, int B, int V)
{
    const int block_size = 128;
    const int grid_size = (B + block_size - 1) / block_size;
    cross_entropy_naive<<<grid_size, block_size>>>(losses, logits, targets, B, V);
}
