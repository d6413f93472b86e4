/* The planner's view of a model (see model_plan.h). */
#include "model_plan.h"

#include <string.h>

#include "wan_weights.h"

void rank_model_plan_sizes(const rank_model *m, int compute_dtype_bytes, wan_precision p,
                           uint64_t *block_bytes, plan_model *pm) {
  const rank_model_info *in = rank_model_get_info(m);
  const wan_config *c = &in->config;
  const int gpu = compute_dtype_bytes == 2;
  /* Sizes once loaded: the file's bytes scaled to the compute width, times
   * the experts a stage holds (both experts' copies of each of its groups). */
  double scale = (double)compute_dtype_bytes / (double)kern_dtype_size(in->id.dtype) *
                 (double)in->experts.count;
  /* A block: its parameters at the compute width (the CPU widens every
   * format to fp32), or on the GPU the largest block in the formats a CUDA
   * stage keeps it in (rank_model_device_block_bytes: stored quantized
   * weights as they are, the rest bf16), every block counted at that. */
  const uint64_t block = gpu ? rank_model_device_block_bytes(m, p)
                             : (uint64_t)wan_block_params(c) * (uint64_t)compute_dtype_bytes;
  memset(pm, 0, sizeof *pm);
  for (int64_t b = 0; b < c->layers; b++)
    block_bytes[b] = block * (uint64_t)in->experts.count;
  pm->num_blocks = (int)c->layers;
  pm->block_bytes = block_bytes;
  pm->embed_bytes = (uint64_t)((double)rank_model_layout(m, WAN_GROUP_EMBED)->data_bytes * scale);
  pm->head_bytes = (uint64_t)((double)rank_model_layout(m, WAN_GROUP_HEAD)->data_bytes * scale);
  pm->dim = c->dim;
  pm->ffn_dim = c->ffn_dim;
  pm->heads = c->heads;
  pm->head_dim = wan_head_dim(c);
  pm->text_len = c->text_len;
  pm->text_dim = c->text_dim;
  pm->freq_dim = c->freq_dim;
  pm->in_dim = c->in_dim;
  pm->out_dim = c->out_dim;
  pm->weight_dtype_bytes = compute_dtype_bytes;
  pm->experts = in->experts.count;
  pm->time_tables = wan_time_tables(c);
  if (!gpu) return;
  pm->dequant_bytes = rank_model_dequant_bytes(m, p);
  pm->w8a8 = p == WAN_PRECISION_FP8 ? PLAN_W8A8_FP8 : p == WAN_PRECISION_INT8 ? PLAN_W8A8_INT8
                                                                                : PLAN_W8A8_NONE;
  /* the epilogue's scratch: int8 always; fp8 unless every GPU is sm_90
   * (the caller, which knows the GPUs, may clear it: rank_model_plan_epilogue) */
  pm->w8a8_epilogue = pm->w8a8 != PLAN_W8A8_NONE;
}

void rank_model_plan_epilogue(plan_model *pm, const plan_device *devs, int n) {
  int all90 = n > 0;
  for (int i = 0; i < n; i++) all90 &= devs[i].cc_major == 9 && devs[i].cc_minor == 0;
  pm->w8a8_epilogue = pm->w8a8 == PLAN_W8A8_INT8 || (pm->w8a8 == PLAN_W8A8_FP8 && !all90);
}
