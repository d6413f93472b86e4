/* The converter's source (see conv.h): the arguments resolved into files
 * (a file, every checkpoint file of a directory, the shards an
 * *.safetensors.index.json names beside it), each opened by its reader,
 * the index's weight map checked against the shards; the problems every
 * converter counts. */
#include <dirent.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "conv.h"
#include "file_read.h"
#include "gguf.h"
#include "json_in.h"
#include "log.h"
#include "safetensors.h"
#include "utf8.h"

/* ---- problems -------------------------------------------------------------- */

void conv_problem(problems *p, const char *fmt, ...) {
  if (p->count < CONV_PROBLEM_CAP) {
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    sp_log_error("%s", line);
  }
  p->count++;
}

int conv_problems_end(const problems *p, const char *out_path) {
  if (p->count == 0) return SP_OK;
  if (p->count > CONV_PROBLEM_CAP)
    sp_log_error("... %ld more problems not shown", p->count - CONV_PROBLEM_CAP);
  sp_log_error("%s: not converted: %ld problem(s) with the checkpoint; nothing written", out_path,
               p->count);
  return SP_ERR_INPUT;
}

/* ---- the safetensors reader --------------------------------------------------- */

static conv_dtype st_dtype(rank_st_dtype d) {
  switch (d) {
  case RANK_ST_F32: return CONV_F32;
  case RANK_ST_F16: return CONV_F16;
  case RANK_ST_BF16: return CONV_BF16;
  case RANK_ST_F8_E4M3: return CONV_F8_E4M3;
  case RANK_ST_F8_E5M2: return CONV_F8_E5M2;
  case RANK_ST_U8: return CONV_U8;
  default: return CONV_OTHER;
  }
}

static int st_open(const char *path, conv_file *f) {
  rank_st_file *s = NULL;
  int rc = rank_st_open(path, &s);
  if (rc != SP_OK) return rc;
  f->priv = s;
  f->count = s->h.count;
  f->t = sp_xcalloc((size_t)s->h.count + 1, sizeof *f->t);
  for (int i = 0; i < s->h.count; i++) {
    const rank_st_tensor *t = &s->h.t[i];
    conv_tensor *c = &f->t[i];
    c->key = t->name;
    c->dtype = st_dtype(t->dtype);
    c->dtype_name = rank_st_dtype_name(t->dtype);
    c->elem = rank_st_dtype_size(t->dtype);
    c->ndim = t->ndim;
    memcpy(c->shape, t->shape, sizeof c->shape);
    c->numel = t->numel;
    c->bytes = t->numel * c->elem;
    c->index = i;
  }
  f->nmeta = s->h.nmeta;
  f->meta_key = s->h.meta_key;
  f->meta_val = s->h.meta_val;
  return SP_OK;
}

static int st_read(const conv_file *f, const conv_tensor *t, uint64_t off, void *dst, size_t n) {
  const rank_st_file *s = f->priv;
  return rank_st_read(s, &s->h.t[t->index], off, dst, n);
}

static void st_close(conv_file *f) {
  rank_st_close(f->priv);
  free(f->t);
}

static const conv_reader safetensors_reader = {"safetensors", ".safetensors", st_open, st_read,
                                               st_close};

/* ---- the GGUF reader ----------------------------------------------------------- */

/* GGUF's own names of the formats it holds (kern_quant.h's table). */
static const char *gguf_type_name(kern_qfmt f) {
  static const char *const names[KERN_QFMT_COUNT] = {
      [KERN_QFMT_F32] = "F32",   [KERN_QFMT_F16] = "F16",   [KERN_QFMT_BF16] = "BF16",
      [KERN_QFMT_Q8_0] = "Q8_0", [KERN_QFMT_Q6_K] = "Q6_K", [KERN_QFMT_Q5_K] = "Q5_K",
      [KERN_QFMT_Q5_0] = "Q5_0", [KERN_QFMT_Q5_1] = "Q5_1", [KERN_QFMT_Q4_K] = "Q4_K",
      [KERN_QFMT_Q4_0] = "Q4_0", [KERN_QFMT_Q4_1] = "Q4_1", [KERN_QFMT_Q3_K] = "Q3_K",
      [KERN_QFMT_Q2_K] = "Q2_K"};
  return (int)f >= 0 && f < KERN_QFMT_COUNT && names[f] ? names[f] : "?";
}

/* One GGUF tensor as the pipeline sees it: F32, F16 and BF16 as values,
 * the block formats as rows of blocks, in PyTorch's shape (orig_shape
 * applied by the reader). */
static void gguf_tensor(const rank_gguf_tensor *t, int i, conv_tensor *c) {
  c->key = t->name;
  c->dtype = t->fmt == KERN_QFMT_F32    ? CONV_F32
             : t->fmt == KERN_QFMT_F16  ? CONV_F16
             : t->fmt == KERN_QFMT_BF16 ? CONV_BF16
                                        : CONV_BLOCKS;
  c->dtype_name = gguf_type_name(t->fmt);
  c->qtype = kern_qfmt_dtype(t->fmt);
  c->elem = c->dtype == CONV_BLOCKS ? 0 : kern_dtype_size(c->qtype);
  c->ndim = t->shape_dims;
  memcpy(c->shape, t->shape, sizeof c->shape);
  c->numel = t->numel;
  c->bytes = t->bytes;
  c->rows = t->rows;
  c->cols = t->cols;
  c->keep = 1;
  c->index = i;
}

/* The string metadata (general.architecture, ...) as the file's metadata:
 * keys and values point into the header; invalid strings left out. */
static void gguf_meta(const rank_gguf_file *g, conv_file *f) {
  f->meta_key = sp_xcalloc((size_t)g->h.nkv + 1, sizeof *f->meta_key);
  f->meta_val = sp_xcalloc((size_t)g->h.nkv + 1, sizeof *f->meta_val);
  for (int64_t k = 0; k < g->h.nkv; k++) {
    const rank_gguf_kv *kv = &g->h.kv[k];
    if (kv->type != RANK_GGUF_STRING || memchr(kv->str, '\0', kv->str_len) ||
        io_utf8_check((const unsigned char *)kv->str, kv->str_len) != kv->str_len)
      continue;
    f->meta_key[f->nmeta] = kv->key;
    f->meta_val[f->nmeta++] = kv->str;
  }
}

static int gguf_open(const char *path, conv_file *f) {
  rank_gguf_file *g = NULL;
  int rc = rank_gguf_open(path, &g);
  if (rc != SP_OK) return rc;
  if (g->h.ntensors > INT32_MAX / 2) {
    sp_log_error("%s: %lld tensors, more than a checkpoint holds", path,
                 (long long)g->h.ntensors);
    rank_gguf_close(g);
    return SP_ERR_INPUT;
  }
  f->priv = g;
  f->count = (int)g->h.ntensors;
  f->t = sp_xcalloc((size_t)f->count + 1, sizeof *f->t);
  for (int i = 0; i < f->count; i++) gguf_tensor(&g->h.t[i], i, &f->t[i]);
  gguf_meta(g, f);
  return SP_OK;
}

static int gguf_read(const conv_file *f, const conv_tensor *t, uint64_t off, void *dst, size_t n) {
  const rank_gguf_file *g = f->priv;
  return rank_gguf_read(g, &g->h.t[t->index], off, dst, n);
}

static void gguf_close(conv_file *f) {
  rank_gguf_close(f->priv);
  free(f->meta_key);
  free(f->meta_val);
  free(f->t);
}

static const conv_reader gguf_reader = {"gguf", ".gguf", gguf_open, gguf_read, gguf_close};
const conv_reader *const conv_readers[] = {&safetensors_reader, &gguf_reader, NULL};

const char *conv_dtype_name(conv_dtype d) {
  static const char *const names[] = {"F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "U8",
                                      "GGUF blocks", "?"};
  return (int)d >= 0 && d <= CONV_OTHER ? names[d] : "?";
}

const char *conv_file_meta(const conv_file *f, const char *key) {
  for (int i = 0; i < f->nmeta; i++)
    if (strcmp(f->meta_key[i], key) == 0) return f->meta_val[i];
  return NULL;
}

int conv_ckpt_has(const conv_ckpt *ck, const char *reader) {
  for (int s = 0; s < ck->nf; s++)
    if (strcmp(ck->f[s].reader->name, reader) == 0) return 1;
  return 0;
}

/* The reader of a file named name: the one whose suffix it has; with
 * strict unset, the first when none has. */
static const conv_reader *reader_of(const char *name, int strict) {
  size_t n = strlen(name);
  for (int i = 0; conv_readers[i]; i++) {
    size_t k = strlen(conv_readers[i]->suffix);
    if (n >= k && strcmp(name + n - k, conv_readers[i]->suffix) == 0) return conv_readers[i];
  }
  return strict ? NULL : conv_readers[0];
}

/* "*.safetensors", for messages. */
static const char *suffixes(void) {
  static char buf[128];
  if (!buf[0])
    for (int i = 0; conv_readers[i]; i++)
      snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s*%s", i ? ", " : "",
               conv_readers[i]->suffix);
  return buf;
}

/* ---- the arguments ----------------------------------------------------------- */

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

static int ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && strcmp(s + a - b, suf) == 0;
}

static void add_path(inputs *in, const char *dir, const char *name) {
  if (in->npaths == in->cap) {
    in->cap = in->cap ? in->cap * 2 : 8;
    char **p = realloc(in->paths, (size_t)in->cap * sizeof *p);
    if (!p) sp_fatal("out of memory");
    in->paths = p;
  }
  size_t n = (dir ? strlen(dir) + 1 : 0) + strlen(name) + 1;
  char *s = sp_xmalloc(n);
  if (dir) snprintf(s, n, "%s/%s", dir, name);
  else snprintf(s, n, "%s", name);
  in->paths[in->npaths++] = s;
}

static int str_cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_directory(inputs *in, const char *dir) {
  DIR *d = opendir(dir);
  if (!d) {
    sp_log_error("%s: cannot open directory: %s", dir, strerror(errno));
    return SP_ERR_INPUT;
  }
  int first = in->npaths;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.' && reader_of(e->d_name, 1)) add_path(in, dir, e->d_name);
  closedir(d);
  if (in->npaths == first) {
    sp_log_error("%s: directory holds no checkpoint file (%s)", dir, suffixes());
    return SP_ERR_INPUT;
  }
  qsort(in->paths + first, (size_t)(in->npaths - first), sizeof *in->paths, str_cmp);
  return SP_OK;
}

static int add_index(inputs *in, const char *path) {
  char err[1024], *text = NULL;
  json_object *root = NULL;
  int rc = SP_ERR_INPUT;
  FILE *f = NULL;
  if (rank_file_fopen_read(path, &f) != SP_OK) return SP_ERR_INPUT; /* io/file_read.h */
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode) ||
      (uint64_t)sb.st_size > RANK_ST_MAX_HEADER) {
    sp_log_error("%s: not a regular file of at most %u bytes", path, RANK_ST_MAX_HEADER);
    goto out;
  }
  size_t n = (size_t)sb.st_size;
  text = sp_xmalloc(n + 1);
  if (fread(text, 1, n, f) != n) {
    sp_log_error("%s: read failed", path);
    rc = SP_ERR_RUNTIME;
    goto out;
  }
  text[n] = '\0';
  if (io_json_parse(text, n, RANK_ST_MAX_HEADER, &root, err, sizeof err) != 0) {
    sp_log_error("%s: %s", path, err);
    goto out;
  }
  json_object *wm = NULL;
  if (!json_object_object_get_ex(root, "weight_map", &wm) ||
      !json_object_is_type(wm, json_type_object) || json_object_object_length(wm) == 0) {
    sp_log_error("%s: no \"weight_map\" object of tensor -> shard file", path);
    goto out;
  }
  /* The shards live beside the index; a name with a '/' could point anywhere. */
  char *dir = sp_xstrdup(path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = '\0';
  else snprintf(dir, strlen(dir) + 1, ".");
  int first = in->npaths;
  json_object_object_foreach(wm, k, v) {
    const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
    if (!s || !*s || strchr(s, '/') || strcmp(s, ".") == 0 || strcmp(s, "..") == 0 ||
        (size_t)json_object_get_string_len(v) != strlen(s)) {
      sp_log_error("%s: weight_map entry for tensor '%.200s' is not a plain file name", path, k);
      free(dir);
      goto out;
    }
    int seen = 0;
    for (int i = first; i < in->npaths && !seen; i++)
      seen = strcmp(in->paths[i] + strlen(dir) + 1, s) == 0;
    if (!seen) add_path(in, dir, s);
    if (in->nwm == in->wmcap) {
      in->wmcap = in->wmcap ? in->wmcap * 2 : 256;
      weight_entry *p = realloc(in->wm, (size_t)in->wmcap * sizeof *p);
      if (!p) sp_fatal("out of memory");
      in->wm = p;
    }
    in->wm[in->nwm].tensor = sp_xstrdup(k);
    in->wm[in->nwm].shard = sp_xstrdup(s);
    in->nwm++;
  }
  free(dir);
  rc = SP_OK;
out:
  json_object_put(root);
  free(text);
  fclose(f);
  return rc;
}

static void inputs_free(inputs *in) {
  for (int i = 0; i < in->npaths; i++) free(in->paths[i]);
  free(in->paths);
  for (int i = 0; i < in->nwm; i++) {
    free(in->wm[i].tensor);
    free(in->wm[i].shard);
  }
  free(in->wm);
}

static int inputs_resolve(int n, char *const *args, inputs *in) {
  for (int i = 0; i < n; i++) {
    struct stat sb;
    if (stat(args[i], &sb) != 0) {
      sp_log_error("%s: cannot open: %s", args[i], strerror(errno));
      return SP_ERR_INPUT;
    }
    int rc = SP_OK;
    if (S_ISDIR(sb.st_mode)) rc = add_directory(in, args[i]);
    else if (ends_with(args[i], ".index.json")) rc = add_index(in, args[i]);
    else add_path(in, NULL, args[i]);
    if (rc != SP_OK) return rc;
  }
  return SP_OK;
}

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

static int entry_cmp(const void *a, const void *b) {
  const weight_entry *x = a, *y = b;
  int c = strcmp(x->tensor, y->tensor);
  return c ? c : strcmp(x->shard, y->shard);
}

/* Every weight_map entry must be in the shard it names, and every shard
 * tensor listed: both lists sorted and merged (a hostile index with
 * millions of entries stays O(n log n)). */
static void check_index(const inputs *in, const conv_file *f, int nf, problems *p) {
  if (in->nwm == 0) return;
  size_t nh = 0;
  for (int s = 0; s < nf; s++) nh += (size_t)f[s].count;
  weight_entry *want = sp_xmalloc(((size_t)in->nwm + 1) * sizeof *want);
  weight_entry *have = sp_xmalloc((nh + 1) * sizeof *have);
  memcpy(want, in->wm, (size_t)in->nwm * sizeof *want);
  size_t k = 0;
  for (int s = 0; s < nf; s++)
    for (int t = 0; t < f[s].count; t++) {
      have[k].tensor = (char *)f[s].t[t].key;
      have[k].shard = (char *)base_name(f[s].path);
      k++;
    }
  qsort(want, (size_t)in->nwm, sizeof *want, entry_cmp);
  qsort(have, nh, sizeof *have, entry_cmp);
  size_t i = 0, j = 0;
  while (i < (size_t)in->nwm || j < nh) {
    int c = i == (size_t)in->nwm ? 1 : j == nh ? -1 : entry_cmp(&want[i], &have[j]);
    if (c < 0) {
      conv_problem(p,
                   "index: tensor '%.200s' is listed in shard %s but that shard does not hold it",
              want[i].tensor, want[i].shard);
      i++;
    } else if (c > 0) {
      const char *path = have[j].shard;
      for (int s = 0; s < nf; s++)
        if (base_name(f[s].path) == have[j].shard) path = f[s].path;
      conv_problem(p, "%s: tensor '%.200s' is not listed for this shard in the index", path,
              have[j].tensor);
      j++;
    } else {
      i++;
      j++;
    }
  }
  free(want);
  free(have);
}

/* ---- the checkpoint ------------------------------------------------------------- */

int conv_ckpt_open(int n, char *const *args, conv_ckpt *ck, problems *p) {
  memset(ck, 0, sizeof *ck);
  inputs in = {0};
  int rc = inputs_resolve(n, args, &in);
  ck->f = sp_xcalloc((size_t)in.npaths + 1, sizeof *ck->f);
  for (; rc == SP_OK && ck->nf < in.npaths; ck->nf++) {
    conv_file *f = &ck->f[ck->nf];
    f->reader = reader_of(in.paths[ck->nf], 0);
    f->path = sp_xstrdup(in.paths[ck->nf]);
    if ((rc = f->reader->open(f->path, f)) != SP_OK) break;
  }
  if (rc == SP_OK) {
    check_index(&in, ck->f, ck->nf, p);
    for (int s = 0; s < ck->nf; s++) ck->n += ck->f[s].count;
    ck->t = sp_xcalloc((size_t)ck->n + 1, sizeof *ck->t);
    int k = 0;
    for (int s = 0; s < ck->nf; s++)
      for (int i = 0; i < ck->f[s].count; i++) {
        ck->f[s].t[i].file = s;
        ck->t[k++] = &ck->f[s].t[i];
      }
    if (ck->nf == 1)
      snprintf(ck->label, sizeof ck->label, "%s", ck->f[0].path);
    else
      snprintf(ck->label, sizeof ck->label, "%s (+%d more shards)", ck->f[0].path, ck->nf - 1);
  }
  inputs_free(&in);
  return rc;
}

void conv_ckpt_close(conv_ckpt *ck) {
  for (int i = 0; ck->f && i < ck->nf; i++) {
    if (ck->f[i].priv) ck->f[i].reader->close(&ck->f[i]);
    free(ck->f[i].path);
  }
  if (ck->f && ck->f[ck->nf].path) free(ck->f[ck->nf].path); /* one that failed to open */
  free(ck->f);
  free(ck->t);
  memset(ck, 0, sizeof *ck);
}

int conv_read(const conv_ckpt *ck, const conv_tensor *t, uint64_t off, void *dst, size_t n) {
  const conv_file *f = &ck->f[t->file];
  return f->reader->read(f, t, off, dst, n);
}

const char *conv_path(const conv_ckpt *ck, const conv_tensor *t) { return ck->f[t->file].path; }

int conv_any_key(int n, char *const *args, int (*is_key)(const char *), int *found) {
  conv_ckpt ck;
  problems p = {0};
  int rc = conv_ckpt_open(n, args, &ck, &p), hit = 0;
  for (int i = 0; rc == SP_OK && i < ck.n && !hit; i++) hit = is_key(ck.t[i]->key) != 0;
  conv_ckpt_close(&ck);
  if (rc == SP_OK) *found = hit;
  return rc;
}
