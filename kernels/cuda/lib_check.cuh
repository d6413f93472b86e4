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
  do {                                                                           \
    cublasStatus_t sp_s_ = (call);                                               \
    if (sp_s_ != CUBLAS_STATUS_SUCCESS)                                          \
      sp_fatal_at(__FILE__, __LINE__, #call, "cublas error %s: %s",              \
                  cublasLtGetStatusName(sp_s_), cublasLtGetStatusString(sp_s_)); \
  } while (0)

#define CUDNN_CHECK(call)                                                        \
  do {                                                                           \
    cudnnStatus_t sp_d_ = (call);                                                \
    if (sp_d_ != CUDNN_STATUS_SUCCESS)                                           \
      sp_fatal_at(__FILE__, __LINE__, #call, "cudnn error %d: %s", (int)sp_d_,   \
                  cudnnGetErrorString(sp_d_));                                   \
  } while (0)

#endif
