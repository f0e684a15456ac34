// Fused epilogue of a transformer MLP: out = residual + scale * gelu(x + bias)
//
// x, residual and out are [rows, hidden] row-major; bias is [hidden].
// One thread per element; gelu uses the tanh approximation (as in GPT-2/BERT).

#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define checkCudaErrors(val) check_cuda((val), #val, __FILE__, __LINE__)

static void check_cuda(cudaError_t result, const char *func, const char *file, int line)
{
    if (result != cudaSuccess) {
        fprintf(stderr, "CUDA error at %s:%d code=%d(%s) \"%s\"\n", file, line,
                (int)result, cudaGetErrorString(result), func);
        exit(EXIT_FAILURE);
    }
}

__device__ __forceinline__ float gelu_tanh(float v)
{
    const float k0 = 0.7978845608f;  // sqrt(2 / pi)
    const float k1 = 0.044715f;
    return 0.5f * v * (1.0f + tanhf(k0 * (v + k1 * v * v * v)));
}

__global__ void fused_bias_gelu_residual(const float *__restrict__ x,
                                         const float *__restrict__ bias,
                                         const float *__restrict__ residual,
                                         float *__restrict__ out,
                                         float scale, int n, int hidden)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i] + bias[i % hidden];
        out[i] = residual[i] + scale * gelu_tanh(v);
    }
}

void launch_fused_bias_gelu_residual(const float *x, const float *bias,
                                     const float *residual, float *out,
                                     float scale, int rows, int hidden,
                                     cudaStream_t stream)
{
    const int n = rows * hidden;
    const int threads = 256;
    const int blocks = (n + threads - 1) / threads;
    fused_bias_gelu_residual<<<blocks, threads, 0, stream>>>(x, bias, residual, out,
                                                             scale, n, hidden);
    checkCudaErrors(cudaGetLastError());
}

int main()
{
    const int rows = 8192, hidden = 4096;
    const size_t n = (size_t)rows * hidden;

    float *h_x = (float *)malloc(n * sizeof(float));
    float *h_res = (float *)malloc(n * sizeof(float));
    float *h_bias = (float *)malloc(hidden * sizeof(float));
    for (size_t i = 0; i < n; ++i) {
        h_x[i] = (float)(i % 97) / 32.0f - 1.5f;
        h_res[i] = (float)(i % 13) / 13.0f;
    }
    for (int i = 0; i < hidden; ++i)
        h_bias[i] = 0.01f * (float)(i % 7);

    float *d_x, *d_bias, *d_res, *d_out;
    checkCudaErrors(cudaMalloc((void **)&d_x, n * sizeof(float)));
    checkCudaErrors(cudaMalloc((void **)&d_bias, hidden * sizeof(float)));
    checkCudaErrors(cudaMalloc((void **)&d_res, n * sizeof(float)));
    checkCudaErrors(cudaMalloc((void **)&d_out, n * sizeof(float)));
    checkCudaErrors(cudaMemcpy(d_x, h_x, n * sizeof(float), cudaMemcpyHostToDevice));
    checkCudaErrors(cudaMemcpy(d_bias, h_bias, hidden * sizeof(float), cudaMemcpyHostToDevice));
    checkCudaErrors(cudaMemcpy(d_res, h_res, n * sizeof(float), cudaMemcpyHostToDevice));

    cudaStream_t stream;
    checkCudaErrors(cudaStreamCreate(&stream));
    launch_fused_bias_gelu_residual(d_x, d_bias, d_res, d_out, 0.5f, rows, hidden, stream);
    checkCudaErrors(cudaStreamSynchronize(stream));

    float probe;
    checkCudaErrors(cudaMemcpy(&probe, d_out + 12345, sizeof(float), cudaMemcpyDeviceToHost));
    printf("out[12345] = %f\n", probe);

    checkCudaErrors(cudaStreamDestroy(stream));
    cudaFree(d_x);
    cudaFree(d_bias);
    cudaFree(d_res);
    cudaFree(d_out);
    free(h_x);
    free(h_res);
    free(h_bias);
    return 0;
}
