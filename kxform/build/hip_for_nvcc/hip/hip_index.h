// HIP's index built-ins spelled as CUDA's. Included by the HIP-in-CUDA headers (nvcc) and
// by kxform's libclang prelude (kxform/frontend/prelude), so both read HIP's block and
// thread indices the same way; macros only, so it needs nothing declared before it.
#pragma once
#define hipThreadIdx_x threadIdx.x
#define hipThreadIdx_y threadIdx.y
#define hipThreadIdx_z threadIdx.z
#define hipBlockIdx_x blockIdx.x
#define hipBlockIdx_y blockIdx.y
#define hipBlockIdx_z blockIdx.z
#define hipBlockDim_x blockDim.x
#define hipBlockDim_y blockDim.y
#define hipBlockDim_z blockDim.z
#define hipGridDim_x gridDim.x
#define hipGridDim_y gridDim.y
#define hipGridDim_z gridDim.z
