/* What the CUDA transports share (nccl_transport.c, staged.c): the CUDA
 * runtime's check (cuda_check.h, the log library's, as every folder uses)
 * and the polling nap. */
#ifndef COMM_CUDA_COMM_H
#define COMM_CUDA_COMM_H

#include <cuda_runtime.h>
#include <time.h>

#include "cuda_check.h"
#include "log.h"

/* A short sleep between polls of a transfer (50 us). */
static inline void comm_cuda_nap(void) {
  struct timespec ts = {0, 50000};
  nanosleep(&ts, NULL);
}

#endif
