// HIP spelled in CUDA, so that nvcc compiles a HIP kernel's unit: to PTX, where kxform
// confirms no physical block-index read is left after a remap, and to a cubin the GPU
// runtime launches (original and rewrite alike). Only what device code needs is mapped
// (see kxform/build/hip.py); host code that calls the HIP runtime is not.
#pragma once
#include <cuda_runtime.h>
#define __HIP_PLATFORM_NVIDIA__ 1
#define __HIPCC__ 1
#include "hip_index.h"
#define HIP_KERNEL_NAME(...) __VA_ARGS__
#define HIP_DYNAMIC_SHARED(type, name) extern __shared__ type name[];
#define hipLaunchKernelGGL(kernel, grid, block, shared, stream, ...) kernel<<<grid, block, shared, stream>>>(__VA_ARGS__)
#define __shfl(v, l, ...) __shfl_sync(0xffffffffu, v, l, ##__VA_ARGS__)
#define __shfl_up(v, d, ...) __shfl_up_sync(0xffffffffu, v, d, ##__VA_ARGS__)
#define __shfl_down(v, d, ...) __shfl_down_sync(0xffffffffu, v, d, ##__VA_ARGS__)
#define __shfl_xor(v, m, ...) __shfl_xor_sync(0xffffffffu, v, m, ##__VA_ARGS__)
#define __ballot(p) __ballot_sync(0xffffffffu, p)
#define __any(p) __any_sync(0xffffffffu, p)
#define __all(p) __all_sync(0xffffffffu, p)
typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
#define hipSuccess cudaSuccess
