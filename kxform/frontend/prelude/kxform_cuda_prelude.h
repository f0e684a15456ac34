/* kxform's CUDA prelude for libclang: just enough of CUDA's declarations for a host-only
   parse (the libclang wheel ships no CUDA headers). Included with -include before the file. */
#pragma once
/* nvcc defines __CUDACC__ in both of its passes: code behind #ifdef __CUDACC__ is CUDA code. */
#ifndef __CUDACC__
#define __CUDACC__ 1
#endif
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __managed__ __attribute__((managed))
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __align__(n) __attribute__((aligned(n)))
typedef unsigned long size_t;
/* nvcc's implicit cuda_runtime.h brings <math.h>'s macros (INFINITY, NAN, HUGE_VALF,
   M_PI, ...) and <limits.h> into every file. The macros are spelled here rather than by
   including <math.h>, whose host-only functions would then be uncallable from kernels;
   <float.h> and <limits.h> come from stubs/ (the wheel has no compiler headers). */
#include <limits.h>
#ifndef INFINITY
#define INFINITY (__builtin_inff())
#endif
#ifndef NAN
#define NAN (__builtin_nanf(""))
#endif
#ifndef HUGE_VALF
#define HUGE_VALF (__builtin_huge_valf())
#endif
#ifndef HUGE_VAL
#define HUGE_VAL (__builtin_huge_val())
#endif
#ifndef M_PI
#define M_E 2.7182818284590452354
#define M_LOG2E 1.4426950408889634074
#define M_LOG10E 0.43429448190325182765
#define M_LN2 0.69314718055994530942
#define M_LN10 2.30258509299404568402
#define M_PI 3.14159265358979323846
#define M_PI_2 1.57079632679489661923
#define M_PI_4 0.78539816339744830962
#define M_1_PI 0.31830988618379067154
#define M_2_PI 0.63661977236758134308
#define M_2_SQRTPI 1.12837916709551257390
#define M_SQRT2 1.41421356237309504880
#define M_SQRT1_2 0.70710678118654752440
#endif
struct uint3 { unsigned x, y, z; };
struct uint2 { unsigned x, y; };
/* The other vector types: without them a user typedef of one (`typedef uint4 pack_t;`)
   would fail, and every use of it would look like an error in the user's code. */
#define KXFORM_VECTORS(T, N) \
  struct N##1 { T x; }; struct N##2 { T x, y; }; struct N##3 { T x, y, z; }; struct N##4 { T x, y, z, w; };
KXFORM_VECTORS(signed char, char) KXFORM_VECTORS(unsigned char, uchar) KXFORM_VECTORS(short, short)
KXFORM_VECTORS(unsigned short, ushort) KXFORM_VECTORS(int, int) KXFORM_VECTORS(long, long)
KXFORM_VECTORS(unsigned long, ulong) KXFORM_VECTORS(long long, longlong)
KXFORM_VECTORS(unsigned long long, ulonglong) KXFORM_VECTORS(float, float) KXFORM_VECTORS(double, double)
#undef KXFORM_VECTORS
struct uint1 { unsigned x; }; struct uint4 { unsigned x, y, z, w; };
struct dim3 {
  unsigned x, y, z;
  __host__ __device__ dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
  __host__ __device__ dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};
extern const __device__ uint3 threadIdx;
extern const __device__ uint3 blockIdx;
extern const __device__ dim3 blockDim;
extern const __device__ dim3 gridDim;
extern const __device__ int warpSize;
/* HIP's index built-ins: the same header the HIP-in-CUDA headers use with nvcc. */
#include "../../build/hip_for_nvcc/hip/hip_index.h"
/* Namespaces of CUDA's device libraries, so `namespace cg = cooperative_groups;` and
   `using namespace nvcuda;` parse when the real headers are not reached. */
namespace cooperative_groups {}
namespace nvcuda { namespace wmma {
struct matrix_a; struct matrix_b; struct accumulator; struct row_major; struct col_major;
template <class Use, int M, int N, int K, class T = float, class Layout = void>
struct fragment { T x[8]; enum { num_elements = 8 }; };
} }
typedef struct CUstream_st *cudaStream_t;
typedef cudaStream_t hipStream_t;
typedef int cudaError_t;
extern "C" int __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shmem = 0, void *stream = 0);
