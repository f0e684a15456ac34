// Smith-Waterman local alignment score matrix, anti-diagonal wavefront.
//
// H is (m + 1) x (n + 1), row 0 and column 0 are zero. Cell (i, j) depends on
// (i-1, j-1), (i-1, j) and (i, j-1), so all cells with i + j == diag can be
// computed in parallel once diagonals diag-1 and diag-2 are done: the host
// launches one kernel per anti-diagonal, diag = 2 .. m + n.
// Linear gap penalty; sequences are encoded 0..3 (A, C, G, T).

#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CUDA_CHECK(expr)                                                         \
    do {                                                                         \
        cudaError_t _e = (expr);                                                 \
        if (_e != cudaSuccess) {                                                 \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(_e)); \
            std::exit(1);                                                        \
        }                                                                        \
    } while (0)

constexpr int THREADS = 256;

__global__ void sw_diagonal(const char *__restrict__ a, const char *__restrict__ b, int *H,
                            int m, int n, int diag, int match, int mismatch, int gap)
{
    const int i_min = max(1, diag - n);
    const int i_max = min(m, diag - 1);
    const int i = i_min + blockIdx.x * blockDim.x + threadIdx.x;
    if (i > i_max)
        return;
    const int j = diag - i;
    const int w = n + 1;

    const int s = (a[i - 1] == b[j - 1]) ? match : mismatch;
    int h = max(0, H[(i - 1) * w + (j - 1)] + s);
    h = max(h, H[(i - 1) * w + j] - gap);
    h = max(h, H[i * w + (j - 1)] - gap);
    H[i * w + j] = h;
}

int main(int argc, char **argv)
{
    const int m = argc > 2 ? std::atoi(argv[1]) : 4096;
    const int n = argc > 2 ? std::atoi(argv[2]) : 4096;
    const int match = 3, mismatch = -3, gap = 2;

    std::vector<char> ha(m), hb(n);
    std::srand(7);
    for (auto &c : ha) c = (char)(std::rand() % 4);
    for (auto &c : hb) c = (char)(std::rand() % 4);

    char *da, *db;
    int *dH;
    const size_t cells = (size_t)(m + 1) * (n + 1);
    CUDA_CHECK(cudaMalloc(&da, m));
    CUDA_CHECK(cudaMalloc(&db, n));
    CUDA_CHECK(cudaMalloc(&dH, cells * sizeof(int)));
    CUDA_CHECK(cudaMemcpy(da, ha.data(), m, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(db, hb.data(), n, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(dH, 0, cells * sizeof(int)));

    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    for (int diag = 2; diag <= m + n; ++diag) {
        const int len = std::min(m, diag - 1) - std::max(1, diag - n) + 1;
        const int blocks = (len + THREADS - 1) / THREADS;
        sw_diagonal<<<blocks, THREADS, 0, stream>>>(da, db, dH, m, n, diag, match, mismatch, gap);
    }
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamSynchronize(stream));

    std::vector<int> hH(cells);
    CUDA_CHECK(cudaMemcpy(hH.data(), dH, cells * sizeof(int), cudaMemcpyDeviceToHost));
    const int best = *std::max_element(hH.begin(), hH.end());
    std::printf("best local alignment score: %d\n", best);

    CUDA_CHECK(cudaStreamDestroy(stream));
    CUDA_CHECK(cudaFree(da));
    CUDA_CHECK(cudaFree(db));
    CUDA_CHECK(cudaFree(dH));
    return 0;
}
