/* The CUDA text encoder's device layout (umt5_gpu.h), in both builds. */
#include "umt5_gpu.h"

#include <stdlib.h>

#include "log.h"
#include "plan.h"

void umt5_gpu_shape(const umt5_config *c, int64_t max_len, plan_t5_shape *out) {
  *out = (plan_t5_shape){.dim = c->dim,
                         .dim_attn = c->dim_attn,
                         .ffn = c->ffn,
                         .layers = c->layers,
                         .max_len = max_len,
                         .layer_bytes = (uint64_t)umt5_layer_floats(c) * 2};
}

int umt5_gpu_layout(const umt5_config *c, int64_t max_len, plan_t5_layout *out) {
  if (max_len < 1 || max_len > PLAN_T5_MAX_LEN || c->dim_attn / c->heads > UMT5_GPU_MAX_HEAD) {
    sp_log_error("text encoder: %lld tokens or head width %lld is beyond the CUDA encoder's "
                 "1..%d tokens and %d",
                 (long long)max_len, (long long)(c->dim_attn / c->heads), PLAN_T5_MAX_LEN,
                 UMT5_GPU_MAX_HEAD);
    return SP_ERR_INPUT;
  }
  plan_t5_shape s;
  umt5_gpu_shape(c, max_len, &s);
  char err[200];
  if (plan_t5_layout_make(&s, out, err, sizeof err) != PLAN_OK) {
    sp_log_error("text encoder: %s", err);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

uint64_t umt5_gpu_bytes(const umt5_config *c, int64_t max_len) {
  plan_t5_layout *l = malloc(sizeof *l);
  if (!l) return 0;
  const uint64_t n = umt5_gpu_layout(c, max_len, l) == SP_OK ? l->total : 0;
  free(l);
  return n;
}
