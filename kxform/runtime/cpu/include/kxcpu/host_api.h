// Host-side CUDA runtime types for the kxform CPU runtime.
//
// The runtime launches kernels itself; host code of the source (main, the launcher) is
// dropped by extraction or never called. What stays is what sits at file scope: a
// `cudaDeviceProp prop;`, a `cudaStream_t` or `cudaError_t` global, a prototype that names
// them, a `cudaGetDeviceProperties` call in a helper. These declarations let such text
// compile; the functions report `cudaErrorNotSupported` and never touch a device.
#pragma once

#include <cstddef>
#include <cstring>

enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2,
                   cudaErrorNotSupported = 801, cudaErrorUnknown = 999 };
typedef cudaError_t cudaError;
enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2,
                      cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4 };
struct CUstream_st;
struct CUevent_st;
typedef CUstream_st* cudaStream_t;
typedef CUevent_st* cudaEvent_t;

struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem, sharedMemPerBlock, sharedMemPerMultiprocessor, sharedMemPerBlockOptin;
    size_t totalConstMem, memPitch, textureAlignment;
    int regsPerBlock, regsPerMultiprocessor, warpSize, maxThreadsPerBlock, maxThreadsPerMultiProcessor;
    int maxBlocksPerMultiProcessor, maxThreadsDim[3], maxGridSize[3], clockRate, major, minor;
    int multiProcessorCount, memoryClockRate, memoryBusWidth, l2CacheSize, persistingL2CacheMaxSize;
    int concurrentKernels, ECCEnabled, integrated, canMapHostMemory, computeMode, asyncEngineCount;
    int unifiedAddressing, managedMemory, cooperativeLaunch, pciBusID, pciDeviceID, pciDomainID;
};

inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int) {
    if (prop != nullptr) std::memset(prop, 0, sizeof *prop);
    return cudaErrorNotSupported;
}
inline cudaError_t cudaGetDeviceCount(int* count) {
    if (count != nullptr) *count = 0;
    return cudaErrorNotSupported;
}
inline cudaError_t cudaSetDevice(int) { return cudaErrorNotSupported; }
inline cudaError_t cudaGetDevice(int* device) {
    if (device != nullptr) *device = 0;
    return cudaErrorNotSupported;
}
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaPeekAtLastError() { return cudaSuccess; }
inline const char* cudaGetErrorString(cudaError_t) { return "not supported by the kxform CPU runtime"; }
inline const char* cudaGetErrorName(cudaError_t) { return "cudaErrorNotSupported"; }
