// Shadow of the CUDA header for the kxform CPU runtime: __half and __half2 (kxcpu/half.h).
#pragma once
#include "kxcpu/device.h"
#include "kxcpu/half.h"
