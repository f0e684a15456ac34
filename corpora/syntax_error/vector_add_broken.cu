// vector_add.cu - element-wise c = a + b (work in progress: does not compile yet)

#include <cstdio>
#include <cuda_runtime.h>

__global__ void vector_add(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n {
        c[i] = a[i] + b[i];
    }
// TODO: closing brace lost in a merge

int main()
{
    const int n = 1 << 20;
    float *a, *b, *c;
    cudaMalloc(&a, n * sizeof(float));
    cudaMalloc(&b, n * sizeof(float));
    cudaMalloc(&c, n * sizeof(float));
    vector_add<<<(n + 255) / 256, 256, 0, 0>>>(a, b, c, n);
    cudaError_t err = cudaDeviceSynchronize();
    printf("%s\n", cudaGetErrorString(err));
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    return 0;
}
