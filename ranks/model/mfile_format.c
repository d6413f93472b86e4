/* The stored formats and the root dtypes (see mfile_format.h). */
#include "mfile_format.h"

#include <math.h>
#include <string.h>

/* ---- the rows ------------------------------------------------------------- */

static uint64_t f32_row(int64_t cols) { return (uint64_t)cols * 4; }
static uint64_t bf16_row(int64_t cols) { return (uint64_t)cols * 2; }
static uint64_t e4m3_row(int64_t cols) { return (uint64_t)cols; }

static void f32_widen(const void *src, const float *scale, int64_t rows, int64_t cols,
                      float *dst) {
  (void)scale;
  memmove(dst, src, (size_t)(rows * cols) * sizeof(float));
}
static void f32_narrow(const float *src, int64_t rows, int64_t cols, void *dst, float *scale) {
  (void)scale;
  memmove(dst, src, (size_t)(rows * cols) * sizeof(float));
}
static int64_t f32_nonfinite(const void *p, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, (const char *)p + 4 * i, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return i;
  }
  return n;
}

static void bf16_widen(const void *src, const float *scale, int64_t rows, int64_t cols,
                       float *dst) {
  (void)scale;
  kern_bf16_to_f32_n(src, dst, (size_t)(rows * cols));
}
static void bf16_narrow(const float *src, int64_t rows, int64_t cols, void *dst, float *scale) {
  (void)scale;
  kern_f32_to_bf16_n(src, dst, (size_t)(rows * cols));
}
static int64_t bf16_nonfinite(const void *p, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint16_t h;
    memcpy(&h, (const char *)p + 2 * i, 2);
    if ((h & 0x7f80u) == 0x7f80u) return i;
  }
  return n;
}

static void e4m3_widen(const void *src, const float *scale, int64_t rows, int64_t cols,
                       float *dst) {
  kern_fp8_dequantize_rows(src, scale, rows, cols, dst);
}
static void e4m3_narrow(const float *src, int64_t rows, int64_t cols, void *dst, float *scale) {
  kern_fp8_quantize_rows(src, rows, cols, dst, scale);
}
static int64_t e4m3_nonfinite(const void *p, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if ((((const uint8_t *)p)[i] & 0x7fu) == 0x7fu) return i; /* e4m3 has NaN only */
  return n;
}

static const mfile_format formats[] = {
    {KERN_DTYPE_F32, "fp32", 1, 4, f32_row, 0, f32_widen, f32_narrow, f32_nonfinite},
    {KERN_DTYPE_BF16, "bf16", 0, 2, bf16_row, 0, bf16_widen, bf16_narrow, bf16_nonfinite},
    /* MODEL.md "fp8 weights": e4m3 bytes, a scale per output channel */
    {KERN_DTYPE_E4M3, "fp8_e4m3", 0, 1, e4m3_row, 1, e4m3_widen, e4m3_narrow, e4m3_nonfinite},
};
enum { N_FORMATS = sizeof formats / sizeof formats[0] };

const mfile_format *mfile_format_of(kern_dtype dtype) {
  for (int i = 0; i < N_FORMATS; i++)
    if (formats[i].dtype == dtype) return &formats[i];
  return NULL;
}

const mfile_format *mfile_format_named(const char *name) {
  for (int i = 0; i < N_FORMATS; i++)
    if (strcmp(formats[i].name, name) == 0) return &formats[i];
  return NULL;
}

int64_t mfile_tensor_rows(const net_tensor *t) { return t->ndim ? t->shape[0] : 1; }
int64_t mfile_tensor_cols(const net_tensor *t) { return t->numel / mfile_tensor_rows(t); }

uint64_t mfile_format_bytes(const mfile_format *f, const net_tensor *t) {
  return (uint64_t)mfile_tensor_rows(t) * f->row_bytes(mfile_tensor_cols(t));
}

int mfile_format_dims(const mfile_format *f, const net_tensor *t, int64_t *dims) {
  if (f->elem) {
    for (int d = 0; d < t->ndim; d++) dims[d] = t->shape[d];
    return t->ndim;
  }
  dims[0] = mfile_tensor_rows(t);
  dims[1] = (int64_t)f->row_bytes(mfile_tensor_cols(t));
  return 2;
}

int64_t mfile_bad_scale(const float *scale, int64_t n) {
  for (int64_t o = 0; o < n; o++)
    if (!(isfinite(scale[o]) && scale[o] > 0.0f)) return o;
  return -1;
}

/* ---- root dtypes ----------------------------------------------------------- */

static const mfile_root roots[] = {
    {"bf16", 1, {KERN_DTYPE_BF16}, 1, {KERN_DTYPE_BF16}},
    {"fp32", 1, {KERN_DTYPE_F32}, 1, {KERN_DTYPE_F32}},
    /* MODEL.md "fp8 weights": the quantisable linear weights e4m3, the rest bf16 */
    {"fp8", 1, {KERN_DTYPE_BF16}, 1, {KERN_DTYPE_E4M3}},
};
enum { N_ROOTS = sizeof roots / sizeof roots[0] };

const mfile_root *mfile_root_named(const char *name) {
  for (int i = 0; i < N_ROOTS; i++)
    if (strcmp(roots[i].name, name) == 0) return &roots[i];
  return NULL;
}

int mfile_root_allowed(const mfile_root *r, const net_tensor *t, const kern_dtype **allowed) {
  *allowed = t->quant ? r->quant : r->rest;
  return t->quant ? r->nquant : r->nrest;
}

kern_dtype mfile_root_format(const mfile_root *r, const net_tensor *t) {
  const kern_dtype *a;
  mfile_root_allowed(r, t, &a);
  return a[0];
}
