/* The CUDA devices a rank sees, their inventory for the planner, and the
 * pinned host buffers stages and the pipeline copy to and from (stage.h);
 * the fallbacks of a build without the CUDA backend. */
#include "stage.h"

#ifdef STATICPIPE_HAVE_CUDA

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "log.h"

int rank_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

int rank_cuda_describe(int idx, plan_device *out) {
  struct cudaDeviceProp prop;
  size_t free_b = 0, total_b = 0;
  if (cudaGetDeviceProperties(&prop, idx) != cudaSuccess || cudaSetDevice(idx) != cudaSuccess ||
      cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    sp_log_error("cuda:%d: cannot query the device: %s", idx,
                 cudaGetErrorString(cudaGetLastError()));
    return SP_ERR_RUNTIME;
  }
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%.63s", prop.name);
  out->total_bytes = total_b;
  out->free_bytes = free_b;
  out->sm_count = prop.multiProcessorCount;
  out->cc_major = prop.major;
  out->cc_minor = prop.minor;
  cudaDeviceGetPCIBusId(out->pci_bus_id, (int)sizeof out->pci_bus_id, idx);
  out->speed = 1.0;
  return SP_OK;
}

int rank_cuda_available(void) { return rank_cuda_device_count() > 0; }

void *rank_stage_host_alloc(const rank_stage_cfg *cfg, size_t bytes) {
  if (cfg->device != RANK_DEVICE_CUDA) return sp_xmalloc(bytes);
  void *p = NULL;
  CUDA_CHECK(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault));
  return p;
}

void rank_stage_host_free(const rank_stage_cfg *cfg, void *p) {
  if (!p) return;
  if (cfg->device != RANK_DEVICE_CUDA)
    free(p);
  else
    CUDA_CHECK(cudaFreeHost(p));
}

#else /* no CUDA backend in this build */

#include <stdlib.h>

#include "log.h"

void *rank_stage_host_alloc(const rank_stage_cfg *cfg, size_t bytes) { return sp_xmalloc(bytes); }
void rank_stage_host_free(const rank_stage_cfg *cfg, void *p) { free(p); }

int rank_cuda_available(void) { return 0; }
int rank_cuda_device_count(void) { return 0; }
int rank_cuda_describe(int idx, plan_device *out) {
  sp_log_error("cuda:%d: this build has no CUDA backend", idx);
  return SP_ERR_RUNTIME;
}

#endif
