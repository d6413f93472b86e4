/* The converter's dtype policy (see conv.h): fp8 checkpoints' scales
 * (ComfyUI's fp8_e4m3fn_scaled: KEY.scale_weight, one float, beside each
 * KEY.weight; KEY.scale_input and the scaled_fp8 marker not needed), and
 * the copy of a source tensor into the format the model file stores it in,
 * every value checked finite as stored: one rule for every network. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conv.h"
#include "kern_quant.h"
#include "log.h"

#define CHUNK_BYTES ((size_t)8 << 20) /* source bytes read at a time */

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), k = strlen(tail);
  return n >= k && strcmp(s + n - k, tail) == 0;
}

static int is_fp8(conv_dtype d) { return d == CONV_F8_E4M3 || d == CONV_F8_E5M2; }

/* float8 e5m2: the top byte of an IEEE half, so every value is exact. */
static float e5m2_to_f32(uint8_t b) { return kern_f16_to_f32((uint16_t)(b << 8)); }

/* n source values of dtype dt at src to fp32: exact for the float dtypes;
 * fp8 times scale, the product rounded once. */
static void to_f32(conv_dtype dt, const unsigned char *src, float scale, float *dst, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint16_t h;
    switch (dt) {
    case CONV_F32: memcpy(&dst[i], src + 4 * i, 4); break;
    case CONV_F16: memcpy(&h, src + 2 * i, 2); dst[i] = kern_f16_to_f32(h); break;
    case CONV_BF16: memcpy(&h, src + 2 * i, 2); dst[i] = kern_bf16_to_f32(h); break;
    case CONV_F8_E4M3: dst[i] = kern_fp8_e4m3_to_f32(src[i]) * scale; break;
    default: dst[i] = e5m2_to_f32(src[i]) * scale; break;
    }
  }
}

/* ---- scales ------------------------------------------------------------------ */

/* The source whose checkpoint key is key, or NULL. */
static conv_src *by_key(conv_job *j, const char *key) {
  for (int i = 0; i < j->ck.n; i++)
    if (strcmp(j->src[i].t->key, key) == 0) return &j->src[i];
  return NULL;
}

/* A one-element float tensor's value: 0, or -1 after a problem. */
static int read_scalar(conv_job *j, const conv_tensor *t, float *out) {
  const char *path = conv_path(&j->ck, t);
  if (t->numel != 1 || (t->dtype != CONV_F32 && t->dtype != CONV_F16 && t->dtype != CONV_BF16)) {
    conv_problem(&j->p, "%s: tensor '%s': a scale must be one F32, F16 or BF16 value (it holds "
                        "%llu of %s)", path, t->key, (unsigned long long)t->numel, t->dtype_name);
    return -1;
  }
  unsigned char raw[4];
  if (conv_read(&j->ck, t, 0, raw, t->elem) != SP_OK) {
    j->p.count++; /* logged by the reader */
    return -1;
  }
  to_f32(t->dtype, raw, 1.0f, out, 1);
  if (!(isfinite(*out) && *out > 0.0f)) {
    conv_problem(&j->p, "%s: tensor '%s': the scale is %g; a scale_weight must be finite and "
                        "positive", path, t->key, (double)*out);
    return -1;
  }
  return 0;
}

void conv_scales(conv_job *j) {
  for (int i = 0; i < j->ck.n; i++) {
    const conv_tensor *t = j->src[i].t;
    const char *path = conv_path(&j->ck, t);
    if (is_fp8(t->dtype) && j->src[i].name[0] && !ends_with(t->key, ".weight"))
      conv_problem(&j->p, "%s: tensor '%s': fp8 only for weights (KEY.weight)", path, t->key);
    if (!ends_with(t->key, ".scale_weight")) continue;
    char base[1100];
    snprintf(base, sizeof base, "%.*s.weight", (int)(strlen(t->key) - 13), t->key);
    conv_src *w = by_key(j, base);
    if (!w)
      conv_problem(&j->p, "%s: tensor '%s': a scale without its weight '%s'", path, t->key, base);
    else if (!is_fp8(w->t->dtype))
      conv_problem(&j->p, "%s: tensor '%s' has a scale '%s' but is %s, not fp8 (F8_E4M3, F8_E5M2)",
                   conv_path(&j->ck, w->t), base, t->key, w->t->dtype_name);
    else
      read_scalar(j, t, &w->scale);
  }
}

/* The info line of a GGUF checkpoint's block tensors: how many, by format,
 * and how many of them the file keeps as they are (the quantisable ones of
 * a quant file). */
static void blocks_info(const conv_job *j, const char *root) {
  int by[KERN_DTYPE_COUNT] = {0}, n = 0, kept = 0;
  for (int ti = 0; ti < j->nt; ti++) {
    const conv_tensor *t = j->slot[ti] >= 0 ? j->src[j->slot[ti]].t : NULL;
    if (!t || t->dtype != CONV_BLOCKS) continue;
    by[t->qtype]++;
    n++;
    kept += j->t[ti].quant && strncmp(root, "quant", 5) == 0;
  }
  if (!n) return;
  char list[256] = "";
  for (int d = 0; d < KERN_DTYPE_COUNT; d++)
    if (by[d])
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s %d", list[0] ? ", " : "",
               kern_dtype_name((kern_dtype)d), by[d]);
  sp_log_info("convert: %d GGUF block tensors (%s): %d of the blocks' linear weights kept as "
              "stored, %d dequantised to the file's %s", n, list, kept, n - kept,
              mfile_root_named(root) ? kern_dtype_name(mfile_root_named(root)->rest[0]) : root);
}

void conv_scales_info(const conv_job *j, const char *root) {
  blocks_info(j, root);
  int n4 = 0, n5 = 0, scaled = 0;
  for (int i = 0; i < j->ck.n; i++) {
    if (!j->src[i].name[0]) continue;
    n4 += j->src[i].t->dtype == CONV_F8_E4M3;
    n5 += j->src[i].t->dtype == CONV_F8_E5M2;
    scaled += is_fp8(j->src[i].t->dtype) && j->src[i].scale != 1.0f;
  }
  if (!n4 && !n5) return;
  const char *kinds = n5 ? "e4m3fn, e5m2" : "e4m3fn";
  if (strcmp(root, "fp8") == 0)
    sp_log_info("convert: %d fp8 (%s) tensors, %d of them with a scale_weight other than 1: the "
                "blocks' linear weights kept in fp8 (bytes unchanged, the scale_weight the scale "
                "of every output channel), any other dequantised to bf16", n4 + n5, kinds, scaled);
  else
    sp_log_info("convert: %d fp8 (%s) tensors dequantised to %s, %d of them scaled by a "
                "scale_weight other than 1", n4 + n5, kinds, root, scaled);
}

/* ---- progress -------------------------------------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void conv_progress_tick(conv_progress *pr, int final) {
  double t = now_s();
  if (pr->t0 == 0) pr->t0 = pr->last = t;
  if (!pr->on || (!final && t - pr->last < 2.0)) return;
  pr->last = t;
  double el = t - pr->t0 > 1e-6 ? t - pr->t0 : 1e-6;
  sp_log_info("convert: %.1f / %.1f MB (%.0f%%), %.1f MB/s", pr->done / 1e6, pr->total / 1e6,
              pr->total ? 100.0 * (double)pr->done / (double)pr->total : 100.0,
              pr->done / 1e6 / el);
}

/* ---- the copy --------------------------------------------------------------------- */

/* The stored format a source tensor already is (its bytes as a model file
 * holds them), or KERN_DTYPE_COUNT: none. */
static kern_dtype source_format(const conv_tensor *t) {
  switch (t->dtype) {
  case CONV_F32: return KERN_DTYPE_F32;
  case CONV_F16: return KERN_DTYPE_F16;
  case CONV_BF16: return KERN_DTYPE_BF16;
  case CONV_F8_E4M3: return KERN_DTYPE_E4M3;
  case CONV_BLOCKS: return t->qtype;
  default: return KERN_DTYPE_COUNT;
  }
}

/* 1 when the file stores tensor i in the very format of source t, whose
 * bytes it then takes as they are (a scaled format's scale the source's
 * scale_weight, or 1, for every row: ComfyUI's fp8_e4m3fn weights into an
 * fp8 file; GGUF's blocks and fp16 into a quant file). */
static int same_bytes(const conv_tensor *t, kern_dtype f) { return source_format(t) == f; }

/* A quantisable tensor keeps its source's format when the root dtype
 * allows it that format (GGUF's blocks in a quant file); the rest take the
 * file's. SP_OK or the writer's status. */
static int keep_format(mfile_writer *w, int i, const conv_tensor *t) {
  const kern_dtype f = source_format(t);
  if (!t->keep || !mfile_writer_tensor(w, i)->quant || f == KERN_DTYPE_COUNT ||
      f == mfile_writer_format(w, i) || !mfile_writer_allows(w, i, f))
    return SP_OK;
  return mfile_writer_set_format(w, i, f);
}

/* Logs a value that is not finite: element k of s, v its fp32 value
 * before it was stored as f (infinite in bf16 when only storing made it so). */
static int not_finite(const conv_ckpt *ck, const conv_src *s, uint64_t k, float v,
                      const mfile_format *f) {
  char where[32] = "";
  if (isfinite(v)) snprintf(where, sizeof where, " in %s", f->name);
  sp_log_error("%s: tensor '%s': element %llu is %s%s; a checkpoint with non-finite weights is "
               "not converted", conv_path(ck, s->t), s->t->key, (unsigned long long)k,
               isnan(v) ? "NaN" : "infinite", where);
  return SP_ERR_INPUT;
}

/* Bytes of one row of a block source, and the values a chunk reads: whole
 * rows of blocks, or CHUNK_BYTES of values. */
static uint64_t block_row_bytes(const conv_tensor *t) {
  const kern_qfmt_info *in = kern_qfmt_get(kern_dtype_qfmt(t->qtype));
  return (uint64_t)(t->cols / in->block) * (uint64_t)in->block_bytes;
}
static size_t chunk_values(const conv_tensor *t) {
  if (t->dtype != CONV_BLOCKS) return CHUNK_BYTES / t->elem;
  const uint64_t rows = CHUNK_BYTES / block_row_bytes(t);
  return (size_t)((rows ? rows : 1) * (uint64_t)t->cols);
}
/* Source bytes of n values from value at (whole rows of a block source). */
static uint64_t source_bytes(const conv_tensor *t, uint64_t at, size_t n, uint64_t *off) {
  if (t->dtype != CONV_BLOCKS) {
    *off = at * t->elem;
    return n * t->elem;
  }
  *off = at / (uint64_t)t->cols * block_row_bytes(t);
  return n / (uint64_t)t->cols * block_row_bytes(t);
}

/* Values [at, at + n) of s into f32 (checked finite), through raw: decoded
 * (fp8 times its scale), or a block source's rows dequantised. */
static int read_f32(const conv_ckpt *ck, const conv_src *s, uint64_t at, size_t n,
                    unsigned char *raw, float *f32, conv_progress *pr) {
  uint64_t off;
  const uint64_t nb = source_bytes(s->t, at, n, &off);
  int rc = conv_read(ck, s->t, off, raw, nb);
  if (rc != SP_OK) return rc;
  if (s->t->dtype == CONV_BLOCKS) {
    const kern_qtensor q = {kern_dtype_qfmt(s->t->qtype), raw, NULL,
                            (int64_t)(n / (uint64_t)s->t->cols), s->t->cols};
    kern_quant_dequant_rows_f32(&q, 0, q.rows, f32);
  } else {
    to_f32(s->t->dtype, raw, s->scale, f32, n);
  }
  for (size_t k = 0; k < n; k++)
    if (!isfinite(f32[k]))
      return not_finite(ck, s, at + k, f32[k], mfile_format_of(KERN_DTYPE_F32));
  pr->done += nb;
  conv_progress_tick(pr, 0);
  return SP_OK;
}

/* The source's bytes of a tensor stored in the same format, whole: every
 * value checked finite, then written with the source's scale_weight as
 * each row's scale (a scaled format). */
static int copy_kept_whole(mfile_writer *w, int i, const conv_ckpt *ck, const conv_src *s,
                           conv_progress *pr) {
  const net_tensor *t = mfile_writer_tensor(w, i);
  const kern_dtype fmt = mfile_writer_format(w, i);
  const mfile_format *f = mfile_format_of(fmt);
  unsigned char *raw = sp_xmalloc((size_t)s->t->bytes + 1);
  float *scale = f->scaled ? sp_xmalloc((size_t)t->shape[0] * sizeof *scale) : NULL;
  int rc = conv_read(ck, s->t, 0, raw, (size_t)s->t->bytes);
  const int64_t bad = rc == SP_OK ? f->first_nonfinite(raw, t->numel) : 0;
  if (rc == SP_OK && bad < t->numel) rc = not_finite(ck, s, (uint64_t)bad, NAN, f);
  for (int64_t o = 0; scale && o < t->shape[0]; o++) scale[o] = s->scale;
  pr->done += s->t->bytes;
  if (rc == SP_OK) rc = mfile_writer_put(w, &(mfile_put){i, fmt, raw, 0, t->numel, scale});
  free(scale);
  free(raw);
  return rc;
}

/* A tensor of a quantised or block format, whole: a source of the same
 * format kept (copy_kept_whole); anything else as fp32, quantised by the
 * writer. */
static int copy_whole(mfile_writer *w, int i, const conv_ckpt *ck, const conv_src *s,
                      conv_progress *pr) {
  if (same_bytes(s->t, mfile_writer_format(w, i))) return copy_kept_whole(w, i, ck, s, pr);
  const net_tensor *t = mfile_writer_tensor(w, i);
  const size_t n = (size_t)t->numel, per = chunk_values(s->t);
  unsigned char *raw = sp_xmalloc((size_t)s->t->bytes + 1);
  float *f32 = sp_xmalloc(n * sizeof *f32 + 1);
  int rc = SP_OK;
  for (size_t at = 0; rc == SP_OK && at < n; at += per) {
    const size_t k = n - at < per ? n - at : per;
    uint64_t off;
    source_bytes(s->t, at, k, &off);
    rc = read_f32(ck, s, at, k, raw + off, f32 + at, pr);
  }
  if (rc == SP_OK)
    rc = mfile_writer_put(w, &(mfile_put){i, KERN_DTYPE_F32, f32, 0, (int64_t)n, NULL});
  free(f32);
  free(raw);
  return rc;
}

int conv_copy(mfile_writer *w, int i, const conv_ckpt *ck, const conv_src *s, conv_progress *pr) {
  int rc = keep_format(w, i, s->t);
  if (rc != SP_OK) return rc;
  const net_tensor *t = mfile_writer_tensor(w, i);
  const kern_dtype fmt = mfile_writer_format(w, i);
  const mfile_format *f = mfile_format_of(fmt);
  if (f->scaled || !f->elem) return copy_whole(w, i, ck, s, pr);
  const int keep = same_bytes(s->t, fmt);
  const size_t per = chunk_values(s->t), n = (size_t)t->numel;
  uint64_t off;
  unsigned char *raw = sp_xmalloc((size_t)source_bytes(s->t, 0, per, &off) + 1);
  float *f32 = sp_xmalloc(per * sizeof *f32);
  unsigned char *out = sp_xmalloc(per * f->elem);
  for (size_t at = 0; rc == SP_OK && at < n; at += per) {
    const size_t k = n - at < per ? n - at : per;
    const void *stored = raw;
    if (keep) {
      rc = conv_read(ck, s->t, at * s->t->elem, raw, k * s->t->elem);
      pr->done += k * s->t->elem;
    } else {
      rc = read_f32(ck, s, at, k, raw, f32, pr);
      if (rc != SP_OK) break;
      f->narrow(f32, 1, (int64_t)k, out, NULL);
      stored = out;
    }
    const int64_t bad = rc == SP_OK ? f->first_nonfinite(stored, (int64_t)k) : (int64_t)k;
    if (rc == SP_OK && bad < (int64_t)k) {
      float v = f32[bad];
      if (keep) to_f32(s->t->dtype, raw + (size_t)bad * s->t->elem, 1.0f, &v, 1);
      rc = not_finite(ck, s, at + (uint64_t)bad, v, f);
    }
    if (rc == SP_OK)
      rc = mfile_writer_put(w, &(mfile_put){i, fmt, stored, (int64_t)at, (int64_t)k, NULL});
    conv_progress_tick(pr, 0);
  }
  free(out);
  free(f32);
  free(raw);
  return rc;
}
