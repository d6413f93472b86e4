/* Internals the model file's reader (model_file.c), presets and paths
 * (model_presets.c), progress line (model_progress.c) and writer
 * (model_writer.c) share. */
#ifndef RANK_MODEL_FILE_IMPL_H
#define RANK_MODEL_FILE_IMPL_H

#include "model_file.h"

/* Group instances of a model: embed, every block, head. */
static inline int rank_model_instances(const wan_config *c) { return (int)c->layers + 2; }
/* Index of a group instance: embed 0, block b at 1 + b, head last. */
static inline int rank_model_instance(const wan_config *c, wan_group g, int block) {
  return g == WAN_GROUP_EMBED ? 0 : g == WAN_GROUP_BLOCK ? 1 + block : (int)c->layers + 1;
}

/* Slot of tensor i of a group instance of expert e in per-tensor arrays. */
static inline size_t rank_model_slot(const wan_config *c, int e, wan_group g, int block, int i) {
  return ((size_t)e * (size_t)rank_model_instances(c) + (size_t)rank_model_instance(c, g, block)) *
             WAN_MAX_TENSORS +
         (size_t)i;
}

/* model_presets.c: the preset name of a config with its expert count, or
 * NULL. */
const char *rank_model_preset_match(const wan_config *c, int experts);

/* model_progress.c: a group of bytes has been read; the line is redrawn at
 * most ten times a second. */
void rank_model_progress_add(uint64_t bytes);

#endif
