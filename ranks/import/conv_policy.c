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

void conv_scales_info(const conv_job *j, const char *root) {
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

/* Source dtypes a stored format takes byte for byte: copied as they are
 * (a scaled format's scale then the source's scale_weight, or 1, for every
 * row: ComfyUI's fp8_e4m3fn weights into an fp8 file). A new kept format
 * (GGUF's blocks into their own rows) is a line here. */
static const struct {
  conv_dtype src;
  kern_dtype fmt;
} kept[] = {
    {CONV_F32, KERN_DTYPE_F32},
    {CONV_BF16, KERN_DTYPE_BF16},
    {CONV_F8_E4M3, KERN_DTYPE_E4M3},
};

static int same_bytes(conv_dtype d, kern_dtype f) {
  for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
    if (kept[i].src == d && kept[i].fmt == f) return 1;
  return 0;
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

/* Values [at, at + n) of s into f32 (checked finite), through raw. */
static int read_f32(const conv_ckpt *ck, const conv_src *s, uint64_t at, size_t n,
                    unsigned char *raw, float *f32, conv_progress *pr) {
  int rc = conv_read(ck, s->t, at * s->t->elem, raw, n * s->t->elem);
  if (rc != SP_OK) return rc;
  to_f32(s->t->dtype, raw, s->scale, f32, n);
  for (size_t k = 0; k < n; k++)
    if (!isfinite(f32[k]))
      return not_finite(ck, s, at + k, f32[k], mfile_format_of(KERN_DTYPE_F32));
  pr->done += n * s->t->elem;
  conv_progress_tick(pr, 0);
  return SP_OK;
}

/* A tensor of a quantised format, whole: a source it takes byte for byte
 * kept (kept[]) with its scale_weight for every row; anything else as
 * fp32, quantised by the writer. */
static int copy_whole(mfile_writer *w, int i, const conv_ckpt *ck, const conv_src *s,
                      conv_progress *pr) {
  const net_tensor *t = mfile_writer_tensor(w, i);
  const kern_dtype fmt = mfile_writer_format(w, i);
  const size_t n = (size_t)t->numel;
  const int keep = same_bytes(s->t->dtype, fmt);
  unsigned char *raw = sp_xmalloc(n * s->t->elem + 1);
  float *f32 = sp_xmalloc((keep ? (size_t)t->shape[0] : n) * sizeof *f32 + 1);
  int rc = SP_OK;
  if (keep) {
    rc = conv_read(ck, s->t, 0, raw, n * s->t->elem);
    const int64_t bad = rc == SP_OK ? mfile_format_of(fmt)->first_nonfinite(raw, (int64_t)n) : 0;
    if (rc == SP_OK && bad < (int64_t)n)
      rc = not_finite(ck, s, (uint64_t)bad, NAN, mfile_format_of(fmt));
    for (int64_t o = 0; o < t->shape[0]; o++) f32[o] = s->scale;
    pr->done += n * s->t->elem;
    if (rc == SP_OK)
      rc = mfile_writer_put(w, &(mfile_put){i, fmt, raw, 0, (int64_t)n, f32});
  } else {
    for (size_t at = 0; rc == SP_OK && at < n; at += CHUNK_BYTES / s->t->elem) {
      const size_t k = n - at < CHUNK_BYTES / s->t->elem ? n - at : CHUNK_BYTES / s->t->elem;
      rc = read_f32(ck, s, at, k, raw + at * s->t->elem, f32 + at, pr);
    }
    if (rc == SP_OK)
      rc = mfile_writer_put(w, &(mfile_put){i, KERN_DTYPE_F32, f32, 0, (int64_t)n, NULL});
  }
  free(f32);
  free(raw);
  return rc;
}


int conv_copy(mfile_writer *w, int i, const conv_ckpt *ck, const conv_src *s, conv_progress *pr) {
  const net_tensor *t = mfile_writer_tensor(w, i);
  const kern_dtype fmt = mfile_writer_format(w, i);
  const mfile_format *f = mfile_format_of(fmt);
  if (f->scaled || !f->elem) return copy_whole(w, i, ck, s, pr);
  const size_t per = CHUNK_BYTES / s->t->elem, n = (size_t)t->numel;
  unsigned char *raw = sp_xmalloc(per * s->t->elem);
  float *f32 = sp_xmalloc(per * sizeof *f32);
  unsigned char *out = sp_xmalloc(per * f->elem);
  int rc = SP_OK;
  for (size_t at = 0; rc == SP_OK && at < n; at += per) {
    const size_t k = n - at < per ? n - at : per;
    const void *stored = raw;
    if (same_bytes(s->t->dtype, fmt)) {
      rc = conv_read(ck, s->t, at * s->t->elem, raw, k * s->t->elem);
      pr->done += k * s->t->elem;
    } else {
      rc = conv_read(ck, s->t, at * s->t->elem, raw, k * s->t->elem);
      if (rc != SP_OK) break;
      to_f32(s->t->dtype, raw, s->scale, f32, k);
      f->narrow(f32, 1, (int64_t)k, out, NULL);
      stored = out;
      pr->done += k * s->t->elem;
    }
    const int64_t bad = rc == SP_OK ? f->first_nonfinite(stored, (int64_t)k) : (int64_t)k;
    if (rc == SP_OK && bad < (int64_t)k) {
      float v = f32[bad];
      if (same_bytes(s->t->dtype, fmt))
        to_f32(s->t->dtype, raw + (size_t)bad * s->t->elem, 1.0f, &v, 1);
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
