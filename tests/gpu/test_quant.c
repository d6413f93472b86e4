/* Quantized weights on the GPU (kern_cuda_quant.h) against their CPU
 * references, table driven as tests/gpu/test_ops.c: a row names the op and
 * its parameters; the op builds inputs and the CPU reference, runs the GPU
 * twice (a rerun must give the same bytes) into NaN-filled buffers with
 * guard bytes after each (common/sp_test_dev.h), and compares.
 *
 * - dequant: every format (kern_quant.h) to bf16, bit for bit against
 *   kern_quant_dequant_rows_bf16 on the same bytes (random block bytes with
 *   finite f16 scales; random fp8 and int8 codes, NaN codes included, with
 *   random row scales), odd row counts, rows not a multiple of 8 wide, and
 *   an output that is not 16-byte aligned (the scalar stores);
 * - quant_i8: the int8 per-token quantiser, bytes and scales equal to
 *   kern_i8_quantize_rows, from fp32 and bf16 input;
 * - w8a8: x arrives bf16 (an activation), quantised per token on the GPU
 *   (kern_cuda_quantize_fp8_rows or _i8_rows; its bytes and scales must
 *   equal the CPU quantiser's), w quantised per output channel on the CPU
 *   (what a model file holds), then kern_cuda_linear_w8a8 on each path.
 *   fp8: against the CPU reference of MODEL.md "fp8 weights" (the
 *   dequantised weight times the fake-quantised input, fp32, then GELU):
 *   relative L2 <= 1e-2 (the GPU applies the scales after the sum, the CPU
 *   before, and rounds to bf16 where the output is bf16). int8: against
 *   kern_cpu_linear_w8a8_i8 (exact integer sums, the same epilogue
 *   arithmetic): bit-exact without an activation (bf16 output: the
 *   reference rounded), within 1e-5 (fp32) or 1e-2 (bf16) with GELU (the
 *   CPU evaluates tanh in double). Each row also prints its error against
 *   the unquantised fp32 linear, for information.
 * fp8 rows need an sm_89+ GPU and the GEMM_SCALES paths and FAST_AUTO
 * sm_90: elsewhere they are listed as skipped. The rows that force a
 * GEMM_SCALES path come last: where cuBLASLt refuses one, the call is
 * fatal; then the FAST_AUTO rows (the stage's --fp8-accum fast), which must
 * take the fast GEMM (GEMM_SCALES_FAST, their note says which they took).
 * Fresh random inputs each run (SP_SEED=n replays).
 *
 *   test_quant [-o OP] [--small] [--bench [JSON]]
 * --small runs the small rows (for compute-sanitizer); --bench times the
 * Wan-14B GEMM shapes instead (tests/gpu/dev/quant_bench.c). Exit 77
 * with one line when there is no CUDA device. */
#include <cuda_runtime_api.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_cpu.h"
#include "kern_cuda.h"
#include "kern_cuda_quant.h"
#include "kern_quant.h"
#include "quant_bench.h"
#include "sp_test_dev.h"

#define SP_TEST_CUDA
#include "sp_test.h"

#define TOL_W8A8 1e-2      /* fp8 W8A8 vs its CPU reference; any bf16 output */
#define TOL_I8_ACT_F32 1e-5 /* int8 with GELU, fp32 output: tanh in fp32 vs double */

typedef enum { QOP_DEQUANT, QOP_QUANT_I8, QOP_W8A8, QOP_COUNT } qop;

typedef struct qcase {
  qop op;
  kern_qfmt fmt;
  int64_t rows;   /* dequant, quant_i8: rows; w8a8: M */
  int64_t cols;   /* dequant, quant_i8: cols; w8a8: K */
  int64_t n;      /* w8a8: N */
  int bf16_in;    /* quant_i8: bf16 input */
  int bf16_out;   /* w8a8: bf16 output (else fp32) */
  int gelu;       /* w8a8: GELU-tanh after the bias */
  int no_bias;    /* w8a8 */
  int misalign;   /* dequant: y offset by 2 bytes (not 16-byte aligned) */
  kern_cuda_w8a8_path path;
  int small;      /* in the --small set */
} qcase;

typedef struct qresult {
  double err, tol;   /* tol 0: bit-exact required (err 0) */
  int det;           /* rerun bit-identical */
  int skipped;       /* needs another GPU */
  int extra_ok;      /* the op's own further checks, said in note */
  char note[160];
} qresult;

static int g_sm;

/* ---- inputs -------------------------------------------------------------- */

/* The f16 scale fields of a block (byte offsets), -1 terminated. */
static const int *f16_fields(kern_qfmt f) {
  static const int q8_0[] = {0, -1}, two[] = {0, 2, -1}, q2k[] = {80, 82, -1},
                   q3k[] = {108, -1}, q6k[] = {208, -1}, none[] = {-1};
  switch (f) {
  case KERN_QFMT_Q8_0: case KERN_QFMT_Q4_0: case KERN_QFMT_Q5_0: return q8_0;
  case KERN_QFMT_Q4_1: case KERN_QFMT_Q5_1: case KERN_QFMT_Q4_K: case KERN_QFMT_Q5_K:
    return two;
  case KERN_QFMT_Q2_K: return q2k;
  case KERN_QFMT_Q3_K: return q3k;
  case KERN_QFMT_Q6_K: return q6k;
  default: return none;
  }
}

/* A random finite f16 bit pattern (exponent below 31). */
static uint16_t rand_f16(void) {
  uint16_t h = (uint16_t)sp_rand_int(0, 0xffff);
  return ((h >> 10) & 31) == 31 ? (uint16_t)(h & ~0x4000u) : h;
}

/* Random bytes of a (rows, cols) tensor of format f with finite f16
 * fields (f16 values finite too); *scale (rows) random positive for a
 * row-scaled format. */
static uint8_t *rand_tensor(kern_qfmt f, int64_t rows, int64_t cols, uint64_t bytes,
                            float **scale) {
  const kern_qfmt_info *in = kern_qfmt_get(f);
  uint8_t *q = sp_test_malloc(bytes);
  for (uint64_t i = 0; i < bytes; i++) q[i] = (uint8_t)sp_rand_int(0, 255);
  if (f == KERN_QFMT_F16)
    for (uint64_t i = 0; i < bytes / 2; i++) {
      const uint16_t h = rand_f16();
      memcpy(q + 2 * i, &h, 2);
    }
  const int *fld = f16_fields(f);
  for (uint64_t b = 0; in->block > 1 && b < bytes / (uint64_t)in->block_bytes; b++)
    for (int j = 0; fld[j] >= 0; j++) {
      const uint16_t h = rand_f16();
      memcpy(q + b * in->block_bytes + fld[j], &h, 2);
    }
  *scale = NULL;
  if (in->row_scale) {
    *scale = sp_test_malloc((size_t)rows * sizeof(float));
    for (int64_t r = 0; r < rows; r++)
      (*scale)[r] = (float)ldexp(sp_rand_uniform(0.5, 1.0), (int)sp_rand_int(-20, 4));
  }
  (void)cols;
  return q;
}

/* ---- ops -------------------------------------------------------------------- */

static const char *path_name(kern_cuda_w8a8_path p) {
  return p == KERN_CUDA_W8A8_GEMM_SCALES        ? "gemm-scales"
         : p == KERN_CUDA_W8A8_GEMM_SCALES_FAST ? "gemm-scales-fast"
         : p == KERN_CUDA_W8A8_EPILOGUE         ? "epilogue"
                                                : "auto";
}


static void op_dequant(const qcase *c, kern_cuda_gemm_ctx *g, qresult *r) {
  uint64_t bytes, sbytes;
  char err[256];
  if (kern_qfmt_bytes(c->fmt, c->rows, c->cols, &bytes, &sbytes, err, sizeof err)) {
    CHECK(0, "dequant: %s", err);
    return;
  }
  float *scale;
  uint8_t *q = rand_tensor(c->fmt, c->rows, c->cols, bytes, &scale);
  const int64_t n = c->rows * c->cols;
  uint16_t *want = sp_test_malloc((size_t)n * 2), *got[2];
  const kern_qtensor th = {c->fmt, q, scale, c->rows, c->cols};
  kern_quant_dequant_rows_bf16(&th, 0, c->rows, want);
  uint8_t *dq = sp_dev(bytes);
  float *ds = scale ? sp_dev(sbytes) : NULL;
  char *dy = sp_dev((size_t)n * 2 + (c->misalign ? 2 : 0));
  uint16_t *y = (uint16_t *)(dy + (c->misalign ? 2 : 0));
  sp_up(dq, q, bytes);
  if (scale) sp_up(ds, scale, sbytes);
  const kern_qtensor td = {c->fmt, dq, ds, c->rows, c->cols};
  for (int rep = 0; rep < 2; rep++) {
    kern_cuda_dequant_bf16(&td, y, 0);
    got[rep] = sp_test_malloc((size_t)n * 2);
    sp_down(got[rep], y, (size_t)n * 2);
  }
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < n; i++)
    if (got[0][i] != want[i] && bad++ == 0) first = i;
  r->det = memcmp(got[0], got[1], (size_t)n * 2) == 0;
  r->err = bad ? fmax((double)bad / (double)n, 1e-30) : 0.0;
  r->tol = 0;
  if (bad)
    snprintf(r->note, sizeof r->note, "%lld values differ; first [%lld, %lld] gpu 0x%04x cpu "
             "0x%04x", (long long)bad, (long long)(first / c->cols), (long long)(first % c->cols),
             got[0][first], want[first]);
  free(q), free(scale), free(want), free(got[0]), free(got[1]);
  (void)g;
}

static void op_quant_i8(const qcase *c, kern_cuda_gemm_ctx *g, qresult *r) {
  const int64_t n = c->rows * c->cols;
  float *x = sp_test_malloc((size_t)n * 4), *want_s = sp_test_malloc((size_t)c->rows * 4);
  float *got_s[2] = {sp_test_malloc((size_t)c->rows * 4), sp_test_malloc((size_t)c->rows * 4)};
  for (int64_t i = 0; i < c->rows; i++) {
    const double mag = i == 1 ? 0.0 : ldexp(1.0, (int)sp_rand_int(-12, 12));
    for (int64_t j = 0; j < c->cols; j++) {
      const float v = (float)(sp_rand_normal() * mag);
      x[i * c->cols + j] = c->bf16_in ? kern_bf16_to_f32(kern_f32_to_bf16(v)) : v;
    }
  }
  int8_t *want = sp_test_malloc((size_t)n), *got[2];
  kern_i8_quantize_rows(x, c->rows, c->cols, want, want_s);
  void *dx = sp_dev((size_t)n * 4);
  if (c->bf16_in) {
    uint16_t *b = sp_test_malloc((size_t)n * 2);
    kern_f32_to_bf16_n(x, b, (size_t)n);
    sp_up(dx, b, (size_t)n * 2);
    free(b);
  } else {
    sp_up(dx, x, (size_t)n * 4);
  }
  int8_t *dq = sp_dev((size_t)n);
  float *ds = sp_dev((size_t)c->rows * 4);
  for (int rep = 0; rep < 2; rep++) {
    kern_cuda_quantize_i8_rows(dx, c->bf16_in ? KERN_DTYPE_BF16 : KERN_DTYPE_F32, c->rows,
                               c->cols, dq, ds, 0);
    got[rep] = sp_test_malloc((size_t)n);
    sp_down(got[rep], dq, (size_t)n);
    sp_down(got_s[rep], ds, (size_t)c->rows * 4);
  }
  int64_t bad = 0, bad_s = 0;
  for (int64_t i = 0; i < n; i++) bad += got[0][i] != want[i];
  for (int64_t i = 0; i < c->rows; i++) bad_s += got_s[0][i] != want_s[i];
  r->det = memcmp(got[0], got[1], (size_t)n) == 0 && memcmp(got_s[0], got_s[1], 4 * c->rows) == 0;
  r->err = bad || bad_s ? fmax((double)(bad + bad_s) / (double)n, 1e-30) : 0.0;
  r->tol = 0;
  snprintf(r->note, sizeof r->note, "%lld codes, %lld scales differ from the CPU",
           (long long)bad, (long long)bad_s);
  free(x), free(want), free(got[0]), free(got[1]), free(want_s), free(got_s[0]), free(got_s[1]);
  (void)g;
}

/* The w8a8 row's CPU side: the weight quantised per output channel into wq
 * (N, K) and sw (N), and the reference y_ref (M, N) fp32 (before output
 * rounding) from x (M, K) and b (N) or NULL, per the format's rule. */
static void w8a8_reference(const qcase *c, const float *x, const float *w, const float *b,
                           void *wq, float *sw, float *xq_want, float *sx_want, float *y_ref) {
  const int64_t M = c->rows, K = c->cols, N = c->n;
  if (c->fmt == KERN_QFMT_E4M3_ROW) {
    float *xh = sp_test_malloc((size_t)(M * K) * 4), *wh = sp_test_malloc((size_t)(N * K) * 4);
    kern_fp8_quantize_rows(w, N, K, wq, sw);
    kern_fp8_dequantize_rows(wq, sw, N, K, wh);
    kern_fp8_quantize_rows(x, M, K, (uint8_t *)xq_want, sx_want);
    memcpy(xh, x, (size_t)(M * K) * 4);
    kern_fp8_fake_quant_rows(xh, M, K);
    kern_cpu_linear(xh, wh, b, y_ref, M, K, N);
    free(xh), free(wh);
  } else {
    kern_i8_quantize_rows(w, N, K, wq, sw);
    kern_i8_quantize_rows(x, M, K, (int8_t *)xq_want, sx_want);
    kern_cpu_linear_w8a8_i8((const int8_t *)xq_want, sx_want, wq, sw, b, y_ref, M, K, N);
  }
  if (c->gelu) kern_cpu_gelu_tanh(y_ref, M * N);
}

static void op_w8a8(const qcase *c, kern_cuda_gemm_ctx *g, qresult *r) {
  const int64_t M = c->rows, K = c->cols, N = c->n;
  const int fp8 = c->fmt == KERN_QFMT_E4M3_ROW;
  const int sm90_only = c->path == KERN_CUDA_W8A8_GEMM_SCALES ||
                        c->path == KERN_CUDA_W8A8_GEMM_SCALES_FAST ||
                        c->path == KERN_CUDA_W8A8_FAST_AUTO;
  if ((fp8 && g_sm < 89) || (sm90_only && g_sm != 90)) {
    r->skipped = 1;
    snprintf(r->note, sizeof r->note, "skipped: needs sm_%s, this GPU is sm_%d",
             sm90_only ? "90" : "89+", g_sm);
    return;
  }
  const kern_dtype yt = c->bf16_out ? KERN_DTYPE_BF16 : KERN_DTYPE_F32;
  float *x = sp_test_malloc((size_t)(M * K) * 4), *w = sp_test_malloc((size_t)(N * K) * 4);
  float *b = c->no_bias ? NULL : sp_test_malloc((size_t)N * 4);
  sp_rand_fill(x, M * K, -2, 2);
  for (int64_t i = 0; i < M * K; i++) x[i] = kern_bf16_to_f32(kern_f32_to_bf16(x[i]));
  sp_rand_fill(w, N * K, -0.05, 0.05);
  if (b) {
    sp_rand_fill(b, N, -0.5, 0.5);
    for (int64_t i = 0; i < N; i++) b[i] = kern_bf16_to_f32(kern_f32_to_bf16(b[i]));
  }
  uint8_t *wq = sp_test_malloc((size_t)(N * K)), *xq_want = sp_test_malloc((size_t)(M * K));
  float *sw = sp_test_malloc((size_t)N * 4), *sx_want = sp_test_malloc((size_t)M * 4);
  float *ref = sp_test_malloc((size_t)(M * N) * 4), *plain = sp_test_malloc((size_t)(M * N) * 4);
  w8a8_reference(c, x, w, b, wq, sw, (float *)xq_want, sx_want, ref);
  kern_cpu_linear(x, w, b, plain, M, K, N); /* unquantised, for information */
  if (c->gelu) kern_cpu_gelu_tanh(plain, M * N);

  uint16_t *xb = sp_test_malloc((size_t)(M * K) * 2), *bb = sp_test_malloc((size_t)N * 2);
  kern_f32_to_bf16_n(x, xb, (size_t)(M * K));
  if (b) kern_f32_to_bf16_n(b, bb, (size_t)N);
  uint16_t *dx = sp_dev((size_t)(M * K) * 2), *db = b ? sp_dev((size_t)N * 2) : NULL;
  uint8_t *dxq = sp_dev((size_t)(M * K)), *dwq = sp_dev((size_t)(N * K));
  float *dsx = sp_dev((size_t)M * 4), *dsw = sp_dev((size_t)N * 4);
  const size_t ybytes = (size_t)(M * N) * kern_dtype_size(yt);
  void *dy = sp_dev(ybytes);
  /* the epilogue path's scratch even for AUTO, so a fallback shows as a path, not a fatal */
  const size_t sbytes =
      kern_cuda_w8a8_scratch_bytes(c->fmt, KERN_CUDA_W8A8_EPILOGUE, M, N, yt, g_sm);
  void *dscr = sbytes ? sp_dev(sbytes) : NULL;
  sp_up(dx, xb, (size_t)(M * K) * 2);
  if (b) sp_up(db, bb, (size_t)N * 2);
  sp_up(dwq, wq, (size_t)(N * K));
  sp_up(dsw, sw, (size_t)N * 4);
  const kern_cuda_w8a8_params p = {
      .fmt = c->fmt, .x_q = dxq, .sx = dsx, .w_q = dwq, .sw = dsw, .bias = db, .y = dy,
      .y_dtype = yt, .M = M, .K = K, .N = N,
      .act = c->gelu ? KERN_CUDA_ACT_GELU_TANH : KERN_CUDA_ACT_NONE, .path = c->path,
      .scratch = dscr, .scratch_bytes = sbytes};
  char *out[2];
  kern_cuda_w8a8_path took = KERN_CUDA_W8A8_AUTO;
  for (int rep = 0; rep < 2; rep++) {
    if (fp8) kern_cuda_quantize_fp8_rows(dx, KERN_DTYPE_BF16, M, K, dxq, dsx, 0);
    else kern_cuda_quantize_i8_rows(dx, KERN_DTYPE_BF16, M, K, (int8_t *)dxq, dsx, 0);
    took = kern_cuda_linear_w8a8(g, &p, 0);
    out[rep] = sp_test_malloc(ybytes);
    sp_down(out[rep], dy, ybytes);
  }
  /* the GPU's activation quantiser against the CPU's */
  uint8_t *xq_got = sp_test_malloc((size_t)(M * K));
  float *sx_got = sp_test_malloc((size_t)M * 4);
  sp_down(xq_got, dxq, (size_t)(M * K));
  sp_down(sx_got, dsx, (size_t)M * 4);
  const int quant_same = memcmp(xq_got, xq_want, (size_t)(M * K)) == 0 &&
                         memcmp(sx_got, sx_want, (size_t)M * 4) == 0;
  r->det = memcmp(out[0], out[1], ybytes) == 0;
  float *got = sp_test_malloc((size_t)(M * N) * 4);
  if (yt == KERN_DTYPE_BF16) kern_bf16_to_f32_n((const uint16_t *)out[0], got, (size_t)(M * N));
  else memcpy(got, out[0], ybytes);
  /* int8 without GELU: the reference's bits (rounded to bf16 where the output is) */
  const int exact = !fp8 && !c->gelu;
  if (exact && yt == KERN_DTYPE_BF16)
    for (int64_t i = 0; i < M * N; i++) ref[i] = kern_bf16_to_f32(kern_f32_to_bf16(ref[i]));
  r->tol = exact ? 0 : fp8 || yt == KERN_DTYPE_BF16 ? TOL_W8A8 : TOL_I8_ACT_F32;
  r->err = exact ? (memcmp(got, ref, (size_t)(M * N) * 4) == 0
                        ? 0.0
                        : fmax(sp_test_rel_l2_f32(got, ref, M * N), 1e-30))
                 : sp_test_rel_l2_f32(got, ref, M * N);
  /* FAST_AUTO (--fp8-accum fast): the fast GEMM taken on these shapes */
  r->extra_ok = quant_same && (c->path != KERN_CUDA_W8A8_FAST_AUTO ||
                               took == KERN_CUDA_W8A8_GEMM_SCALES_FAST);
  snprintf(r->note, sizeof r->note, "took %s; x quantiser %s cpu; vs unquantised fp32 %.2e",
           path_name(took), quant_same ? "==" : "!=", sp_test_rel_l2_f32(got, plain, M * N));
  free(x), free(w), free(b), free(wq), free(xq_want), free(sw), free(sx_want), free(ref);
  free(plain), free(xb), free(bb), free(out[0]), free(out[1]), free(xq_got), free(sx_got);
  free(got);
}

/* ---- the table ----------------------------------------------------------------- */

typedef void (*qop_fn)(const qcase *c, kern_cuda_gemm_ctx *g, qresult *r);
static const struct {
  const char *name;
  qop_fn fn;
} ops[QOP_COUNT] = {
    [QOP_DEQUANT] = {"dequant", op_dequant},
    [QOP_QUANT_I8] = {"quant_i8", op_quant_i8},
    [QOP_W8A8] = {"w8a8", op_w8a8},
};

#define DQ(F, R, C, ...) {.op = QOP_DEQUANT, .fmt = F, .rows = R, .cols = C, __VA_ARGS__}
#define W8(F, M_, K_, N_, ...) \
  {.op = QOP_W8A8, .fmt = F, .rows = M_, .cols = K_, .n = N_, __VA_ARGS__}
static const qcase cases[] = {
    /* every format: odd rows, several blocks; a Wan-14B weight in the k-quants */
    DQ(KERN_QFMT_F32, 7, 40, .small = 1), DQ(KERN_QFMT_F16, 5, 13, .small = 1),
    DQ(KERN_QFMT_BF16, 9, 24, .misalign = 1, .small = 1), DQ(KERN_QFMT_E4M3_ROW, 11, 256, .small = 1),
    DQ(KERN_QFMT_E4M3_ROW, 3, 37, .small = 1), DQ(KERN_QFMT_I8_ROW, 13, 96, .small = 1),
    DQ(KERN_QFMT_Q8_0, 7, 96, .small = 1), DQ(KERN_QFMT_Q8_0, 5120, 5120),
    DQ(KERN_QFMT_Q6_K, 3, 768, .small = 1), DQ(KERN_QFMT_Q5_K, 5, 512, .small = 1),
    DQ(KERN_QFMT_Q5_0, 9, 160, .small = 1), DQ(KERN_QFMT_Q5_1, 3, 64, .small = 1),
    DQ(KERN_QFMT_Q4_K, 7, 256, .small = 1), DQ(KERN_QFMT_Q4_K, 13824, 5120),
    DQ(KERN_QFMT_Q4_K, 5, 512, .misalign = 1, .small = 1), DQ(KERN_QFMT_Q4_0, 11, 96, .small = 1),
    DQ(KERN_QFMT_Q4_1, 3, 32, .small = 1), DQ(KERN_QFMT_Q3_K, 5, 1280, .small = 1),
    DQ(KERN_QFMT_Q2_K, 7, 512, .small = 1), DQ(KERN_QFMT_Q6_K, 5120, 13824),
    {.op = QOP_QUANT_I8, .rows = 5, .cols = 300, .small = 1},
    {.op = QOP_QUANT_I8, .rows = 40, .cols = 5120, .bf16_in = 1},
    {.op = QOP_QUANT_I8, .rows = 7, .cols = 13824},
    /* bf16 rows held in registers (the ffn hidden), and one too wide for that */
    {.op = QOP_QUANT_I8, .rows = 7, .cols = 13824, .bf16_in = 1},
    {.op = QOP_QUANT_I8, .rows = 3, .cols = 32776, .bf16_in = 1},
    /* fp8: the stage's bf16 outputs first (q-like, ffn.0 + GELU, ffn.2), each path */
    W8(KERN_QFMT_E4M3_ROW, 128, 5120, 5120, .bf16_out = 1),
    W8(KERN_QFMT_E4M3_ROW, 128, 5120, 13824, .bf16_out = 1, .gelu = 1),
    W8(KERN_QFMT_E4M3_ROW, 96, 13824, 5120, .bf16_out = 1),
    W8(KERN_QFMT_E4M3_ROW, 77, 1536, 1536, .path = KERN_CUDA_W8A8_EPILOGUE, .bf16_out = 1),
    W8(KERN_QFMT_E4M3_ROW, 64, 5120, 13824, .path = KERN_CUDA_W8A8_EPILOGUE, .gelu = 1,
       .bf16_out = 1),
    W8(KERN_QFMT_E4M3_ROW, 33, 1536, 8960, .gelu = 1, .no_bias = 1),
    W8(KERN_QFMT_E4M3_ROW, 33, 1536, 8960, .path = KERN_CUDA_W8A8_EPILOGUE, .no_bias = 1),
    W8(KERN_QFMT_E4M3_ROW, 16, 256, 640, .bf16_out = 1, .small = 1),
    W8(KERN_QFMT_E4M3_ROW, 5, 256, 64, .path = KERN_CUDA_W8A8_EPILOGUE, .bf16_out = 1,
       .small = 1),
    /* int8: exact rows, then GELU */
    W8(KERN_QFMT_I8_ROW, 64, 5120, 5120, .bf16_out = 1),
    W8(KERN_QFMT_I8_ROW, 77, 1536, 1536),
    W8(KERN_QFMT_I8_ROW, 33, 1536, 8960, .gelu = 1),
    W8(KERN_QFMT_I8_ROW, 33, 1536, 8960, .gelu = 1, .bf16_out = 1, .no_bias = 1),
    W8(KERN_QFMT_I8_ROW, 9, 256, 640, .bf16_out = 1, .small = 1),
    /* last: the path forced (fatal where cuBLASLt refuses it) */
    W8(KERN_QFMT_E4M3_ROW, 77, 1536, 1536, .path = KERN_CUDA_W8A8_GEMM_SCALES, .bf16_out = 1),
    W8(KERN_QFMT_E4M3_ROW, 16, 256, 640, .path = KERN_CUDA_W8A8_GEMM_SCALES, .small = 1),
    W8(KERN_QFMT_E4M3_ROW, 96, 13824, 5120, .path = KERN_CUDA_W8A8_GEMM_SCALES_FAST,
       .bf16_out = 1),
    W8(KERN_QFMT_E4M3_ROW, 64, 5120, 5120, .path = KERN_CUDA_W8A8_GEMM_SCALES_FAST),
    /* the stage's --fp8-accum fast: the fast GEMM required to be taken */
    W8(KERN_QFMT_E4M3_ROW, 77, 1536, 8960, .path = KERN_CUDA_W8A8_FAST_AUTO, .gelu = 1,
       .bf16_out = 1),
    W8(KERN_QFMT_E4M3_ROW, 9, 256, 640, .path = KERN_CUDA_W8A8_FAST_AUTO, .small = 1),
};
#undef DQ
#undef W8

static void describe(const qcase *c, char *s, size_t cap) {
  const char *f = c->op == QOP_QUANT_I8 ? "int8" : kern_qfmt_get(c->fmt)->name;
  if (c->op == QOP_W8A8)
    snprintf(s, cap, "%s M=%lld K=%lld N=%lld %s%s%s%s", f, (long long)c->rows,
             (long long)c->cols, (long long)c->n, path_name(c->path),
             c->bf16_out ? " bf16out" : " f32out", c->gelu ? " gelu" : "",
             c->no_bias ? " nobias" : "");
  else
    snprintf(s, cap, "%s %lld x %lld%s%s", f, (long long)c->rows, (long long)c->cols,
             c->bf16_in ? " bf16in" : "", c->misalign ? " misaligned" : "");
}

static void usage(FILE *f) {
  fprintf(f, "usage: test_quant [-o OP] [--small] [--bench [JSON]]\n"
             "  -o, --op OP     the rows of one op: dequant, quant_i8, w8a8 (default: all)\n"
             "  -s, --small     only the small rows (for compute-sanitizer; default: all)\n"
             "  -b, --bench     time the Wan-14B GEMM shapes (bf16, fp8 and int8 W8A8,\n"
             "                  dequant + bf16) instead; JSON to the file given with -j\n"
             "  -j, --json F    the benchmark's JSON also to F (default: stdout only)\n"
             "  -h, --help      this text\n");
}

int main(int argc, char **argv) {
  const char *only = NULL, *json = NULL;
  int small = 0, bench = 0, ch;
  static const struct option longopts[] = {
      {"op", required_argument, NULL, 'o'}, {"small", no_argument, NULL, 's'},
      {"bench", no_argument, NULL, 'b'},    {"json", required_argument, NULL, 'j'},
      {"help", no_argument, NULL, 'h'},     {0, 0, 0, 0}};
  while ((ch = getopt_long(argc, argv, "o:sbj:h", longopts, NULL)) != -1) {
    if (ch == 'o') only = optarg;
    else if (ch == 's') small = 1;
    else if (ch == 'b') bench = 1;
    else if (ch == 'j') json = optarg;
    else if (ch == 'h') {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (only) {
    int any = 0;
    for (int i = 0; i < QOP_COUNT; i++) any |= strcmp(ops[i].name, only) == 0;
    if (!any) {
      fprintf(stderr, "test_quant: -o %s: no such op\n", only);
      usage(stderr);
      return 2;
    }
  }
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    printf("test_quant: skipped: no CUDA device (cudaGetDeviceCount: %s, %d devices)\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "ok", ndev);
    return 77;
  }
  sp_test_begin("test_quant");
  if (bench) return quant_bench_run(sp_test_seed(), json);
  kern_cuda_gemm_ctx *g = kern_cuda_gemm_ctx_create(0);
  g_sm = kern_cuda_gemm_ctx_sm(g);
  printf("# device sm_%d\n# %-8s %-52s %10s %8s %5s %3s %s\n", g_sm, "op", "case", "err", "tol",
         "guard", "det", "result");
  printf("# err: dequant and quant_i8 the share of values that differ (tol 0: bit-exact);\n"
         "# w8a8 the relative L2 against the CPU reference (tol 0: bit-exact)\n");
  int failed = 0, ran = 0;
  const int ncases = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < ncases; i++) {
    const qcase *c = &cases[i];
    if ((only && strcmp(ops[c->op].name, only) != 0) || (small && !c->small)) continue;
    qresult r = {.extra_ok = 1};
    ops[c->op].fn(c, g, &r);
    const int guard = sp_dev_release();
    const int ok = r.skipped || (guard && r.det && r.extra_ok &&
                                 (r.tol == 0 ? r.err == 0.0 : r.err <= r.tol));
    char desc[128];
    describe(c, desc, sizeof desc);
    printf("  %-8s %-52s %10.3e %8.0e %5s %3s %s%s%s\n", ops[c->op].name, desc, r.err, r.tol,
           guard ? "ok" : "BAD", r.skipped || r.det ? "ok" : "BAD",
           r.skipped ? "skip" : ok ? "pass" : "FAIL", r.note[0] ? "  " : "", r.note);
    fflush(stdout);
    if (!ok)
      fprintf(stderr, "FAIL %s %s: error %.3e, bound %.0e%s; guard %s, rerun %s; %s\n",
              ops[c->op].name, desc, r.err, r.tol, r.tol == 0 ? " (bit-exact)" : "",
              guard ? "intact" : "OVERWRITTEN", r.det ? "identical" : "DIFFERS", r.note);
    failed += !ok;
    ran += !r.skipped;
  }
  kern_cuda_gemm_ctx_destroy(g);
  printf("# %d rows run, %d failed\n", ran, failed);
  return failed || sp_test_failures() ? 1 : 0;
}
