/* Stand-ins for stage/cuda/cuda_device.c in a build without the CUDA
 * backend: no devices, plain host buffers. */
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "stage_impl.h"

void *rank_stage_host_alloc(const rank_stage_cfg *cfg, size_t bytes) { return sp_xmalloc(bytes); }
void rank_stage_host_free(const rank_stage_cfg *cfg, void *p) { free(p); }

int rank_cuda_available(void) { return 0; }
void rank_cuda_versions(char *buf, size_t n) { snprintf(buf, n, "none (built without CUDA)"); }
int rank_cuda_device_count(void) { return 0; }
int rank_cuda_describe(int idx, plan_device *out) {
  sp_log_error("cuda:%d: this build has no CUDA backend", idx);
  return SP_ERR_RUNTIME;
}

int rank_cuda_identity(int idx, char *out, size_t size) {
  sp_log_error("cuda:%d: this build has no CUDA backend", idx);
  return SP_ERR_RUNTIME;
}

int rank_stage_cuda_load(rank_model *m, rank_stage *s, uint64_t *bytes_read) {
  sp_log_error("--device cuda: this build has no CUDA backend");
  return SP_ERR_INPUT;
}
