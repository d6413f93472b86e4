/* Internals the DiT model file's reader (model_file.c), presets and paths
 * (model_presets.c) and writer (model_writer.c) share. */
#ifndef RANK_MODEL_FILE_IMPL_H
#define RANK_MODEL_FILE_IMPL_H

#include "model_file.h"
#include "wan_schema.h"

/* model_presets.c: the file config of a config and its experts (x NULL:
 * one), and back. */
void rank_model_file_config(const wan_config *c, const rank_model_experts *x, wan_file_config *f);
void rank_model_experts_of(const wan_file_config *f, rank_model_experts *x);

#endif
