// Scalar CSR sparse matrix-vector product y = A * x, one thread per row.
//
// The classic "CSR scalar" kernel (Bell & Garland): simple, and badly
// load-imbalanced when row lengths vary, which is why it is a useful baseline.

#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CHECK(call)                                                              \
    {                                                                            \
        const cudaError_t error = call;                                          \
        if (error != cudaSuccess) {                                              \
            printf("Error: %s:%d, ", __FILE__, __LINE__);                        \
            printf("code:%d, reason: %s\n", error, cudaGetErrorString(error));   \
            exit(1);                                                             \
        }                                                                        \
    }

__global__ void spmv_csr_scalar_kernel(const int num_rows, const int *__restrict__ row_ptr,
                                       const int *__restrict__ col_idx,
                                       const float *__restrict__ values,
                                       const float *__restrict__ x, float *__restrict__ y)
{
    int row = blockDim.x * blockIdx.x + threadIdx.x;
    if (row < num_rows) {
        float dot = 0.0f;
        int row_start = row_ptr[row];
        int row_end = row_ptr[row + 1];
        for (int jj = row_start; jj < row_end; jj++)
            dot += values[jj] * x[col_idx[jj]];
        y[row] = dot;
    }
}

// Random sparse matrix with about `per_row` entries per row, sorted columns.
static void random_csr(int rows, int cols, int per_row, std::vector<int> &ptr,
                       std::vector<int> &idx, std::vector<float> &val)
{
    ptr.assign(rows + 1, 0);
    idx.clear();
    val.clear();
    std::vector<int> row_cols;
    for (int r = 0; r < rows; ++r) {
        int len = std::min(cols, per_row / 2 + rand() % (per_row + 1));
        row_cols.clear();
        while ((int)row_cols.size() < len) {
            int c = rand() % cols;
            if (std::find(row_cols.begin(), row_cols.end(), c) == row_cols.end())
                row_cols.push_back(c);
        }
        std::sort(row_cols.begin(), row_cols.end());
        for (int c : row_cols) {
            idx.push_back(c);
            val.push_back((float)rand() / RAND_MAX);
        }
        ptr[r + 1] = (int)idx.size();
    }
}

int main(int argc, char **argv)
{
    int rows = 1 << 20, cols = 1 << 20, per_row = 16;
    if (argc > 1)
        rows = cols = atoi(argv[1]);

    std::vector<int> h_ptr, h_idx;
    std::vector<float> h_val;
    random_csr(rows, cols, per_row, h_ptr, h_idx, h_val);
    std::vector<float> h_x(cols, 1.0f), h_y(rows);
    int nnz = h_ptr[rows];
    printf("matrix %d x %d, %d nonzeros\n", rows, cols, nnz);

    int *d_ptr, *d_idx;
    float *d_val, *d_x, *d_y;
    CHECK(cudaMalloc(&d_ptr, (rows + 1) * sizeof(int)));
    CHECK(cudaMalloc(&d_idx, nnz * sizeof(int)));
    CHECK(cudaMalloc(&d_val, nnz * sizeof(float)));
    CHECK(cudaMalloc(&d_x, cols * sizeof(float)));
    CHECK(cudaMalloc(&d_y, rows * sizeof(float)));
    CHECK(cudaMemcpy(d_ptr, h_ptr.data(), (rows + 1) * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_idx, h_idx.data(), nnz * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_val, h_val.data(), nnz * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_x, h_x.data(), cols * sizeof(float), cudaMemcpyHostToDevice));

    const int block = 256;
    const int grid = (rows + block - 1) / block;
    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));
    spmv_csr_scalar_kernel<<<grid, block, 0, stream>>>(rows, d_ptr, d_idx, d_val, d_x, d_y);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize(stream));
    CHECK(cudaMemcpy(h_y.data(), d_y, rows * sizeof(float), cudaMemcpyDeviceToHost));

    double checksum = 0.0;
    for (int r = 0; r < rows; ++r)
        checksum += h_y[r];
    printf("checksum %.4f\n", checksum);

    CHECK(cudaStreamDestroy(stream));
    CHECK(cudaFree(d_ptr));
    CHECK(cudaFree(d_idx));
    CHECK(cudaFree(d_val));
    CHECK(cudaFree(d_x));
    CHECK(cudaFree(d_y));
    return 0;
}
