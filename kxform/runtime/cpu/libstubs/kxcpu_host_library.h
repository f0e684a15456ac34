// Host-library stand-ins for the kxform CPU runtime (cuBLAS, cuBLASLt, cuSPARSE, cuRAND, cuFFT,
// cuSOLVER, cuDNN, NCCL): the types, status codes and common enums a file names at file scope.
//
// Files that call a library from host code and run their own kernels beside it are
// common; the runtime runs only the kernels (host functions are dropped by extraction),
// so the library itself is never needed. The directory comes after every other include
// path of the host build and, as -idirafter, of the nvcc device check, so a toolkit that
// has the real header keeps it. Calls are not declared: a kernel that really uses a
// library fails to compile, naming the function.
#pragma once

#include <cuda_runtime.h>

#define KXCPU_OPAQUE(handle, tag) struct tag; typedef tag* handle;

// cuBLAS
KXCPU_OPAQUE(cublasHandle_t, cublasContext)
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1, CUBLAS_STATUS_ALLOC_FAILED = 3,
                      CUBLAS_STATUS_INVALID_VALUE = 7, CUBLAS_STATUS_ARCH_MISMATCH = 8,
                      CUBLAS_STATUS_MAPPING_ERROR = 11, CUBLAS_STATUS_EXECUTION_FAILED = 13,
                      CUBLAS_STATUS_INTERNAL_ERROR = 14, CUBLAS_STATUS_NOT_SUPPORTED = 15 };
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };
enum cublasFillMode_t { CUBLAS_FILL_MODE_LOWER = 0, CUBLAS_FILL_MODE_UPPER = 1, CUBLAS_FILL_MODE_FULL = 2 };
enum cublasDiagType_t { CUBLAS_DIAG_NON_UNIT = 0, CUBLAS_DIAG_UNIT = 1 };
enum cublasSideMode_t { CUBLAS_SIDE_LEFT = 0, CUBLAS_SIDE_RIGHT = 1 };
enum cublasPointerMode_t { CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_POINTER_MODE_DEVICE = 1 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TENSOR_OP_MATH = 1, CUBLAS_PEDANTIC_MATH = 2,
                    CUBLAS_TF32_TENSOR_OP_MATH = 3 };

// cuSPARSE
KXCPU_OPAQUE(cusparseHandle_t, cusparseContext)
KXCPU_OPAQUE(cusparseMatDescr_t, cusparseMatDescr)
KXCPU_OPAQUE(cusparseSpMatDescr_t, cusparseSpMatDescr)
KXCPU_OPAQUE(cusparseDnVecDescr_t, cusparseDnVecDescr)
KXCPU_OPAQUE(cusparseDnMatDescr_t, cusparseDnMatDescr)
enum cusparseStatus_t { CUSPARSE_STATUS_SUCCESS = 0, CUSPARSE_STATUS_NOT_INITIALIZED = 1,
                        CUSPARSE_STATUS_ALLOC_FAILED = 2, CUSPARSE_STATUS_INVALID_VALUE = 3,
                        CUSPARSE_STATUS_EXECUTION_FAILED = 6, CUSPARSE_STATUS_INTERNAL_ERROR = 7,
                        CUSPARSE_STATUS_NOT_SUPPORTED = 10 };
enum cusparseOperation_t { CUSPARSE_OPERATION_NON_TRANSPOSE = 0, CUSPARSE_OPERATION_TRANSPOSE = 1,
                           CUSPARSE_OPERATION_CONJUGATE_TRANSPOSE = 2 };
enum cusparseIndexBase_t { CUSPARSE_INDEX_BASE_ZERO = 0, CUSPARSE_INDEX_BASE_ONE = 1 };
enum cusparseMatrixType_t { CUSPARSE_MATRIX_TYPE_GENERAL = 0, CUSPARSE_MATRIX_TYPE_SYMMETRIC = 1 };

// cuRAND (host API; the device API <curand_kernel.h> is not emulated)
KXCPU_OPAQUE(curandGenerator_t, curandGenerator_st)
enum curandStatus_t { CURAND_STATUS_SUCCESS = 0, CURAND_STATUS_NOT_INITIALIZED = 101,
                      CURAND_STATUS_ALLOCATION_FAILED = 102, CURAND_STATUS_TYPE_ERROR = 103,
                      CURAND_STATUS_LAUNCH_FAILURE = 201, CURAND_STATUS_INTERNAL_ERROR = 999 };
typedef curandStatus_t curandStatus;
enum curandRngType_t { CURAND_RNG_PSEUDO_DEFAULT = 100, CURAND_RNG_PSEUDO_XORWOW = 101,
                       CURAND_RNG_PSEUDO_MRG32K3A = 121, CURAND_RNG_PSEUDO_MTGP32 = 141,
                       CURAND_RNG_PSEUDO_PHILOX4_32_10 = 161, CURAND_RNG_QUASI_DEFAULT = 200 };

// cuFFT
typedef int cufftHandle;
enum cufftResult { CUFFT_SUCCESS = 0, CUFFT_INVALID_PLAN = 1, CUFFT_ALLOC_FAILED = 2,
                   CUFFT_INVALID_VALUE = 4, CUFFT_EXEC_FAILED = 6, CUFFT_NOT_SUPPORTED = 16 };
enum cufftType { CUFFT_R2C = 0x2a, CUFFT_C2R = 0x2c, CUFFT_C2C = 0x29, CUFFT_D2Z = 0x6a, CUFFT_Z2D = 0x6c,
                 CUFFT_Z2Z = 0x69 };
#define CUFFT_FORWARD -1
#define CUFFT_INVERSE 1

// cuSOLVER (dense)
KXCPU_OPAQUE(cusolverDnHandle_t, cusolverDnContext)
enum cusolverStatus_t { CUSOLVER_STATUS_SUCCESS = 0, CUSOLVER_STATUS_NOT_INITIALIZED = 1,
                        CUSOLVER_STATUS_INVALID_VALUE = 3, CUSOLVER_STATUS_EXECUTION_FAILED = 6,
                        CUSOLVER_STATUS_INTERNAL_ERROR = 7, CUSOLVER_STATUS_NOT_SUPPORTED = 9 };

// cuBLASLt
KXCPU_OPAQUE(cublasLtHandle_t, cublasLtContext)
KXCPU_OPAQUE(cublasLtMatmulDesc_t, cublasLtMatmulDescOpaque_t)
KXCPU_OPAQUE(cublasLtMatrixLayout_t, cublasLtMatrixLayoutOpaque_t)
KXCPU_OPAQUE(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceOpaque_t)
struct cublasLtMatmulAlgo_t { unsigned long long data[8]; };
struct cublasLtMatmulHeuristicResult_t { cublasLtMatmulAlgo_t algo; size_t workspaceSize; cublasStatus_t state;
                                         float wavesCount; int reserved[4]; };
enum cublasComputeType_t { CUBLAS_COMPUTE_16F = 64, CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_16F = 74,
                           CUBLAS_COMPUTE_32F_FAST_16BF = 75, CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
                           CUBLAS_COMPUTE_64F = 70 };
enum cublasLtEpilogue_t { CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_RELU = 2, CUBLASLT_EPILOGUE_BIAS = 4,
                          CUBLASLT_EPILOGUE_GELU = 32, CUBLASLT_EPILOGUE_GELU_BIAS = 36 };

// cuDNN
KXCPU_OPAQUE(cudnnHandle_t, cudnnContext)
KXCPU_OPAQUE(cudnnTensorDescriptor_t, cudnnTensorStruct)
KXCPU_OPAQUE(cudnnFilterDescriptor_t, cudnnFilterStruct)
KXCPU_OPAQUE(cudnnConvolutionDescriptor_t, cudnnConvolutionStruct)
enum cudnnStatus_t { CUDNN_STATUS_SUCCESS = 0, CUDNN_STATUS_NOT_INITIALIZED = 1001, CUDNN_STATUS_BAD_PARAM = 2000,
                     CUDNN_STATUS_NOT_SUPPORTED = 3000, CUDNN_STATUS_INTERNAL_ERROR = 4000,
                     CUDNN_STATUS_EXECUTION_FAILED = 5000 };
enum cudnnDataType_t { CUDNN_DATA_FLOAT = 0, CUDNN_DATA_DOUBLE = 1, CUDNN_DATA_HALF = 2, CUDNN_DATA_INT8 = 3,
                       CUDNN_DATA_INT32 = 4, CUDNN_DATA_BFLOAT16 = 9 };
enum cudnnTensorFormat_t { CUDNN_TENSOR_NCHW = 0, CUDNN_TENSOR_NHWC = 1 };

// NCCL
KXCPU_OPAQUE(ncclComm_t, ncclComm)
struct ncclUniqueId { char internal[128]; };
enum ncclResult_t { ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclSystemError = 2, ncclInternalError = 3,
                    ncclInvalidArgument = 4, ncclInvalidUsage = 5, ncclRemoteError = 6, ncclInProgress = 7 };
enum ncclDataType_t { ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclUint32 = 3, ncclInt64 = 4, ncclUint64 = 5,
                      ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9 };
enum ncclRedOp_t { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 };

#undef KXCPU_OPAQUE
