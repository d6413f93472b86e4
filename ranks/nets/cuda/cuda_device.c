/* The CUDA runtime of the registry (net.h net_runtime): the devices a rank
 * sees, their inventory for the planner, and the pinned host buffers the
 * backends and the pipeline copy to and from. CUDA builds only. */
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "log.h"
#include "net.h"
#include "plan.h"

static int device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

static int describe(int idx, plan_device *out) {
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

static int identity(int idx, char *out, size_t size) {
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, idx) != cudaSuccess) {
    sp_log_error("cuda:%d: cannot query the device's UUID: %s", idx,
                 cudaGetErrorString(cudaGetLastError()));
    return SP_ERR_RUNTIME;
  }
  const unsigned char *u = (const unsigned char *)prop.uuid.bytes;
  char id[64];
  int n = snprintf(id, sizeof id, "GPU-");
  for (int i = 0; i < 16; i++)
    n += snprintf(id + n, sizeof id - (size_t)n, "%s%02x",
                  i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", u[i]);
  if ((size_t)n >= size) {
    sp_log_error("internal: cuda:%d: its UUID needs %d bytes, %zu given", idx, n + 1, size);
    return SP_ERR_RUNTIME;
  }
  memcpy(out, id, (size_t)n + 1);
  return SP_OK;
}

static int64_t free_bytes(void) {
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return (int64_t)free_b;
}

static void *host_alloc(size_t bytes) {
  void *p = NULL;
  CUDA_CHECK(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault));
  return p;
}

static void host_free(void *p) { CUDA_CHECK(cudaFreeHost(p)); }

/* A version number of the form major*1000 + minor*10 (CUDA) as "M.m". */
static void cuda_ver(int v, char *buf, size_t n) {
  snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
}

static void versions(char *buf, size_t n) {
  int rt = 0, drv = 0, nccl = 0;
  char rts[16] = "?", drvs[16] = "?";
  if (cudaRuntimeGetVersion(&rt) == cudaSuccess) cuda_ver(rt, rts, sizeof rts);
  if (cudaDriverGetVersion(&drv) == cudaSuccess && drv > 0) cuda_ver(drv, drvs, sizeof drvs);
  else snprintf(drvs, sizeof drvs, "none");
  size_t dnn = cudnnGetVersion(); /* major*10000 + minor*100 + patch (cuDNN 9) */
  char nccls[32] = "?";
  if (ncclGetVersion(&nccl) == ncclSuccess)
    snprintf(nccls, sizeof nccls, "%d.%d.%d", nccl / 10000, (nccl % 10000) / 100, nccl % 100);
  snprintf(buf, n, "CUDA runtime %s, driver %s, cuDNN %zu.%zu.%zu (built with %d.%d.%d), NCCL %s",
           rts, drvs, dnn / 10000, (dnn % 10000) / 100, dnn % 100, CUDNN_MAJOR, CUDNN_MINOR,
           CUDNN_PATCHLEVEL, nccls);
}

const net_runtime net_cuda_runtime = {RANK_DEVICE_CUDA, device_count, versions, describe,
                                      identity, free_bytes, host_alloc, host_free};
