/* What the CUDA transports share (nccl_transport.c, staged.c): the CUDA
 * runtime check and the polling nap. comm sits below kernels/, so this is
 * not kernels/cuda_check.h; the failure goes to the same fatal reporter. */
#ifndef COMM_CUDA_COMM_H
#define COMM_CUDA_COMM_H

#include <cuda_runtime.h>
#include <time.h>

#include "log.h"

#define CUDA_CHECK(call)                                                        \
  do {                                                                          \
    cudaError_t cuda_rc_ = (call);                                              \
    if (cuda_rc_ != cudaSuccess)                                                \
      sp_fatal_at(__FILE__, __LINE__, #call, "cuda error: %s",                  \
                  cudaGetErrorString(cuda_rc_));                                \
  } while (0)

/* A short sleep between polls of a transfer (50 us). */
static inline void comm_cuda_nap(void) {
  struct timespec ts = {0, 50000};
  nanosleep(&ts, NULL);
}

#endif
