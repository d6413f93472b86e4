/* The converter pipeline: one checkpoint (or one per part of a file: the
 * DiT's two experts) goes
 *
 *   source (conv_source.c: files, directories, *.index.json; a reader per
 *     file format: safetensors, GGUF)
 *   -> key map (conv_keymap.c: the network's layouts as tables of rules:
 *     official, diffusers, ComfyUI, transformers, WanVAE_)
 *   -> cross-check against the network's schema (ranks/nets/net_schema.h)
 *     for the config the network infers from the shapes
 *   -> dtype policy (conv_policy.c: every value decoded to fp32 and stored
 *     in the format the file gives the tensor, bf16 to nearest even, fp8
 *     quantised per output channel or its e4m3 bytes kept, ComfyUI's scaled
 *     fp8 dequantised, a quantisable tensor kept in its source's format
 *     when the file's root dtype allows it (GGUF's blocks), any other GGUF
 *     block dequantised; a value not finite once stored refused)
 *   -> the model-file layer's writer (ranks/model/mfile.h).
 *
 * A network is a conv_net (conv_wan.c, conv_umt5.c, conv_vae.c): its
 * schema, its layouts, the source dtypes it takes and two hooks (index
 * parameters of its key maps, config from shapes). Every problem with the
 * checkpoint is logged (one line each, up to a cap) and counted, and only
 * after the whole cross-check does it stop: nothing is written then. */
#ifndef RANK_CONV_H
#define RANK_CONV_H

#include <stddef.h>
#include <stdint.h>

#include "mfile.h"
#include "net_schema.h"

/* ---- problems -------------------------------------------------------------- */

#define CONV_PROBLEM_CAP 200 /* lines shown; a hostile file cannot flood the terminal */

typedef struct problems {
  long count;
} problems;

void conv_problem(problems *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* SP_OK when p counted none; else logs how many went unshown and that
 * out_path is not written, and returns SP_ERR_INPUT. */
int conv_problems_end(const problems *p, const char *out_path);

/* ---- the source ---------------------------------------------------------------- */

#define CONV_MAX_NDIM 8

/* Element types of a checkpoint's tensors; CONV_BLOCKS: a GGUF block
 * format (conv_tensor.qtype), rows of blocks of bytes. */
typedef enum {
  CONV_F32, CONV_F16, CONV_BF16, CONV_F8_E4M3, CONV_F8_E5M2, CONV_U8, CONV_BLOCKS, CONV_OTHER
} conv_dtype;
/* "F32", ... "U8", "GGUF blocks", "?": the names of conv_dtype's values. */
const char *conv_dtype_name(conv_dtype d);

/* One tensor of a checkpoint file. */
typedef struct conv_tensor {
  const char *key;        /* the checkpoint's key */
  conv_dtype dtype;
  const char *dtype_name; /* as the file spells it ("F16") */
  size_t elem;            /* bytes of one value (0: not a dtype read here, or blocks) */
  kern_dtype qtype;       /* CONV_BLOCKS: its format (q8_0 ... q2_k), stored as the model file
                             stores it */
  int ndim;
  int64_t shape[CONV_MAX_NDIM];
  uint64_t numel;
  uint64_t bytes;         /* of its data */
  int keep;               /* its format is the checkpoint's own quantisation (a GGUF tensor's):
                             kept where the root dtype allows it (conv_copy) */
  int64_t rows, cols;     /* CONV_BLOCKS: as rows of blocks (cols the values of a row) */
  int file;               /* its file among the checkpoint's */
  int index;              /* its place in the file */
} conv_tensor;

/* One checkpoint file, opened by its reader. */
typedef struct conv_file {
  char *path;
  const struct conv_reader *reader;
  void *priv;        /* the reader's */
  int count;
  conv_tensor *t;    /* (count), keys owned by the reader */
  int nmeta;         /* the file's free-form metadata (safetensors' __metadata__) */
  char **meta_key, **meta_val;
} conv_file;

/* A reader of one checkpoint file format: safetensors and GGUF, each one
 * of these and its entry in conv_readers. */
typedef struct conv_reader {
  const char *name;   /* "safetensors", "gguf" */
  const char *suffix; /* the files a directory contributes, and that it takes */
  /* Opens path into f (count, t, nmeta, meta, priv): SP_OK or a logged status. */
  int (*open)(const char *path, conv_file *f);
  /* n bytes at off of tensor t's data: SP_OK or a logged status. */
  int (*read)(const conv_file *f, const conv_tensor *t, uint64_t off, void *dst, size_t n);
  void (*close)(conv_file *f);
} conv_reader;

extern const conv_reader *const conv_readers[]; /* NULL-terminated; the first takes any file */

/* A checkpoint: its files (a list, directories of them, index JSONs
 * naming shards beside them) and every tensor in file order. */
typedef struct conv_ckpt {
  int nf;
  conv_file *f;
  int n;
  conv_tensor **t;  /* (n) */
  char label[1200]; /* names it in problems of no one file */
} conv_ckpt;

/* Opens the arguments' files; an index's weight map is checked against
 * the shards both ways (problems into p). SP_OK, or the inputs' logged
 * status; conv_ckpt_close either way. */
int conv_ckpt_open(int n, char *const *args, conv_ckpt *ck, problems *p);
void conv_ckpt_close(conv_ckpt *ck);
int conv_read(const conv_ckpt *ck, const conv_tensor *t, uint64_t off, void *dst, size_t n);
const char *conv_path(const conv_ckpt *ck, const conv_tensor *t);
/* The value of the file's metadata key, or NULL (GGUF: its string values). */
const char *conv_file_meta(const conv_file *f, const char *key);
/* 1 when some file of ck was opened by the reader named reader ("gguf"). */
int conv_ckpt_has(const conv_ckpt *ck, const char *reader);
/* *found = 1 when a key of the checkpoint satisfies is_key (headers only). */
int conv_any_key(int n, char *const *args, int (*is_key)(const char *), int *found);

/* ---- key maps ------------------------------------------------------------------- */

/* A rename of keys. Patterns are literal text and '#', a decimal index
 * (no leading zero, below 1024). from matches the whole key (exact) or
 * its start, the rest renamed by the first leaf rule that takes it (leaf
 * NULL: kept as it is; a leaf that takes none: the key is no tensor).
 * The index written into to is i x P[mul] + j + P[add] for from's indices
 * i (and j), P the layout's parameters (index 0: none, which is 1 for mul
 * and 0 for add); with bound, j <= P[bound]. tied: a copy of a tensor
 * another rule maps too, skipped when that one is there. */
typedef struct conv_rule {
  const char *from, *to;
  int exact;
  const struct conv_rule *leaf; /* ends with a rule of from NULL */
  int mul, add, bound;
  int tied;
} conv_rule;

/* Rules as the tables write them. */
#define CONV_RENAME(f, t) {.from = (f), .to = (t)}
#define CONV_EXACT(f, t) {.from = (f), .to = (t), .exact = 1}
#define CONV_TREE(f, t, l) {.from = (f), .to = (t), .leaf = (l)}
#define CONV_END {.from = NULL}

#define CONV_MAX_PARAMS 4

/* One layout of a network's checkpoints. */
typedef struct conv_layout {
  const char *name;          /* "official", "diffusers", "comfyui", "transformers" */
  const char *prefix;        /* every key of it starts with this ("" for none) */
  const conv_rule *rules;    /* ends with a rule of from NULL */
  const char *const *skip;   /* prefixes of keys it holds and no model needs (counted),
                              * NULL-ended */
} conv_layout;

/* key of layout l to the network's official key (the schema's net_tensor
 * key) into out: 0, or -1 when no rule takes it; *tied (may be NULL) says
 * a tied rule did. */
int conv_map(const conv_layout *l, const int64_t *param, const char *key, char *out, size_t n,
             int *tied);
/* The inverse: the key layout l gives the official key (the official key
 * itself when no rule gives it one). */
void conv_unmap(const conv_layout *l, const int64_t *param, const char *official, char *out,
                size_t n);
/* 1 when a rule of l takes key (its parameters aside): what tells
 * layouts apart. */
int conv_takes(const conv_layout *l, const char *key);
/* 1 when l skips key. */
int conv_skips(const conv_layout *l, const char *key);
/* "blocks.12.x" -> 12 and "x" when key starts with prefix then an index and
 * a dot; NULL when not. */
const char *conv_index_after(const char *key, const char *prefix, int64_t *index);

/* ---- one conversion -------------------------------------------------------------- */

/* A tensor of the checkpoint as the pipeline sees it. */
typedef struct conv_src {
  const conv_tensor *t;
  char name[NET_NAME_MAX + 16]; /* its official key; "" when it maps to none */
  int skip;                     /* a key the layout skips, a tied copy, an fp8 helper */
  float scale;                  /* fp8: its scale_weight, or 1 */
} conv_src;

struct conv_net;

/* One checkpoint being converted. */
typedef struct conv_job {
  const struct conv_net *net;
  conv_ckpt ck;
  const conv_layout *layout;
  int64_t param[CONV_MAX_PARAMS];
  conv_src *src;         /* (ck.n) */
  int skipped, helpers;  /* keys skipped; fp8 scales and markers */
  void *config;          /* the inferred config (the schema's struct) */
  net_tensor *t;         /* its table (nt) */
  int nt;
  int *slot;             /* table entry -> src index, -1 missing */
  problems p;
} conv_job;

/* The source of official key name, or NULL. */
const conv_src *conv_job_find(const conv_job *j, const char *name);
/* name in the checkpoint's own key (conv_unmap). */
void conv_job_key(const conv_job *j, const char *name, char *out, size_t n);
/* The largest index + 1 of the official keys "PREFIX<index>." (0 if none). */
int64_t conv_job_count(const conv_job *j, const char *prefix);

/* A network the pipeline converts. */
typedef struct conv_net {
  const char *what;              /* "a Wan 2.1 T2V model": "not a tensor of WHAT" */
  const char *short_what;        /* "Wan 2.1 DiT": the info lines */
  const net_schema *schema;
  const conv_layout *const *layouts; /* by priority: a tie goes to the earlier */
  int default_layout;            /* when no layout takes any key */
  const conv_dtype *dtypes;      /* the source dtypes it takes */
  int ndtypes;
  const char *skip_what;         /* what its layouts skip, "encoder tensors (...)" */
  int copy_metadata;             /* the files' metadata as meta.KEY attributes */
  /* Whether an official key names a tensor of some config of the network
   * (a key that maps to none is no tensor of it). May be NULL: every one
   * that maps is checked against the inferred config's table. */
  int (*known)(const char *official);
  /* Refusals before anything else (a checkpoint of two networks): SP_OK or
   * a logged SP_ERR_INPUT. May be NULL. */
  int (*screen)(conv_job *j);
  /* The layout's index parameters (j->param) from the keys, before they
   * are mapped. May be NULL. */
  void (*params)(conv_job *j);
  /* The config from the mapped tensors' shapes into j->config (logged):
   * 0, or -1 after problems. */
  int (*infer)(conv_job *j);
} conv_net;

/* The networks: conv_wan.c, conv_umt5.c, conv_vae.c, conv_vae22.c. */
extern const conv_net conv_wan, conv_umt5, conv_vae, conv_vae22;

/* Opens the checkpoint of n arguments for net and checks every tensor
 * against the table of the config it infers (problems logged and
 * counted): SP_OK, or the status after all of them; conv_job_free either
 * way. */
int conv_prepare(const conv_net *net, int n, char *const *args, const char *out_path,
                 conv_job *j);
void conv_job_free(conv_job *j);

/* What to write: the jobs (one per part of the file) of net into out_path
 * with the file's config (the parts' tensors follow one another in its
 * table), root dtype, preset and hooks (may be NULL); progress lines when
 * progress is set. */
typedef struct conv_output {
  const char *path;
  const void *config;
  const char *root;
  const char *preset;
  const mfile_hooks *hooks;
  int progress;
  kern_dtype quant; /* the quantisable tensors' format where the root allows a choice (Q8_0
                       of a quant file), or KERN_DTYPE_COUNT: the root's first */
} conv_output;
int conv_write(const conv_net *net, const conv_job *jobs, int njobs, const conv_output *o);

/* ---- the dtype policy (conv_policy.c) ------------------------------------------- */

/* Attaches every KEY.scale_weight to its KEY.weight (src->scale) and
 * checks the fp8 tensors and their scales: a scale must be one finite,
 * positive F32, F16 or BF16 value beside an fp8 weight. */
void conv_scales(conv_job *j);
/* The info line counting fp8 tensors dequantised or kept (root: the
 * file's root dtype), and GGUF's block tensors by format. */
void conv_scales_info(const conv_job *j, const char *root);

/* Progress of the copy: bytes of the source read. */
typedef struct conv_progress {
  int on;
  uint64_t done, total;
  double t0, last;
} conv_progress;
void conv_progress_tick(conv_progress *pr, int final);

/* Source tensor s into tensor i of w: stored in the source's own format
 * when it is the checkpoint's own quantisation (conv_tensor.keep), the
 * tensor quantisable and the root dtype allowing that format for it
 * (mfile_writer_set_format: GGUF's blocks and fp16 in a quant file),
 * else as the file stores it (mfile_writer_format); read in parts, decoded
 * to fp32 (fp8 times its scale, the product rounded once; GGUF blocks
 * dequantised a few rows at a time), narrowed, each value checked finite
 * as stored ("element K is infinite in bf16"); an e4m3 weight of an fp8
 * file keeps an F8_E4M3 source's bytes with its scale_weight as every
 * output channel's scale; a block format keeps its bytes whole (their
 * values checked finite); a quantised format gets the whole tensor in
 * fp32. SP_OK, SP_ERR_INPUT (logged, naming the file, tensor and element)
 * or the writer's or reader's status. */
int conv_copy(mfile_writer *w, int i, const conv_ckpt *ck, const conv_src *s, conv_progress *pr);

#endif
