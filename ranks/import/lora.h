/* LoRA files (safetensors) merged into a model's weights as its groups are
 * read (MODEL.md "LoRA": key styles, scale, merge arithmetic).
 *
 * A LoRA is opened and checked against the model on every rank before any
 * weight is loaded: keys, shapes, ranks, dtypes, from the header alone.
 * Values are read later, group by group, by rank_lora_merge_group, which
 * rank_model_read_group calls for every group it reads (rank_model_set_merge):
 * a rank reads only the LoRA tensors of the groups it loads, and streamed
 * and resident blocks, the CPU and the CUDA stage all see merged weights.
 *
 * Key styles, told apart per key (any mix in one file):
 *   prefix: none, "diffusion_model.", "model.diffusion_model.",
 *           "transformer.", "base_model.model.", or kohya's "lora_unet_"
 *           followed by the official name with '.' spelled '_';
 *   name:   the official Wan key or its diffusers spelling (convert.h's
 *           table, MODEL.md "Parameter names"), without .weight/.bias;
 *   suffix: .lora_down.weight / .lora_A.weight (A, [r, in...]),
 *           .lora_up.weight / .lora_B.weight (B, [out, r, 1...]),
 *           .alpha (scalar; default r), .diff (a full difference of a weight
 *           or of a tensor without suffix such as modulation), .diff_b (a
 *           full difference of a bias). */
#ifndef RANK_LORA_H
#define RANK_LORA_H

#include <stddef.h>

#include "kern_dtype.h"
#include "model_file.h"
#include "wan_config.h"

#define RANK_LORA_MAX 16        /* --lora given at most this often */
#define RANK_LORA_MAX_RANK 65536 /* bound on a LoRA's rank r */

/* Which expert of a two-expert model (Wan 2.2 A14B) a LoRA applies to. */
typedef enum {
  RANK_LORA_EXPERT_ALL = 0, /* no @: every expert */
  RANK_LORA_EXPERT_HIGH = 1, /* @high: the high-noise expert */
  RANK_LORA_EXPERT_LOW = 2,  /* @low: the low-noise expert */
} rank_lora_expert;

/* How a LoRA is applied. Only merged is built. */
typedef enum {
  RANK_LORA_MERGED = 0, /* added into the weights at load: no cost per step */
  RANK_LORA_BYPASS = 1, /* base weights kept, s B (A x) added per step: not built */
} rank_lora_mode;

/* One --lora FILE[:STRENGTH][@high|@low]. */
typedef struct rank_lora_spec {
  char path[1024];
  double strength; /* 1 unless given */
  rank_lora_expert expert;
} rank_lora_spec;

/* Parses "FILE[:STRENGTH][@high|@low]": the tag after the last '@' when it is
 * high or low, the strength after the last ':' when what follows it is a
 * number (so a path may hold ':' and '@'). The strength is a finite number
 * with |s| <= 1000. Returns SP_OK, or SP_ERR_INPUT with the reason in err
 * (not logged: the caller names the flag). */
int rank_lora_spec_parse(const char *text, rank_lora_spec *out, char *err, size_t errlen);
/* "FILE:STRENGTH[@tag]", the form the parser reads. */
void rank_lora_spec_format(const rank_lora_spec *s, char *buf, size_t n);
/* "merged" -> RANK_LORA_MERGED; "bypass" is refused (not built yet).
 * SP_OK or SP_ERR_INPUT (logged, naming --lora-mode). */
int rank_lora_mode_parse(const char *name, rank_lora_mode *out);
const char *rank_lora_mode_name(rank_lora_mode m);

typedef struct rank_lora rank_lora;

/* Opens specs[0..n) in order and checks each against the model described by
 * mi (on a one-expert model a spec with an expert tag is refused):
 * every key maps to a tensor of the model, A and B come in pairs with one
 * rank r, shapes fit the tensor they name, alpha is a scalar, dtypes are
 * F32, F16 or BF16. Reads no values. Each refused LoRA gets one line: the
 * file and the check (unmatched keys: the first few and their count; a
 * LoRA made for another architecture: says so). Returns SP_OK and *out, or
 * SP_ERR_INPUT / SP_ERR_RUNTIME with nothing left open. */
int rank_lora_open(const rank_lora_spec *specs, int n, const rank_model_info *mi,
                   rank_lora **out);
void rank_lora_close(rank_lora *l);
/* One line for the log: per file, its pairs, diffs, ranks and strength. */
void rank_lora_describe(const rank_lora *l, char *buf, size_t n);

/* The merge (a rank_model_merge_fn; ctx is the rank_lora): adds every LoRA
 * term that names a tensor of group g (block) of expert expert into data
 * (a LoRA tagged @high only into expert 0, @low only into expert 1), the
 * group packed in layout l in dtype dt. Per element, in double: acc = w, then for each
 * LoRA in order, acc += c * sum_k B[o,k] A[k,i] (k ascending, c = strength *
 * (alpha / r)) for a pair, acc += strength * d for a diff; stored as
 * float(acc), narrowed to bf16 (nearest even) for a bf16 model. Reads only
 * this group's LoRA tensors. SP_ERR_INPUT (logged, naming the file and the
 * key) for a non-finite LoRA value or merged weight; data is then partly
 * merged and must not be used. */
int rank_lora_merge_group(void *ctx, int expert, wan_group g, int block, const wan_layout *l,
                          kern_dtype dt, void *data);

#endif
