/* commcheck's device memory (commcheck.h): buffers on one CUDA device and a
 * stream of its own, which the transports order their transfers against. */
#include <stdio.h>

#include "commcheck.h"
#include "cuda_comm.h"

static int g_device = -1;
static char g_name[32];

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
  return p;
}

static void dev_release(void *p) {
  if (p) CUDA_CHECK(cudaFree(p));
}

static void dev_put(void *dst, const void *src, size_t n, void *stream) {
  CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, (cudaStream_t)stream));
  CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)stream));
}

static void dev_get(void *dst, const void *src, size_t n, void *stream) {
  CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, (cudaStream_t)stream));
  CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)stream));
}

int commcheck_mem_cuda(int idx, commcheck_mem *out) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || idx < 0 || idx >= n) {
    sp_log_error("commcheck --device cuda: device %d is not one of the %d visible", idx, n);
    return SP_ERR_INPUT;
  }
  CUDA_CHECK(cudaSetDevice(idx));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  g_device = idx;
  snprintf(g_name, sizeof g_name, "cuda:%d", idx);
  commcheck_mem m = {g_name, dev_alloc, dev_release, dev_put, dev_get, (void *)s};
  *out = m;
  return SP_OK;
}

void commcheck_mem_cuda_close(commcheck_mem *m) {
  if (!m || !m->stream || g_device < 0) return;
  CUDA_CHECK(cudaStreamDestroy((cudaStream_t)m->stream));
  m->stream = NULL;
}
