/* The planner's view of a model (see model_plan.h). */
#include "model_plan.h"

#include <string.h>

#include "wan_weights.h"

void rank_model_plan_sizes(const rank_model *m, int compute_dtype_bytes, int fp8,
                           uint64_t *block_bytes, plan_model *pm) {
  const rank_model_info *in = rank_model_get_info(m);
  const wan_config *c = &in->config;
  /* Sizes once loaded: the file's bytes scaled to the compute width, times
   * the experts a stage holds (both experts' copies of each of its groups). */
  double scale = (double)compute_dtype_bytes / (double)kern_dtype_size(in->id.dtype) *
                 (double)in->experts.count;
  /* A block: its parameters at the compute width, or in fp8 on the GPU
   * the bytes of an fp8 file's block (e4m3 linear weights and their
   * scales, the rest bf16). */
  const uint64_t block = fp8 && compute_dtype_bytes == 2
                             ? wan_block_fp8_bytes(c)
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
}
