/* Check macros for the CUDA libraries (STYLE.md 1): a failed call goes to
 * the one fatal reporter, sp_fatal_at (comm/log.h), with the call's text,
 * file:line and the library's own error string; it never returns.
 * Usable from C and from .cu files. */
#ifndef CUDA_CHECK_H
#define CUDA_CHECK_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#ifdef __cplusplus
/* log.h is C11 (_Noreturn is not C++); give C++ the same meaning. */
#define _Noreturn [[noreturn]]
extern "C" {
#include "log.h"
}
#undef _Noreturn
#else
#include "log.h"
#endif

#define CUDA_CHECK(call)                                                         \
  do {                                                                           \
    cudaError_t sp_e_ = (call);                                                  \
    if (sp_e_ != cudaSuccess)                                                    \
      sp_fatal_at(__FILE__, __LINE__, #call, "cuda error %d: %s", (int)sp_e_,    \
                  cudaGetErrorString(sp_e_));                                    \
  } while (0)

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

/* End of every launcher: a bad launch configuration is reported here, at
 * the launch, not at some later synchronisation. */
#define CUDA_LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

#endif
