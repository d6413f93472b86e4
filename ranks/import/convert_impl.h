/* Internals shared by the converters (convert.c, convert_t5.c,
 * convert_vae.c): the problem count, the inputs (convert_inputs.c: files,
 * directories, index JSON), the cross-check and copy helpers
 * (convert_check.c) and fp8 (convert_fp8.c). */
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

/* ---- cross-check and copy helpers (convert_check.c) -------------------- */

/* A source tensor of a T5 or VAE checkpoint: where it is, and the key of
 * the network's table it maps to. */
typedef struct rank_convert_src {
  const rank_st_file *file;
  const rank_st_tensor *t;
  char name[128];             /* the network's key; "" when not mapped */
  const rank_st_file *sfile;  /* the file of its fp8 scale_weight, if any */
  const rank_st_tensor *scale; /* its fp8 scale_weight, or NULL */
} rank_convert_src;

/* A checkpoint opened: its files and every tensor in file order. */
typedef struct rank_convert_ckpt {
  inputs in;
  rank_st_file **f;
  int nf;
  rank_convert_src *src; /* (nsrc) file and tensor set, the rest zero */
  int nsrc;
  char label[1200]; /* names the checkpoint in problems of no one file */
} rank_convert_ckpt;

/* Opens the inputs into ck, checks their index files against the shards
 * (problems into p) and lists every tensor. SP_OK, or the inputs' logged
 * status; release with rank_convert_ckpt_close either way. */
int rank_convert_ckpt_open(int n, char *const *args, rank_convert_ckpt *ck, problems *p);
void rank_convert_ckpt_close(rank_convert_ckpt *ck);
/* The source tensor mapped to the table key name, or NULL. */
const rank_convert_src *rank_convert_ckpt_find(const rank_convert_ckpt *ck, const char *name);
/* Claims table entry ti for source i in slot (table entry -> source, -1
 * free): 0 with slot[ti] = i, or -1 after a problem naming the source that
 * holds it already. */
int rank_convert_ckpt_claim(const rank_convert_ckpt *ck, int *slot, int ti, int i, problems *p);

/* 1 when s starts with prefix. */
int rank_convert_has_prefix(const char *s, const char *prefix);
/* A decimal index below 1000 without leading zeros, then '.', at p:
 * returns what follows the dot with the index in *v, or NULL (*v
 * untouched). */
const char *rank_convert_parse_index(const char *p, int64_t *v);
/* The name of a checkpoint of nf >= 1 files in problems that belong to no
 * one file: the first file's path, "+N more shards" when there are more. */
void rank_convert_label(rank_st_file *const *f, int nf, char *buf, size_t n);
/* "[d0, d1, ...]", truncated to n bytes. */
void rank_convert_shape_str(int ndim, const int64_t *shape, char *buf, size_t n);
/* A problem naming path, the tensor, its shape and the wanted one when
 * tensor t is not of shape (ndim, shape). */
void rank_convert_check_shape(const char *path, const rank_st_tensor *t, int ndim,
                              const int64_t *shape, problems *p);
/* A problem naming the accepted dtypes ok[0..nok) when t's is none of them. */
void rank_convert_check_dtype(const char *path, const rank_st_tensor *t, const rank_st_dtype *ok,
                              int nok, problems *p);
/* The verdict on a config inferred from the shapes: 0 when its check
 * returned 0, else -1 after a problem naming label and the check's reason
 * err. */
int rank_convert_config_verdict(int check, const char *err, const char *label, problems *p);
/* The end of a cross-check: SP_OK when p counted no problem; else logs how
 * many went unshown and that out_path is not written, and returns
 * SP_ERR_INPUT. */
int rank_convert_problems_end(const problems *p, const char *out_path);
/* n source elements of dtype dt (F32, F16, BF16, F8_E4M3, F8_E5M2) at src
 * to fp32: exact for the float dtypes; fp8 times scale, the product
 * rounded once. */
void rank_convert_to_f32(rank_st_dtype dt, const unsigned char *src, float scale, float *dst,
                         size_t n);
/* Elements [at, at + n) of tensor t of file as fp32 into f (fp8 times
 * scale), through raw (n times the dtype's size bytes). SP_OK; the read's
 * status; or SP_ERR_INPUT, logged naming the element, when one is NaN or
 * infinite. */
int rank_convert_read_f32(const rank_st_file *file, const rank_st_tensor *t, int64_t at, int64_t n,
                          float scale, unsigned char *raw, float *f);

/* ---- fp8 checkpoints (convert_fp8.c) ----------------------------------
 * ComfyUI's fp8_e4m3fn checkpoints store weights as F8_E4M3; its
 * fp8_e4m3fn_scaled ones add KEY.scale_weight, one float, beside each
 * KEY.weight, and the marker tensor scaled_fp8. A weight's value is
 * e4m3fn(byte) x scale (kern_fp8_e4m3_to_f32), the product rounded once to
 * float32 (then to bf16, nearest even, for --dtype bf16); with --dtype fp8
 * a block's linear weight keeps its bytes instead (MODEL.md "fp8
 * weights"). */
/* The value of a float8 e5m2 byte: the top byte of an IEEE half (exact). */
float rank_convert_e5m2_to_f32(uint8_t b);
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
