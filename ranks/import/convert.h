/* Import of Wan 2.1 T2V safetensors checkpoints into a staticpipe model
 * file: key-style detection, name mapping, config inference from shapes,
 * a cross-check of every tensor, and the streaming copy (one tensor at a
 * time through a bounded buffer; never the whole checkpoint in memory).
 * MODEL.md "Parameter names" is the source of the mapping. */
#ifndef RANK_CONVERT_H
#define RANK_CONVERT_H

#include <stddef.h>

#include "kern_dtype.h"
#include "wan_config.h"

typedef enum {
  RANK_CONVERT_OFFICIAL = 0, /* the published Wan 2.1 keys */
  RANK_CONVERT_DIFFUSERS = 1, /* diffusers' WanTransformer3DModel keys */
  RANK_CONVERT_COMFY = 2,     /* official keys prefixed "model.diffusion_model." */
} rank_convert_style;

#define RANK_CONVERT_COMFY_PREFIX "model.diffusion_model."

/* Maps a checkpoint key of a style to its tensor of the table (group, block
 * for WAN_GROUP_BLOCK, official name without "blocks.N."). Returns 0, or -1
 * when the key is no tensor of a Wan 2.1 T2V model. The name points into
 * the static table (valid forever). */
int rank_convert_map_key(rank_convert_style s, const char *key, wan_group *g, int *block,
                         const char **name);
/* The packed layout table of group g, for its tensors' names only: every
 * valid config gives the same names (shapes and offsets are those of a
 * tiny preset). Made at the first call, then shared (never freed). */
const wan_layout *rank_convert_name_layout(wan_group g);

/* Converts the checkpoint given as inputs (safetensors files, directories
 * of them, or a *.safetensors.index.json) into out_path, stored in dtype.
 * Every problem with the input is logged (each missing, extra, duplicated
 * or mis-shaped tensor by name) before it returns SP_ERR_INPUT; I/O
 * failures return SP_ERR_RUNTIME. No file is left at out_path on failure.
 * Progress (bytes, rate) goes to the log when progress is set. */
int rank_convert_run(int ninputs, char *const *inputs, const char *out_path, kern_dtype dtype,
                     int progress);
/* A two-expert model (Wan 2.2 A14B, MODEL.md "Model file"): paths[0] the
 * high-noise expert's checkpoint, paths[1] the low-noise one's (each a
 * file, a directory or an index, as above), both checked in full and of
 * one config, written with the published defaults as root attributes.
 * Statuses as rank_convert_run. */
int rank_convert_experts_run(char *const paths[2], const char *out_path, kern_dtype dtype,
                             int progress);

#endif
