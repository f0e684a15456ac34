// Shadow of the CUDA header for the kxform CPU runtime: __nv_bfloat16 and pairs (kxcpu/half.h).
#pragma once
#include "kxcpu/device.h"
#include "kxcpu/half.h"
