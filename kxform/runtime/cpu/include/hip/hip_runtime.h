// Shadow of hip/hip_runtime.h for the kxform CPU runtime (AMD wavefronts of 64 lanes
// unless KXFORM_CPU_WARP_SIZE says otherwise).
#pragma once
#ifndef KXCPU_HIP
#define KXCPU_HIP 1
#endif
#include "../kxcpu/device.h"
#ifndef __HIPCC__
#define __HIPCC__ 1
#endif
#ifndef __HIP__
#define __HIP__ 1
#endif
#ifndef __HIP_DEVICE_COMPILE__
#define __HIP_DEVICE_COMPILE__ 1
#endif
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#define hipThreadIdx_x (threadIdx.x)
#define hipThreadIdx_y (threadIdx.y)
#define hipThreadIdx_z (threadIdx.z)
#define hipBlockIdx_x (blockIdx.x)
#define hipBlockIdx_y (blockIdx.y)
#define hipBlockIdx_z (blockIdx.z)
#define hipBlockDim_x (blockDim.x)
#define hipBlockDim_y (blockDim.y)
#define hipBlockDim_z (blockDim.z)
#define hipGridDim_x (gridDim.x)
#define hipGridDim_y (gridDim.y)
#define hipGridDim_z (gridDim.z)
#define HIP_DYNAMIC_SHARED(type, var) \
  static thread_local type* const var = reinterpret_cast<type*>(::kxcpu::dyn_smem);
#define HIP_DYNAMIC_SHARED_ATTRIBUTE
#define __HIP_CLANG_ONLY__ 1
