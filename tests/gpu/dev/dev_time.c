/* Timing a GPU call between CUDA events (dev_time.h). */
#include "dev_time.h"

#include "cuda_check.h"

double dev_time_ms(void (*call)(void *arg), void *arg, int warm, int iters, cudaStream_t stream) {
  for (int i = 0; i < warm; i++) call(arg);
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  CUDA_CHECK(cudaEventRecord(e0, stream));
  for (int i = 0; i < iters; i++) call(arg);
  CUDA_CHECK(cudaEventRecord(e1, stream));
  CUDA_CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  return ms / iters;
}
