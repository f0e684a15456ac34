// Prelude of every kernel translation unit compiled by the CPU runtime.
//
// Device code is compiled as plain C++17: CUDA's qualifiers become attributes or
// nothing, `__shared__` becomes per-OS-thread storage (all threads of a block run as
// fibers on one worker thread, and a worker runs one block at a time, so a
// `static thread_local` is exactly one instance per running block), and the built-ins
// (indices, barriers, warp collectives, atomics, intrinsics) come from the headers
// below. The shadow headers (cuda_runtime.h, hip/hip_runtime.h, ...) include this one.
#pragma once

#ifndef KXCPU_WARP_SIZE
#if defined(KXFORM_CPU_WARP_SIZE)
#define KXCPU_WARP_SIZE KXFORM_CPU_WARP_SIZE
#elif defined(KXCPU_HIP)
#define KXCPU_WARP_SIZE 64
#else
#define KXCPU_WARP_SIZE 32
#endif
#endif
#if KXCPU_WARP_SIZE != 32 && KXCPU_WARP_SIZE != 64
#error "the CPU runtime emulates warps of 32 or 64 lanes"
#endif

#if !defined(KXCPU_HIP)
#ifndef __CUDACC__
#define __CUDACC__ 1
#endif
#ifndef __CUDA_ARCH__
#define __CUDA_ARCH__ 800
#endif
#ifndef __CUDACC_VER_MAJOR__
#define __CUDACC_VER_MAJOR__ 12
#define __CUDACC_VER_MINOR__ 0
#endif
#ifndef CUDART_VERSION
#define CUDART_VERSION 12000
#endif
#endif

#include <cassert>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <math.h>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
#define __shared__ static thread_local
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __inline_hint__
#define __launch_bounds__(...)
#define __maxnreg__(...)
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
#define __cudart_builtin__
#define __device_builtin__
#define CUDART_CB
#ifndef __has_builtin
#define __has_builtin(x) 0
#endif
#if !__has_builtin(__builtin_assume)
#define __builtin_assume(x) ((void)0)
#endif

#include "abi.h"
#if !defined(KXCPU_HIP)
#include "host_api.h"
#endif

/// Lanes per warp: 32 for CUDA, 64 for HIP sources (AMD wavefronts) unless overridden.
static constexpr int warpSize = KXCPU_WARP_SIZE;

#include "intrinsics.h"
#include "atomics.h"
#include "sync.h"

#ifdef KXCPU_TRACE
#include "trace_mem.h"
#endif
