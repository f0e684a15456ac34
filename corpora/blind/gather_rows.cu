// Row gather (an embedding lookup): out[i, :] = table[ids[i], :], templated on the element type.
#include <cuda_runtime.h>

template <typename T>
__global__ void gather_rows_kernel(T* out, const T* table, const int* ids, int n, int dim) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const T* src = table + (long)ids[i] * dim;
        for (int d = 0; d < dim; ++d) out[(long)i * dim + d] = src[d];
    }
}

template <typename T>
void gather_rows(T* out, const T* table, const int* ids, int n, int dim, int block_size) {
    gather_rows_kernel<T><<<(n + block_size - 1) / block_size, block_size>>>(out, table, ids, n, dim);
}

template void gather_rows<float>(float*, const float*, const int*, int, int, int);
