/* The stored formats and the root dtypes (see mfile_format.h). */
#include "mfile_format.h"

#include <math.h>
#include <string.h>

#include "kern_quant.h"

/* ---- the rows ------------------------------------------------------------- */

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

/* The formats of kern_quant.h's table (fp16, int8, GGUF's blocks): widened
 * by its dequantisers, the one decoding the GPU's matches bit for bit. */
static kern_qtensor qtensor(kern_dtype d, const void *src, const float *scale, int64_t rows,
                            int64_t cols) {
  return (kern_qtensor){kern_dtype_qfmt(d), src, scale, rows, cols};
}
#define Q_WIDEN(fn, d)                                                                      \
  static void fn(const void *src, const float *scale, int64_t rows, int64_t cols,          \
                 float *dst) {                                                             \
    const kern_qtensor t = qtensor(d, src, scale, rows, cols);                             \
    kern_quant_dequant_rows_f32(&t, 0, rows, dst);                                         \
  }
Q_WIDEN(f16_widen, KERN_DTYPE_F16)
Q_WIDEN(i8_widen, KERN_DTYPE_I8)
Q_WIDEN(q8_0_widen, KERN_DTYPE_Q8_0)
Q_WIDEN(q6_k_widen, KERN_DTYPE_Q6_K)
Q_WIDEN(q5_k_widen, KERN_DTYPE_Q5_K)
Q_WIDEN(q5_0_widen, KERN_DTYPE_Q5_0)
Q_WIDEN(q5_1_widen, KERN_DTYPE_Q5_1)
Q_WIDEN(q4_k_widen, KERN_DTYPE_Q4_K)
Q_WIDEN(q4_0_widen, KERN_DTYPE_Q4_0)
Q_WIDEN(q4_1_widen, KERN_DTYPE_Q4_1)
Q_WIDEN(q3_k_widen, KERN_DTYPE_Q3_K)
Q_WIDEN(q2_k_widen, KERN_DTYPE_Q2_K)
#undef Q_WIDEN

static void f16_narrow(const float *src, int64_t rows, int64_t cols, void *dst, float *scale) {
  (void)scale;
  uint16_t *o = dst;
  for (int64_t i = 0; i < rows * cols; i++) o[i] = kern_f32_to_f16(src[i]);
}
static int64_t f16_nonfinite(const void *p, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint16_t h;
    memcpy(&h, (const char *)p + 2 * i, 2);
    if ((h & 0x7c00u) == 0x7c00u) return i;
  }
  return n;
}

static void i8_narrow(const float *src, int64_t rows, int64_t cols, void *dst, float *scale) {
  kern_i8_quantize_rows(src, rows, cols, dst, scale);
}
static int64_t i8_nonfinite(const void *p, int64_t n) {
  (void)p;
  return n; /* every code is a number */
}

/* A block format's values, a few blocks at a time (rows do not matter:
 * every row is whole blocks). */
static int64_t blocks_nonfinite(kern_dtype d, const void *p, int64_t n) {
  const kern_qfmt_info *in = kern_qfmt_get(kern_dtype_qfmt(d));
  enum { CHUNK = 4096 };
  float v[CHUNK];
  for (int64_t at = 0; at < n; at += CHUNK) {
    const int64_t k = n - at < CHUNK ? n - at : CHUNK;
    const kern_qtensor t = qtensor(d, (const uint8_t *)p + at / in->block * in->block_bytes,
                                   NULL, 1, k);
    kern_quant_dequant_rows_f32(&t, 0, 1, v);
    for (int64_t i = 0; i < k; i++)
      if (!isfinite(v[i])) return at + i;
  }
  return n;
}
#define Q_NONFINITE(fn, d) \
  static int64_t fn(const void *p, int64_t n) { return blocks_nonfinite(d, p, n); }
Q_NONFINITE(q8_0_nonfinite, KERN_DTYPE_Q8_0)
Q_NONFINITE(q6_k_nonfinite, KERN_DTYPE_Q6_K)
Q_NONFINITE(q5_k_nonfinite, KERN_DTYPE_Q5_K)
Q_NONFINITE(q5_0_nonfinite, KERN_DTYPE_Q5_0)
Q_NONFINITE(q5_1_nonfinite, KERN_DTYPE_Q5_1)
Q_NONFINITE(q4_k_nonfinite, KERN_DTYPE_Q4_K)
Q_NONFINITE(q4_0_nonfinite, KERN_DTYPE_Q4_0)
Q_NONFINITE(q4_1_nonfinite, KERN_DTYPE_Q4_1)
Q_NONFINITE(q3_k_nonfinite, KERN_DTYPE_Q3_K)
Q_NONFINITE(q2_k_nonfinite, KERN_DTYPE_Q2_K)
#undef Q_NONFINITE

static void q8_0_narrow(const float *src, int64_t rows, int64_t cols, void *dst, float *scale) {
  (void)scale;
  kern_q8_0_quantize_rows(src, rows, cols, dst);
}

#define BLOCKS(d, name, fn) {d, name, 0, 0, 0, fn##_widen, NULL, fn##_nonfinite}
static const mfile_format formats[] = {
    {KERN_DTYPE_F32, "fp32", 1, 4, 0, f32_widen, f32_narrow, f32_nonfinite},
    {KERN_DTYPE_BF16, "bf16", 0, 2, 0, bf16_widen, bf16_narrow, bf16_nonfinite},
    /* MODEL.md "fp8 weights": e4m3 bytes, a scale per output channel */
    {KERN_DTYPE_E4M3, "fp8_e4m3", 0, 1, 1, e4m3_widen, e4m3_narrow, e4m3_nonfinite},
    {KERN_DTYPE_F16, "fp16", 0, 2, 0, f16_widen, f16_narrow, f16_nonfinite},
    /* MODEL.md "int8 weights": int8 codes as bytes, a scale per output channel */
    {KERN_DTYPE_I8, "int8", 0, 1, 1, i8_widen, i8_narrow, i8_nonfinite},
    /* MODEL.md "GGUF weights": ggml's blocks as GGUF holds them */
    /* Q8_0 also quantised here (ggml's rule: kern_q8_0_quantize_rows) */
    {KERN_DTYPE_Q8_0, "q8_0", 0, 0, 0, q8_0_widen, q8_0_narrow, q8_0_nonfinite},
    BLOCKS(KERN_DTYPE_Q6_K, "q6_k", q6_k),
    BLOCKS(KERN_DTYPE_Q5_K, "q5_k", q5_k), BLOCKS(KERN_DTYPE_Q5_0, "q5_0", q5_0),
    BLOCKS(KERN_DTYPE_Q5_1, "q5_1", q5_1), BLOCKS(KERN_DTYPE_Q4_K, "q4_k", q4_k),
    BLOCKS(KERN_DTYPE_Q4_0, "q4_0", q4_0), BLOCKS(KERN_DTYPE_Q4_1, "q4_1", q4_1),
    BLOCKS(KERN_DTYPE_Q3_K, "q3_k", q3_k), BLOCKS(KERN_DTYPE_Q2_K, "q2_k", q2_k),
};
#undef BLOCKS
enum { N_FORMATS = sizeof formats / sizeof formats[0] };

const mfile_format *mfile_format_of(kern_dtype dtype) {
  for (int i = 0; i < N_FORMATS; i++)
    if (formats[i].dtype == dtype) return &formats[i];
  return NULL;
}

int64_t mfile_tensor_rows(const net_tensor *t) { return t->ndim ? t->shape[0] : 1; }
int64_t mfile_tensor_cols(const net_tensor *t) { return t->numel / mfile_tensor_rows(t); }

int mfile_format_block(const mfile_format *f) {
  return kern_qfmt_get(kern_dtype_qfmt(f->dtype))->block;
}

uint64_t mfile_row_bytes(const mfile_format *f, int64_t cols) {
  const kern_qfmt_info *in = kern_qfmt_get(kern_dtype_qfmt(f->dtype));
  return (uint64_t)(cols / in->block) * (uint64_t)in->block_bytes;
}

int mfile_format_fits(const mfile_format *f, const net_tensor *t) {
  return mfile_tensor_cols(t) % mfile_format_block(f) == 0;
}

uint64_t mfile_format_bytes(const mfile_format *f, const net_tensor *t) {
  return (uint64_t)mfile_tensor_rows(t) * mfile_row_bytes(f, mfile_tensor_cols(t));
}

int mfile_format_dims(const mfile_format *f, const net_tensor *t, int64_t *dims) {
  if (f->elem) {
    for (int d = 0; d < t->ndim; d++) dims[d] = t->shape[d];
    return t->ndim;
  }
  dims[0] = mfile_tensor_rows(t);
  dims[1] = (int64_t)mfile_row_bytes(f, mfile_tensor_cols(t));
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
    /* MODEL.md "int8 weights": the quantisable linear weights int8, the rest bf16 */
    {"int8", 1, {KERN_DTYPE_BF16}, 1, {KERN_DTYPE_I8}},
    /* MODEL.md "GGUF weights": the quantisable linear weights in any of GGUF's
     * formats (a GGUF checkpoint's bytes as they are), the rest bf16 or fp32 */
    {"quant", 1, {KERN_DTYPE_BF16}, 13,
     {KERN_DTYPE_BF16, KERN_DTYPE_F16, KERN_DTYPE_F32, KERN_DTYPE_Q8_0, KERN_DTYPE_Q6_K,
      KERN_DTYPE_Q5_K, KERN_DTYPE_Q5_0, KERN_DTYPE_Q5_1, KERN_DTYPE_Q4_K, KERN_DTYPE_Q4_0,
      KERN_DTYPE_Q4_1, KERN_DTYPE_Q3_K, KERN_DTYPE_Q2_K}},
    {"quant-fp32", 1, {KERN_DTYPE_F32}, 13,
     {KERN_DTYPE_F32, KERN_DTYPE_BF16, KERN_DTYPE_F16, KERN_DTYPE_Q8_0, KERN_DTYPE_Q6_K,
      KERN_DTYPE_Q5_K, KERN_DTYPE_Q5_0, KERN_DTYPE_Q5_1, KERN_DTYPE_Q4_K, KERN_DTYPE_Q4_0,
      KERN_DTYPE_Q4_1, KERN_DTYPE_Q3_K, KERN_DTYPE_Q2_K}},
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
