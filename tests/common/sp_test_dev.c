/* Guarded device buffers for the GPU tests (sp_test_dev.h). */
#include "sp_test_dev.h"

#include <stdio.h>
#include <stdlib.h>

#define SP_TEST_CUDA
#include "sp_test.h"

static struct {
  char *p;
  size_t bytes;
} bufs[SP_DEV_MAX_BUFS];
static int nbufs;

void *sp_dev(size_t bytes) {
  if (nbufs == SP_DEV_MAX_BUFS) {
    fprintf(stderr, "FAIL: more than %d device buffers in one case\n", SP_DEV_MAX_BUFS);
    exit(1);
  }
  char *p;
  CHECK_CUDA(cudaMalloc((void **)&p, bytes + SP_DEV_GUARD));
  CHECK_CUDA(cudaMemset(p, 0xFF, bytes));
  CHECK_CUDA(cudaMemset(p + bytes, SP_DEV_GUARD_BYTE, SP_DEV_GUARD));
  bufs[nbufs].p = p;
  bufs[nbufs].bytes = bytes;
  nbufs++;
  return p;
}

int sp_dev_release(void) {
  int ok = 1;
  unsigned char g[SP_DEV_GUARD];
  CHECK_CUDA(cudaDeviceSynchronize());
  for (int i = 0; i < nbufs; i++) {
    CHECK_CUDA(cudaMemcpy(g, bufs[i].p + bufs[i].bytes, SP_DEV_GUARD, cudaMemcpyDeviceToHost));
    for (int j = 0; j < SP_DEV_GUARD; j++)
      if (g[j] != SP_DEV_GUARD_BYTE) ok = 0;
    CHECK_CUDA(cudaFree(bufs[i].p));
  }
  nbufs = 0;
  return ok;
}

void sp_up(void *d, const void *h, size_t bytes) {
  CHECK_CUDA(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
}

void sp_down(void *h, const void *d, size_t bytes) {
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}
