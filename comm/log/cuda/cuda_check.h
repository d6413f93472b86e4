/* The CUDA runtime's check macros (STYLE.md 1), for every folder: a failed
 * call goes to the one fatal reporter, sp_fatal_at (log.h), with the call's
 * text, file:line and CUDA's own error string; it never returns. Usable
 * from C and from .cu files. The checks of cuBLASLt and cuDNN are
 * kernels/cuda/lib_check.cuh; NCCL_CHECK is in comm/cuda/nccl_transport.c. */
#ifndef SP_CUDA_CHECK_H
#define SP_CUDA_CHECK_H

#include <cuda_runtime_api.h>

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

/* The one shape of the CUDA-side library checks (CUDA_CHECK here,
 * CUBLAS_CHECK and CUDNN_CHECK in lib_check.cuh): `call` returns a `type`;
 * anything but `ok` goes to sp_fatal_at with `text` (the call as written)
 * and the message fmt, ... (which may name the status as sp_status_). */
#define SP_CUDA_STATUS_CHECK(type, ok, text, call, ...)                          \
  do {                                                                           \
    type sp_status_ = (call);                                                    \
    if (sp_status_ != (ok)) sp_fatal_at(__FILE__, __LINE__, text, __VA_ARGS__);  \
  } while (0)

#define CUDA_CHECK(call)                                                         \
  SP_CUDA_STATUS_CHECK(cudaError_t, cudaSuccess, #call, call, "cuda error %d: %s", \
                       (int)sp_status_, cudaGetErrorString(sp_status_))

/* End of every launcher: a bad launch configuration is reported here, at
 * the launch, not at some later synchronisation. */
#define CUDA_LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

#endif
