/* The checks of cuBLASLt and cuDNN calls (STYLE.md 1), for the .cu files
 * that use them: the failed call, its status and the library's own text go
 * to the one fatal reporter, sp_fatal_at; they never return. (CUDA_CHECK,
 * for the runtime, is comm/log/cuda/cuda_check.h.) */
#ifndef SP_LIB_CHECK_CUH
#define SP_LIB_CHECK_CUH

#include <cublasLt.h>
#include <cudnn.h>

#include "cuda_check.h"

#define CUBLAS_CHECK(call)                                                       \
  SP_CUDA_STATUS_CHECK(cublasStatus_t, CUBLAS_STATUS_SUCCESS, #call, call,       \
                       "cublas error %s: %s", cublasLtGetStatusName(sp_status_),  \
                       cublasLtGetStatusString(sp_status_))

#define CUDNN_CHECK(call)                                                        \
  SP_CUDA_STATUS_CHECK(cudnnStatus_t, CUDNN_STATUS_SUCCESS, #call, call,         \
                       "cudnn error %d: %s", (int)sp_status_,                     \
                       cudnnGetErrorString(sp_status_))

#endif
