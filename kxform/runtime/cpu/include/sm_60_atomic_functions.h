// Shadow of the CUDA header for the kxform CPU runtime: everything lives in kxcpu/device.h.
#pragma once
#include "kxcpu/device.h"
