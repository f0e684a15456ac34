// Shadow of hip/hip_fp16.h for the kxform CPU runtime.
#pragma once
#include "hip_runtime.h"
#include "../kxcpu/half.h"
