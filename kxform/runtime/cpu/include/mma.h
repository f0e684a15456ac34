// Shadow of CUDA's mma.h for the kxform CPU runtime. Tensor-core fragments are not
// emulated: the runtime refuses kernels that use nvcuda::wmma before compiling them,
// so including this header alone is harmless.
#pragma once
#include "kxcpu/device.h"
namespace nvcuda {
namespace wmma {}
}  // namespace nvcuda
