/* Internals the model file's reader (model_file.c) and writer
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

#endif
