/* Internals of the converter shared by convert.c (mapping, cross-check,
 * copy) and convert_inputs.c (files, directories, index JSON). */
#ifndef RANK_CONVERT_IMPL_H
#define RANK_CONVERT_IMPL_H

#include <stdint.h>

#include "kern_dtype.h"
#include "safetensors.h"

/* Every problem is logged (up to a cap that keeps a hostile file from
 * flooding the terminal) and counted; the conversion stops only after the
 * whole cross-check so the user sees all of them at once. */
#define PROBLEM_LOG_CAP 200

typedef struct problems {
  long count;
} problems;

void rank_convert_problem(problems *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The inputs: a list of files, directories (every *.safetensors in it,
 * sorted) or a *.safetensors.index.json (its weight_map's shards, beside
 * it). */
typedef struct weight_entry {
  char *tensor;
  char *shard; /* basename */
} weight_entry;

typedef struct inputs {
  char **paths;
  int npaths, cap;
  weight_entry *wm; /* from index files; cross-checked against the shards */
  int nwm, wmcap;
} inputs;

/* SP_OK, or a logged SP_ERR_INPUT naming the argument and the check. */
int rank_convert_inputs_resolve(int n, char *const *args, inputs *in);
void rank_convert_inputs_free(inputs *in);
/* Resolves the arguments and opens every safetensors file they name into
 * f (nf of them). Release with rank_convert_inputs_close, on failure too. */
int rank_convert_inputs_open(int n, char *const *args, inputs *in, rank_st_file ***f, int *nf);
void rank_convert_inputs_close(inputs *in, rank_st_file **f, int nf);
/* *found = 1 when some tensor key of the checkpoint satisfies is_key
 * (headers only: which converter a checkpoint is for). */
int rank_convert_inputs_any_key(int n, char *const *args, int (*is_key)(const char *),
                                int *found);
/* The index files' weight maps against what the shards hold, both ways. */
void rank_convert_check_index(const inputs *in, rank_st_file *const *f, int nf, problems *p);

/* ---- fp8 checkpoints (convert_fp8.c) ----------------------------------
 * ComfyUI's fp8_e4m3fn checkpoints store weights as F8_E4M3; its
 * fp8_e4m3fn_scaled ones add KEY.scale_weight, one float, beside each
 * KEY.weight, and the marker tensor scaled_fp8. A weight's value is
 * e4m3fn(byte) x scale (kern_fp8_e4m3_to_f32), the product rounded once to
 * float32 (then to bf16, nearest even, for --dtype bf16); with --dtype fp8
 * a block's linear weight keeps its bytes instead (MODEL.md "fp8
 * weights"). */
/* 1 when key is an fp8 format's helper tensor (KEY.scale_weight,
 * KEY.scale_input, scaled_fp8), which maps to no model tensor. */
int rank_convert_fp8_aux(const char *key);
/* The scale of weight w (of file wf) among files f: KEY.scale_weight's
 * value, or 1 when there is none. 0, or -1 after a counted problem (a scale
 * that is not one finite float, a scale beside a weight that is not fp8). */
int rank_convert_fp8_scale(rank_st_file *const *f, int nf, const rank_st_file *wf,
                           const rank_st_tensor *w, float *scale, problems *p);
/* Every KEY.scale_weight has its KEY.weight. */
void rank_convert_fp8_check_scales(rank_st_file *const *f, int nf, problems *p);

#endif
