// Runs both kernels once and checks a few results on the host.
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

#include "demo.h"

int main()
{
    const int n = 257;  // not a multiple of any tile
    std::vector<float> a(n * n), b(n * n, 0.0f), c(n * n);
    for (int i = 0; i < n * n; ++i)
        a[i] = (float)(i % 17) - 8.0f;
    for (int i = 0; i < n; ++i)
        b[i * n + i] = 1.0f;  // identity: A * I == A
    float *da, *db, *dc;
    cudaMalloc(&da, a.size() * sizeof(float));
    cudaMalloc(&db, b.size() * sizeof(float));
    cudaMalloc(&dc, c.size() * sizeof(float));
    cudaMemcpy(da, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(db, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice);
    launch_sgemm(n, n, n, da, db, dc);
    cudaMemcpy(c.data(), dc, c.size() * sizeof(float), cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int i = 0; i < n * n; ++i)
        bad += c[i] != a[i];
    launch_transpose(dc, da, n, n);
    cudaMemcpy(c.data(), dc, c.size() * sizeof(float), cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
            bad += c[j * n + i] != a[i * n + j];
    cudaError_t err = cudaGetLastError();
    printf("%s (%d mismatches, %s)\n", bad || err != cudaSuccess ? "FAILED" : "PASSED", bad,
           cudaGetErrorString(err));
    return bad || err != cudaSuccess;
}
