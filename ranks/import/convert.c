/* safetensors -> staticpipe model file (see convert.h). Reads top-down:
 * the cross-check that reports every problem, the streaming
 * copy; the inputs (files, directories, index JSON) are convert_inputs.c,
 * the key styles and mapping convert_keys.c. */
#include "convert.h"

#include <dirent.h>
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "log.h"
#include "model_file.h"
#include "convert_impl.h"
#include "safetensors.h"

/* ---- problems (convert_impl.h) ------------------------------------------ */

void rank_convert_problem(problems *p, const char *fmt, ...) {
  if (p->count < PROBLEM_LOG_CAP) {
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    sp_log_error("%s", line);
  }
  p->count++;
}

/* ---- cross-check ------------------------------------------------------------ */

typedef struct src_tensor {
  const rank_st_file *file;
  const rank_st_tensor *t;
  wan_group g;
  int block;
  const char *name; /* official, in the table; NULL when unmapped */
  int aux;          /* an fp8 format's helper tensor (convert_impl.h), not a weight */
  float scale;      /* F8_E4M3: the dequantisation scale (KEY.scale_weight, or 1) */
} src_tensor;

typedef struct checkpoint {
  rank_convert_style style;
  src_tensor *src;
  int nsrc;
  wan_config config;
  wan_layout layout[3]; /* shapes of the inferred config (f32 sizes) */
  int *slot;            /* (embed, layers x block, head) -> src index, -1 if missing */
  char label[1200];     /* names the checkpoint in problems that belong to no file */
} checkpoint;

static int slot_base(const checkpoint *ck, wan_group g, int block) {
  if (g == WAN_GROUP_EMBED) return 0;
  if (g == WAN_GROUP_BLOCK) return WAN_MAX_TENSORS * (1 + block);
  return WAN_MAX_TENSORS * (1 + (int)ck->config.layers);
}

static rank_convert_style detect_style(rank_st_file *const *f, int nf) {
  long comfy = 0, off = 0, dif = 0;
  for (int s = 0; s < nf; s++) {
    for (int i = 0; i < f[s]->h.count; i++) {
      const char *k = f[s]->h.t[i].name, *nm;
      wan_group g;
      int b;
      if (strncmp(k, RANK_CONVERT_COMFY_PREFIX, strlen(RANK_CONVERT_COMFY_PREFIX)) == 0) comfy++;
      if (rank_convert_map_key(RANK_CONVERT_OFFICIAL, k, &g, &b, &nm) == 0) off++;
      if (rank_convert_map_key(RANK_CONVERT_DIFFUSERS, k, &g, &b, &nm) == 0) dif++;
    }
  }
  /* patch_embedding.* is the same in both: the majority decides. */
  if (comfy > 0 && comfy >= off && comfy >= dif) return RANK_CONVERT_COMFY;
  return dif > off ? RANK_CONVERT_DIFFUSERS : RANK_CONVERT_OFFICIAL;
}

static const src_tensor *find_src(const checkpoint *ck, wan_group g, int block,
                                  const char *name) {
  for (int i = 0; i < ck->nsrc; i++) {
    const src_tensor *s = &ck->src[i];
    if (s->name && s->g == g && (block < 0 || s->block == block) && strcmp(s->name, name) == 0)
      return s;
  }
  return NULL;
}

/* Config from shapes: dim, in_dim and patch from patch_embedding.weight
 * [dim, in, p0, p1, p2], text_dim and freq_dim from the first embedding
 * linears, ffn_dim from a block's ffn.0.weight, out_dim from head.head,
 * heads = dim / 128, layers = highest block + 1. text_len and eps are not
 * in the weights: the published 512 and 1e-6. */
static int infer_config(checkpoint *ck, problems *p) {
  static const struct {
    wan_group g;
    const char *name;
    int ndim;
  } need[] = {
      {WAN_GROUP_EMBED, "patch_embedding.weight", 5},
      {WAN_GROUP_EMBED, "text_embedding.0.weight", 2},
      {WAN_GROUP_EMBED, "time_embedding.0.weight", 2},
      {WAN_GROUP_BLOCK, "ffn.0.weight", 2},
      {WAN_GROUP_HEAD, "head.head.weight", 2},
  };
  const src_tensor *s[5];
  int ok = 1;
  for (int i = 0; i < 5; i++) {
    s[i] = find_src(ck, need[i].g, -1, need[i].name);
    char key[256], sh[128];
    rank_convert_key_for(ck->style, need[i].g, 0, need[i].name, key, sizeof key);
    if (!s[i]) {
      rank_convert_problem(p, "%s: missing tensor '%s' (needed to infer the config)", ck->label, key);
      ok = 0;
    } else if (s[i]->t->ndim != need[i].ndim) {
      rank_convert_shape_str(s[i]->t->ndim, s[i]->t->shape, sh, sizeof sh);
      rank_convert_problem(p, "%s: tensor '%s': shape %s, expected %d dims", s[i]->file->path, s[i]->t->name,
              sh, need[i].ndim);
      ok = 0;
    }
  }
  int layers = 0;
  for (int i = 0; i < ck->nsrc; i++)
    if (ck->src[i].name && ck->src[i].g == WAN_GROUP_BLOCK && ck->src[i].block + 1 > layers)
      layers = ck->src[i].block + 1;
  if (!ok) return -1;
  wan_config c;
  wan_preset("wan2.1-tiny", &c); /* the fixed fields: text_len, eps, defaults */
  c.dim = s[0]->t->shape[0];
  c.in_dim = s[0]->t->shape[1];
  for (int i = 0; i < 3; i++) c.patch[i] = s[0]->t->shape[2 + i];
  c.text_dim = s[1]->t->shape[1];
  c.freq_dim = s[2]->t->shape[1];
  c.ffn_dim = s[3]->t->shape[0];
  c.heads = c.dim % 128 == 0 ? c.dim / 128 : 0;
  c.layers = layers;
  int64_t pp = c.patch[0] * c.patch[1] * c.patch[2]; /* each dim < 2^62: no overflow below */
  if (c.patch[0] > 64 || c.patch[1] > 64 || c.patch[2] > 64 || pp == 0 ||
      s[4]->t->shape[0] % pp != 0) {
    rank_convert_problem(p, "%s: tensor '%s': %lld outputs are not a multiple of the patch size",
            s[4]->file->path, s[4]->t->name, (long long)s[4]->t->shape[0]);
    return -1;
  }
  c.out_dim = s[4]->t->shape[0] / pp;
  char err[256];
  if (c.heads == 0) {
    rank_convert_problem(p, "%s: tensor '%s': dim %lld is not a multiple of head_dim 128", s[0]->file->path,
            s[0]->t->name, (long long)c.dim);
    return -1;
  }
  if (wan_config_check(&c, err, sizeof err) != 0) {
    rank_convert_problem(p, "%s: inferred config is not supported: %s", ck->label, err);
    return -1;
  }
  ck->config = c;
  return 0;
}

static void check_tensors(checkpoint *ck, problems *p) {
  const wan_config *c = &ck->config;
  for (int g = 0; g < 3; g++) wan_layout_make(c, (wan_group)g, KERN_DTYPE_F32, &ck->layout[g]);
  size_t nslot = (size_t)WAN_MAX_TENSORS * (size_t)(c->layers + 2);
  ck->slot = sp_xmalloc(nslot * sizeof *ck->slot);
  for (size_t i = 0; i < nslot; i++) ck->slot[i] = -1;
  static const rank_st_dtype ok[] = {RANK_ST_F32, RANK_ST_F16, RANK_ST_BF16, RANK_ST_F8_E4M3};
  char key[256];
  for (int i = 0; i < ck->nsrc; i++) {
    src_tensor *s = &ck->src[i];
    if (!s->name) continue;
    const wan_layout *l = &ck->layout[s->g];
    int ti = wan_layout_find(l, s->name);
    int *slot = &ck->slot[slot_base(ck, s->g, s->block) + ti];
    if (*slot >= 0) {
      const src_tensor *o = &ck->src[*slot];
      rank_convert_problem(p, "%s: tensor '%s': duplicate of '%s' in %s", s->file->path, s->t->name,
              o->t->name, o->file->path);
      continue;
    }
    *slot = i;
    rank_convert_check_shape(s->file->path, s->t, l->t[ti].ndim, l->t[ti].shape, p);
    rank_convert_check_dtype(s->file->path, s->t, ok, (int)(sizeof ok / sizeof ok[0]), p);
  }
  for (int g = 0; g < 3; g++) {
    int nb = g == WAN_GROUP_BLOCK ? (int)c->layers : 1;
    const wan_layout *l = &ck->layout[g];
    for (int b = 0; b < nb; b++) {
      const int *slot = &ck->slot[slot_base(ck, (wan_group)g, b)];
      int present = 0;
      for (int t = 0; t < l->count; t++) present += slot[t] >= 0;
      if (g == WAN_GROUP_BLOCK && present == 0) {
        rank_convert_problem(p, "%s: missing block %d: none of its %d tensors is in the checkpoint (a gap in "
                   "the block numbering)", ck->label, b, l->count);
        continue;
      }
      for (int t = 0; t < l->count; t++) {
        if (slot[t] >= 0) continue;
        rank_convert_key_for(ck->style, (wan_group)g, b, l->t[t].name, key, sizeof key);
        rank_convert_problem(p, "%s: missing tensor '%s'", ck->label, key);
      }
    }
  }
}

/* ---- streaming copy ------------------------------------------------------- */

#define CHUNK_BYTES ((size_t)8 << 20) /* source bytes read per pread */

typedef struct progress {
  int on;
  uint64_t done, total;
  double t0, last;
} progress;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void progress_tick(progress *pr, int final) {
  double t = now_s();
  if (!pr->on || (!final && t - pr->last < 2.0)) return;
  pr->last = t;
  double el = t - pr->t0 > 1e-6 ? t - pr->t0 : 1e-6;
  sp_log_info("convert: %.1f / %.1f MB (%.0f%%), %.1f MB/s", pr->done / 1e6, pr->total / 1e6,
              pr->total ? 100.0 * (double)pr->done / (double)pr->total : 100.0,
              pr->done / 1e6 / el);
}

/* Converts n source elements at src to the output dtype at dst: decoded to
 * fp32 by rank_convert_to_f32 (F8 values times scale, convert_impl.h), then
 * one rounding to bf16 where the output is bf16. */
static void convert_elems(rank_st_dtype sd, const unsigned char *src, float scale, kern_dtype od,
                          void *dst, size_t n) {
  if ((sd == RANK_ST_F32 && od == KERN_DTYPE_F32) || (sd == RANK_ST_BF16 && od == KERN_DTYPE_BF16)) {
    memcpy(dst, src, n * kern_dtype_size(od));
    return;
  }
  enum { PIECE = 1024 };
  float f[PIECE];
  const size_t esz = rank_st_dtype_size(sd);
  for (size_t i0 = 0; i0 < n; i0 += PIECE) {
    const size_t m = n - i0 < PIECE ? n - i0 : PIECE;
    rank_convert_to_f32(sd, src + i0 * esz, scale, f, m);
    if (od == KERN_DTYPE_F32) {
      memcpy((unsigned char *)dst + 4 * i0, f, m * 4);
      continue;
    }
    for (size_t k = 0; k < m; k++) {
      const uint16_t h = kern_f32_to_bf16(f[k]); /* f16 -> f32 is exact: one rounding only */
      memcpy((unsigned char *)dst + 2 * (i0 + k), &h, 2);
    }
  }
}

/* The index of the first NaN or infinite value among n converted values of
 * dtype od at p, or n. Checked on the output: a NaN or Inf of the source
 * stays one, and an fp32 value too large for bf16 becomes one. */
static size_t first_nonfinite(kern_dtype od, const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (od == KERN_DTYPE_F32) {
      uint32_t u;
      memcpy(&u, p + 4 * i, 4);
      if ((u & 0x7f800000u) == 0x7f800000u) return i;
    } else {
      uint16_t h;
      memcpy(&h, p + 2 * i, 2);
      if ((h & 0x7f80u) == 0x7f80u) return i;
    }
  }
  return n;
}

/* Reads tensor s converted to od (F32 or BF16) into out, refusing a
 * non-finite value (logged). */
static int read_converted(const src_tensor *s, const wan_tensor *wt, kern_dtype od,
                          unsigned char *chunk, unsigned char *out, progress *pr) {
  size_t esz = rank_st_dtype_size(s->t->dtype), per = CHUNK_BYTES / esz;
  size_t n = (size_t)wt->numel, done = 0, osz = kern_dtype_size(od);
  while (done < n) {
    size_t k = n - done < per ? n - done : per;
    int rc = rank_st_read(s->file, s->t, (uint64_t)done * esz, chunk, k * esz);
    if (rc != SP_OK) return rc;
    convert_elems(s->t->dtype, chunk, s->scale, od, out + done * osz, k);
    size_t bad = first_nonfinite(od, out + done * osz, k);
    if (bad < k) {
      float v;
      if (od == KERN_DTYPE_F32) {
        memcpy(&v, out + (done + bad) * 4, 4);
      } else {
        uint16_t h;
        memcpy(&h, out + (done + bad) * 2, 2);
        v = kern_bf16_to_f32(h);
      }
      sp_log_error("%s: tensor '%s': element %zu is %s%s; a checkpoint with non-finite weights "
                   "is not converted",
                   s->file->path, s->t->name, done + bad, isnan(v) ? "NaN" : "infinite",
                   !isnan(v) && od == KERN_DTYPE_BF16 && s->t->dtype != RANK_ST_BF16 ? " in bf16"
                                                                                     : "");
      return SP_ERR_INPUT;
    }
    done += k;
    pr->done += k * esz;
    progress_tick(pr, 0);
  }
  return SP_OK;
}

static int copy_tensor(rank_model_writer *w, int e, const src_tensor *s, const wan_tensor *wt,
                       kern_dtype od, unsigned char *chunk, unsigned char *out, progress *pr) {
  int rc = read_converted(s, wt, od, chunk, out, pr);
  if (rc != SP_OK) return rc;
  return rank_model_writer_put_expert(w, e, s->g, s->block, s->name, out,
                                      (size_t)wt->numel * kern_dtype_size(od));
}

/* An F8_E4M3 tensor's bytes as they are into q, refusing the NaN
 * pattern (logged). */
static int read_e4m3(const src_tensor *s, const wan_tensor *wt, uint8_t *q, progress *pr) {
  const size_t n = (size_t)wt->numel;
  for (size_t done = 0; done < n;) {
    const size_t k = n - done < CHUNK_BYTES ? n - done : CHUNK_BYTES;
    int rc = rank_st_read(s->file, s->t, (uint64_t)done, q + done, k);
    if (rc != SP_OK) return rc;
    for (size_t i = done; i < done + k; i++)
      if ((q[i] & 0x7fu) == 0x7fu) {
        sp_log_error("%s: tensor '%s': element %zu is NaN; a checkpoint with non-finite weights "
                     "is not converted", s->file->path, s->t->name, i);
        return SP_ERR_INPUT;
      }
    done += k;
    pr->done += k;
    progress_tick(pr, 0);
  }
  return SP_OK;
}

/* A linear weight of an fp8 file (MODEL.md "fp8 weights"): an F8_E4M3
 * source keeps its bytes, its scale_weight (or 1) the scale of every
 * output channel; any other is read in fp32 and quantised per output
 * channel (rank_model_writer_put_value). out: room for the tensor in fp32;
 * tmp: in e4m3. */
static int copy_fp8(rank_model_writer *w, int e, const src_tensor *s, const wan_tensor *wt,
                    unsigned char *chunk, unsigned char *out, uint8_t *tmp, progress *pr) {
  int rc;
  if (s->t->dtype != RANK_ST_F8_E4M3) {
    if ((rc = read_converted(s, wt, KERN_DTYPE_F32, chunk, out, pr)) != SP_OK) return rc;
    return rank_model_writer_put_value(w, e, s->g, s->block, s->name, (const float *)out, tmp);
  }
  if (!(s->scale > 0.0f)) {
    sp_log_error("%s: tensor '%s': its scale_weight is %g; kept in fp8 it would be the scale of "
                 "every output channel, which must be positive (--dtype bf16 dequantises it)",
                 s->file->path, s->t->name, (double)s->scale);
    return SP_ERR_INPUT;
  }
  if ((rc = read_e4m3(s, wt, tmp, pr)) != SP_OK) return rc;
  float *scale = (float *)out;
  for (int64_t o = 0; o < wt->shape[0]; o++) scale[o] = s->scale;
  return rank_model_writer_put_fp8(w, e, s->block, s->name, tmp, scale);
}

/* Metadata keys become root attributes "meta.KEY" (the writer adds the
 * namespace); keys that HDF5 or a terminal would mangle are skipped. */
static int write_metadata(rank_model_writer *w, rank_st_file *const *f, int nf) {
  for (int s = 0; s < nf; s++) {
    for (int i = 0; i < f[s]->h.nmeta; i++) {
      const char *k = f[s]->h.meta_key[i], *v = f[s]->h.meta_val[i];
      int ok = *k && strlen(k) <= 200 && strlen(v) <= 60000 && k[0] != '.';
      for (const char *c = k; ok && *c; c++) ok = *c > 0x20 && *c < 0x7f && *c != '/';
      if (!ok) {
        sp_log_warn("%s: __metadata__ key '%.60s...' skipped (printable ASCII without '/', at "
                    "most 200 bytes, value at most 60000)", f[s]->path, k);
        continue;
      }
      int rc = rank_model_writer_attr(w, k, v);
      if (rc != SP_OK) return rc;
    }
  }
  return SP_OK;
}

/* One opened and checked checkpoint: its files and tensors. */
typedef struct source {
  inputs in;
  checkpoint ck;
  rank_st_file **f;
  int nf;
} source;

static void source_free(source *src) {
  free(src->ck.slot);
  free(src->ck.src);
  rank_convert_inputs_close(&src->in, src->f, src->nf);
  memset(src, 0, sizeof *src);
}

/* Bytes of the checkpoint's tensors, and the largest output tensor (an
 * fp8 file's in fp32: its linear weights are quantised from fp32). */
static void source_sizes(const source *src, kern_dtype od, uint64_t *total, size_t *maxb) {
  if (od == KERN_DTYPE_E4M3) od = KERN_DTYPE_F32;
  const checkpoint *ck = &src->ck;
  const wan_config *c = &ck->config;
  for (int g = 0; g < 3; g++) {
    int nb = g == WAN_GROUP_BLOCK ? (int)c->layers : 1;
    for (int t = 0; t < ck->layout[g].count; t++) {
      size_t ob = (size_t)ck->layout[g].t[t].numel * kern_dtype_size(od);
      if (ob > *maxb) *maxb = ob;
      for (int b = 0; b < nb; b++) {
        const src_tensor *s = &ck->src[ck->slot[slot_base(ck, (wan_group)g, b) + t]];
        *total += s->t->end - s->t->begin;
      }
    }
  }
}

/* Every tensor of src as expert e of the writer's model (od E4M3: an fp8
 * file, its linear weights through copy_fp8, the rest bf16). tmp: room
 * for the largest tensor in e4m3 (an fp8 file only). */
static int write_expert(rank_model_writer *w, int e, const source *src, kern_dtype od,
                        unsigned char *chunk, unsigned char *out, uint8_t *tmp, progress *pr) {
  const kern_dtype rest = od == KERN_DTYPE_E4M3 ? KERN_DTYPE_BF16 : od;
  const checkpoint *ck = &src->ck;
  const wan_config *c = &ck->config;
  int rc = write_metadata(w, src->f, src->nf);
  for (int g = 0; g < 3 && rc == SP_OK; g++) {
    int nb = g == WAN_GROUP_BLOCK ? (int)c->layers : 1;
    for (int b = 0; b < nb && rc == SP_OK; b++) {
      for (int t = 0; t < ck->layout[g].count && rc == SP_OK; t++) {
        const src_tensor *s = &ck->src[ck->slot[slot_base(ck, (wan_group)g, b) + t]];
        const wan_tensor *wt = &ck->layout[g].t[t];
        rc = rank_model_writer_is_fp8(w, (wan_group)g, wt->name)
                 ? copy_fp8(w, e, s, wt, chunk, out, tmp, pr)
                 : copy_tensor(w, e, s, wt, rest, chunk, out, pr);
      }
    }
  }
  return rc;
}

/* Writes the n experts srcs[0..n) (one checked config) into out_path. */
static int write_model(const source *srcs, int n, const char *out_path, kern_dtype od, int show) {
  const wan_config *c = &srcs[0].ck.config;
  const rank_model_experts *x = n > 1 ? &rank_model_a14b_defaults : NULL;
  const char *preset = wan_preset_match(c);
  if (preset && n > 1) preset = strcmp(preset, "wan2.1-14b") == 0 ? "wan2.2-a14b" : NULL;
  rank_model_writer *w = NULL;
  progress pr = {show, 0, 0, now_s(), now_s()};
  size_t maxb = 0;
  for (int e = 0; e < n; e++) source_sizes(&srcs[e], od, &pr.total, &maxb);
  int rc = rank_model_writer_open_experts(out_path, c, od, preset ? preset : "", x, &w);
  if (rc != SP_OK) return rc;
  unsigned char *chunk = sp_xmalloc(CHUNK_BYTES);
  unsigned char *out = sp_xmalloc(maxb ? maxb : 1);
  uint8_t *tmp = od == KERN_DTYPE_E4M3 ? sp_xmalloc(maxb / sizeof(float) + 1) : NULL;
  for (int e = 0; e < n && rc == SP_OK; e++)
    rc = write_expert(w, e, &srcs[e], od, chunk, out, tmp, &pr);
  free(chunk);
  free(out);
  free(tmp);
  if (rc != SP_OK) {
    rank_model_writer_abort(w);
    return rc;
  }
  rc = rank_model_writer_commit(w);
  if (rc == SP_OK) {
    progress_tick(&pr, 1);
    sp_log_info("convert: wrote %s (%s%s, %s)", out_path, preset ? preset : "custom config",
                n > 1 ? ", two experts" : "", od == KERN_DTYPE_E4M3 ? "fp8" : kern_dtype_name(od));
  }
  return rc;
}

/* ---- the whole conversion -------------------------------------------------- */

/* Opens the checkpoint of the inputs into src and checks every tensor.
 * SP_OK, or the status after every problem is logged; the caller frees
 * src (source_free) either way. */
static int prepare(int ninputs, char *const *inputs_arg, const char *out_path, kern_dtype od,
                   source *src) {
  problems p = {0};
  int rc = SP_ERR_INPUT;
  memset(src, 0, sizeof *src);
  inputs *in = &src->in;
  checkpoint *ck = &src->ck;
  rc = rank_convert_inputs_open(ninputs, inputs_arg, in, &src->f, &src->nf);
  if (rc != SP_OK) goto out;
  rank_convert_check_index(in, src->f, src->nf, &p);
  ck->style = detect_style(src->f, src->nf);
  rank_convert_label(src->f, src->nf, ck->label, sizeof ck->label);
  for (int s = 0; s < src->nf; s++) ck->nsrc += src->f[s]->h.count;
  ck->src = sp_xcalloc((size_t)ck->nsrc + 1, sizeof *ck->src);
  int mapped = 0, k = 0;
  for (int s = 0; s < src->nf; s++) {
    for (int i = 0; i < src->f[s]->h.count; i++, k++) {
      src_tensor *st = &ck->src[k];
      st->file = src->f[s];
      st->t = &src->f[s]->h.t[i];
      st->scale = 1.0f;
      st->aux = rank_convert_fp8_aux(st->t->name);
      if (rank_convert_map_key(ck->style, st->t->name, &st->g, &st->block, &st->name) == 0)
        mapped++;
      else
        st->name = NULL;
    }
  }
  if (mapped == 0) {
    sp_log_error("%s: no tensor of a Wan 2.1 T2V model among its %d tensors (a foreign "
                 "architecture?)", in->paths[0], ck->nsrc);
    rc = SP_ERR_INPUT;
    goto out;
  }
  sp_log_info("convert: %d file(s), %d tensors, %s key style", src->nf, ck->nsrc,
              rank_convert_style_name(ck->style));
  for (int i = 0; i < ck->nsrc; i++)
    if (!ck->src[i].name && !ck->src[i].aux)
      rank_convert_problem(&p, "%s: tensor '%s': not a tensor of a Wan 2.1 T2V model (%s keys)",
              ck->src[i].file->path, ck->src[i].t->name, rank_convert_style_name(ck->style));
  if (infer_config(ck, &p) == 0) {
    const wan_config *c = &ck->config;
    sp_log_info("convert: inferred dim %lld, ffn_dim %lld, heads %lld, layers %lld, in %lld, "
                "out %lld, text_dim %lld, freq_dim %lld", (long long)c->dim,
                (long long)c->ffn_dim, (long long)c->heads, (long long)c->layers,
                (long long)c->in_dim, (long long)c->out_dim, (long long)c->text_dim,
                (long long)c->freq_dim);
    check_tensors(ck, &p);
  }
  int nfp8 = 0, nscaled = 0;
  rank_convert_fp8_check_scales(src->f, src->nf, &p);
  for (int i = 0; i < ck->nsrc; i++) {
    src_tensor *st = &ck->src[i];
    if (!st->name) continue;
    if (rank_convert_fp8_scale(src->f, src->nf, st->file, st->t, &st->scale, &p) != 0) continue;
    nfp8 += st->t->dtype == RANK_ST_F8_E4M3;
    nscaled += st->t->dtype == RANK_ST_F8_E4M3 && st->scale != 1.0f;
  }
  if (nfp8 && od == KERN_DTYPE_E4M3)
    sp_log_info("convert: %d fp8 (e4m3fn) tensors, %d of them with a scale_weight other than 1: "
                "the blocks' linear weights kept in fp8 (bytes unchanged, the scale_weight the "
                "scale of every output channel), any other dequantised to bf16", nfp8, nscaled);
  else if (nfp8)
    sp_log_info("convert: %d fp8 (e4m3fn) tensors dequantised to %s, %d of them scaled by a "
                "scale_weight other than 1", nfp8, kern_dtype_name(od), nscaled);
  rc = rank_convert_problems_end(&p, out_path);
out:
  return rc;
}

/* The config fields of two experts that differ, named in err. */
static int same_config(const wan_config *a, const wan_config *b, char *err, size_t n) {
  struct {
    const char *name;
    int64_t x, y;
  } f[] = {{"dim", a->dim, b->dim},           {"ffn_dim", a->ffn_dim, b->ffn_dim},
           {"heads", a->heads, b->heads},     {"layers", a->layers, b->layers},
           {"in_dim", a->in_dim, b->in_dim},  {"out_dim", a->out_dim, b->out_dim},
           {"text_dim", a->text_dim, b->text_dim}, {"freq_dim", a->freq_dim, b->freq_dim},
           {"text_len", a->text_len, b->text_len}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (f[i].x != f[i].y) {
      snprintf(err, n, "%s: high %lld, low %lld", f[i].name, (long long)f[i].x, (long long)f[i].y);
      return -1;
    }
  return 0;
}

int rank_convert_run(int ninputs, char *const *inputs_arg, const char *out_path, kern_dtype od,
                     int progress_on) {
  source src;
  int rc = prepare(ninputs, inputs_arg, out_path, od, &src);
  if (rc == SP_OK) rc = write_model(&src, 1, out_path, od, progress_on);
  source_free(&src);
  return rc;
}

int rank_convert_experts_run(char *const paths[2], const char *out_path, kern_dtype od,
                             int progress_on) {
  source src[2];
  memset(src, 0, sizeof src);
  int rc = SP_OK;
  for (int e = 0; e < 2 && rc == SP_OK; e++) {
    sp_log_info("convert: the %s-noise expert from %s", rank_model_expert_name(2, e), paths[e]);
    rc = prepare(1, &paths[e], out_path, od, &src[e]);
  }
  char err[160];
  if (rc == SP_OK && same_config(&src[0].ck.config, &src[1].ck.config, err, sizeof err) != 0) {
    sp_log_error("--expert: the experts differ in their config (%s): both must have one "
                 "architecture; %s not written", err, out_path);
    rc = SP_ERR_INPUT;
  }
  if (rc == SP_OK) rc = write_model(src, 2, out_path, od, progress_on);
  for (int e = 0; e < 2; e++) source_free(&src[e]);
  return rc;
}
