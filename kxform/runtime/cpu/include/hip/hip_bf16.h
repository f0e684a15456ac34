// Shadow of hip/hip_bf16.h for the kxform CPU runtime: HIP's names for bfloat16.
#pragma once
#include "hip_runtime.h"
#include "../kxcpu/half.h"
typedef __nv_bfloat16 __hip_bfloat16;
typedef __nv_bfloat162 __hip_bfloat162;
typedef __nv_bfloat16 hip_bfloat16;
