/* Every CUDA op (kern_cuda.h) against its CPU version (kern_cpu.h), table
 * driven in the style of ggml's test-backend-ops, issue 9.
 *
 * For each (op, shape) row of the table:
 * - err: relative L2 of the GPU output against the CPU fp32 reference on
 *   the fp32 inputs;
 * - base, where the op has a bf16 path: the error of a plain bf16
 *   implementation (the inputs the GPU gets rounded to bf16, fp32 on the
 *   CPU, the output rounded where the GPU's is bf16); the GPU must be within
 *   2x of it (+ a small epsilon) and under 1e-2 (STYLE.md 9); fp32 paths
 *   must be under 1e-5; copies and conversions must be bit-exact;
 * - guard bytes after every device buffer are untouched, outputs start as
 *   NaN (so an element not written fails), and a rerun is bit-identical.
 * Inputs are fresh random numbers each run; the seed is printed (KT_SEED
 * reruns one).
 *
 * Rows with a split run the op in calls of that many rows on offset
 * pointers (the way a caller chunks activations); rows with a kernel name
 * run that benchmark variant (launch/bench/dev/norm_variants.h).
 *
 *   test_ops            all rows       test_ops -o OP   the rows of one op
 *   test_ops --small    small rows only, for compute-sanitizer memcheck
 *   test_ops --bench    time the residual-stream row ops at the Wan shapes
 *                       (every kernel variant, checked before it is timed;
 *                       launch/bench/dev/ops_bench.c)
 * Exit 77 with one line when there is no CUDA device. */
#include <cuda_runtime_api.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "../kernels/kt.h"
#pragma GCC diagnostic pop
#include "kern_cpu.h"
#include "kern_cuda.h"
#include "kern_dtype.h"
#include "norm_variants.h"

#define TOL_BF16 1e-2
#define TOL_F32 1e-5
#define BASE_EPS 2e-4 /* slack over 2x the plain bf16 error */
#define TOL_SAME 2e-5 /* fp32 accumulation in another order, K <= 13824 */
#define GUARD 256     /* bytes after every device buffer */
#define GUARD_BYTE 0xA5
#define MAX_BUFS 32

#define SP_TEST_CUDA
#include "sp_check.h"

/* ---- device buffers with guards --------------------------------------- */

static struct { char *p; size_t bytes; } bufs[MAX_BUFS];
static int nbufs;

/* bytes of 0xFF (NaN as fp32 and as bf16) followed by GUARD guard bytes. */
static void *dev(size_t bytes) {
  if (nbufs == MAX_BUFS) {
    fprintf(stderr, "FAIL: more than %d device buffers in one case\n", MAX_BUFS);
    exit(1);
  }
  char *p;
  CK(cudaMalloc((void **)&p, bytes + GUARD));
  CK(cudaMemset(p, 0xFF, bytes));
  CK(cudaMemset(p + bytes, GUARD_BYTE, GUARD));
  bufs[nbufs].p = p;
  bufs[nbufs].bytes = bytes;
  nbufs++;
  return p;
}

/* 1 when every buffer's guard is intact; frees them all. */
static int dev_release(void) {
  int ok = 1;
  unsigned char g[GUARD];
  for (int i = 0; i < nbufs; i++) {
    CK(cudaMemcpy(g, bufs[i].p + bufs[i].bytes, GUARD, cudaMemcpyDeviceToHost));
    for (int j = 0; j < GUARD; j++)
      if (g[j] != GUARD_BYTE) ok = 0;
    CK(cudaFree(bufs[i].p));
  }
  nbufs = 0;
  return ok;
}

static void up(void *d, const void *h, size_t bytes) {
  CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
}
static void down(void *h, const void *d, size_t bytes) {
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}

/* ---- host helpers ------------------------------------------------------ */

static void *hmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "FAIL: out of host memory (%zu bytes)\n", bytes);
    exit(1);
  }
  return p;
}
static float *hf(int64_t n) { return hmalloc((size_t)n * sizeof(float)); }
static uint16_t *hb(int64_t n) { return hmalloc((size_t)n * sizeof(uint16_t)); }

static float *rand_f(int64_t n, double lo, double hi) {
  float *p = hf(n);
  kt_fill(p, n, lo, hi);
  return p;
}
/* Values that are exactly bf16 (weights are stored bf16). */
static float *rand_bf16_valued(int64_t n, double lo, double hi) {
  float *p = rand_f(n, lo, hi);
  for (int64_t i = 0; i < n; i++) p[i] = kern_bf16_to_f32(kern_f32_to_bf16(p[i]));
  return p;
}
static uint16_t *to_bf16(const float *x, int64_t n) {
  uint16_t *b = hb(n);
  kern_f32_to_bf16_n(x, b, (size_t)n);
  return b;
}
static float *from_bf16(const uint16_t *b, int64_t n) {
  float *x = hf(n);
  kern_bf16_to_f32_n(b, x, (size_t)n);
  return x;
}
static float *round_bf16(const float *x, int64_t n) {
  float *r = hf(n);
  for (int64_t i = 0; i < n; i++) r[i] = kern_bf16_to_f32(kern_f32_to_bf16(x[i]));
  return r;
}
static float *dup_f(const float *x, int64_t n) {
  float *r = hf(n);
  memcpy(r, x, (size_t)n * sizeof *r);
  return r;
}

/* Relative L2 against ref; +Inf when got has a NaN or Inf (unwritten). */
static double rel_l2(const float *got, const float *ref, int64_t n) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(got[i])) return INFINITY;
    double d = (double)got[i] - (double)ref[i];
    num += d * d;
    den += (double)ref[i] * (double)ref[i];
  }
  return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

/* ---- the table --------------------------------------------------------- */

typedef struct result {
  double err, base, tol; /* base < 0: no bf16 baseline; tol 0: bit-exact */
  double same;           /* fp32-output GEMMs: error against the CPU on the
                            very inputs the GPU had (< 0: not measured) */
  int det;               /* rerun bit-identical */
  int extra_ok;          /* the op's own further checks, said in note */
  char note[64];
} result;

typedef struct op_case op_case;
typedef void (*op_fn)(const op_case *c, kern_cuda_gemm_ctx *g, result *r);
struct op_case {
  const char *op;
  op_fn fn;
  int64_t a, b, c, d, e; /* meaning per op, see each function */
  int small;             /* in the --small set (for compute-sanitizer) */
  int64_t split;         /* rows per call, offset pointers (0: one call) */
  const char *kernels;   /* the row ops' variant (norm_variants.h), or NULL */
};

/* The rows of call i of a case that splits `rows` rows into calls of
 * c->split rows: *r0 the first, returns the count (0: no more calls). */
static int64_t call_rows(const op_case *c, int64_t rows, int i, int64_t *r0) {
  const int64_t per = c->split > 0 ? c->split : (rows > 0 ? rows : 1);
  *r0 = (int64_t)i * per;
  return *r0 >= rows ? 0 : (rows - *r0 < per ? rows - *r0 : per);
}

/* A GPU output run twice (fresh inputs each time) must give the same bytes. */
static int same_bytes(const void *x, const void *y, size_t n) { return memcmp(x, y, n) == 0; }

/* linear: a = M, b = K, c = N, d = output dtype (0 fp32, 1 bf16),
 * e = 0 bias, 1 bias + GELU-tanh, 2 no bias. */
static void op_linear(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t M = c->a, K = c->b, N = c->c;
  const kern_dtype yt = c->d ? KERN_DTYPE_BF16 : KERN_DTYPE_F32;
  const int gelu = c->e == 1, has_b = c->e != 2;
  float *x = rand_f(M * K, -1, 1);                       // (M, K)
  float *w = rand_bf16_valued(N * K, -0.05, 0.05);       // (N, K)
  float *b = has_b ? rand_bf16_valued(N, -0.5, 0.5) : NULL; // (N)
  float *ref = hf(M * N), *base = hf(M * N);             // (M, N)
  kern_cpu_linear(x, w, b, ref, M, K, N);
  float *xr = round_bf16(x, M * K);
  kern_cpu_linear(xr, w, b, base, M, K, N);
  if (gelu) {
    kern_cpu_gelu_tanh(ref, M * N);
    kern_cpu_gelu_tanh(base, M * N);
  }
  if (yt == KERN_DTYPE_BF16) {
    float *t = round_bf16(base, M * N);
    free(base);
    base = t;
  }
  uint16_t *xb = to_bf16(x, M * K), *wb = to_bf16(w, N * K), *bb = has_b ? to_bf16(b, N) : NULL;
  uint16_t *dx = dev((size_t)M * K * 2), *dw = dev((size_t)N * K * 2);
  uint16_t *db = has_b ? dev((size_t)N * 2) : NULL;
  const size_t ybytes = (size_t)M * N * kern_dtype_size(yt);
  void *dy = dev(ybytes);
  up(dx, xb, (size_t)M * K * 2);
  up(dw, wb, (size_t)N * K * 2);
  if (has_b) up(db, bb, (size_t)N * 2);
  char *out[2];
  for (int rep = 0; rep < 2; rep++) {
    kern_cuda_linear(g, dx, dw, db, dy, yt, M, K, N,
                     gelu ? KERN_CUDA_ACT_GELU_TANH : KERN_CUDA_ACT_NONE, 0);
    out[rep] = hmalloc(ybytes);
    down(out[rep], dy, ybytes);
  }
  r->det = same_bytes(out[0], out[1], ybytes);
  float *got = yt == KERN_DTYPE_F32 ? (float *)out[0] : from_bf16((uint16_t *)out[0], M * N);
  r->err = rel_l2(got, ref, M * N);
  r->base = rel_l2(base, ref, M * N);
  r->tol = TOL_BF16;
  /* With fp32 output only the summation order differs from base: this is
   * what would catch a wrong epilogue (an erf GELU, a missing bias), which
   * the bf16-level tolerance alone could not. */
  r->same = yt == KERN_DTYPE_F32 ? rel_l2(got, base, M * N) : -1;
  if (got != (float *)out[0]) free(got);
  free(out[0]); free(out[1]);
  free(x); free(w); free(b); free(ref); free(base); free(xr); free(xb); free(wb); free(bb);
}

/* linear_f32: a = M, b = K, c = N (fp32 input, bf16 weights, fp32 out). */
static void op_linear_f32(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t M = c->a, K = c->b, N = c->c;
  float *x = rand_f(M * K, -1, 1), *w = rand_bf16_valued(N * K, -0.05, 0.05);
  float *b = rand_bf16_valued(N, -0.5, 0.5), *ref = hf(M * N);
  kern_cpu_linear(x, w, b, ref, M, K, N);
  uint16_t *wb = to_bf16(w, N * K), *bb = to_bf16(b, N);
  float *dx = dev((size_t)M * K * 4), *dy = dev((size_t)M * N * 4);
  uint16_t *dw = dev((size_t)N * K * 2), *db = dev((size_t)N * 2);
  up(dx, x, (size_t)M * K * 4);
  up(dw, wb, (size_t)N * K * 2);
  up(db, bb, (size_t)N * 2);
  float *out[2];
  for (int rep = 0; rep < 2; rep++) {
    kern_cuda_linear_f32_input(dx, dw, db, dy, M, K, N, 0);
    out[rep] = hf(M * N);
    down(out[rep], dy, (size_t)M * N * 4);
  }
  r->det = same_bytes(out[0], out[1], (size_t)M * N * 4);
  r->err = rel_l2(out[0], ref, M * N);
  r->base = -1;
  r->tol = TOL_F32;
  free(out[0]); free(out[1]); free(x); free(w); free(b); free(ref); free(wb); free(bb);
  (void)g;
}

/* modulation: a = n. out = bf16 table + fp32 e, exact in fp32. */
static void op_modulation(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t n = c->a;
  float *t = rand_bf16_valued(n, -1, 1), *e = rand_f(n, -1, 1), *ref = hf(n);
  for (int64_t i = 0; i < n; i++) ref[i] = t[i] + e[i];
  uint16_t *tb = to_bf16(t, n), *dt = dev((size_t)n * 2);
  float *de = dev((size_t)n * 4), *dout = dev((size_t)n * 4);
  up(dt, tb, (size_t)n * 2);
  up(de, e, (size_t)n * 4);
  float *out[2];
  for (int rep = 0; rep < 2; rep++) {
    kern_cuda_modulation(dt, de, dout, n, 0);
    out[rep] = hf(n);
    down(out[rep], dout, (size_t)n * 4);
  }
  r->det = same_bytes(out[0], out[1], (size_t)n * 4);
  r->err = rel_l2(out[0], ref, n);
  r->base = -1;
  r->tol = TOL_F32;
  free(out[0]); free(out[1]); free(t); free(e); free(ref); free(tb);
  (void)g;
}

/* layernorm_mod: a = rows, b = dim, c = affine, d = modulate. */
static void op_layernorm_mod(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t rows = c->a, dim = c->b, n = rows * dim;
  const int aff = (int)c->c, mod = (int)c->d;
  float *x = rand_f(n, -2, 4); /* a non-zero mean, as the residual stream has */
  float *w = aff ? rand_bf16_valued(dim, 0.5, 1.5) : NULL, *b = aff ? rand_bf16_valued(dim, -0.5, 0.5) : NULL;
  float *shift = mod ? rand_f(dim, -0.5, 0.5) : NULL, *scale = mod ? rand_f(dim, -0.5, 0.5) : NULL;
  float *ref = hf(n);
  kern_cpu_layernorm(x, w, b, ref, rows, dim, 1e-6f);
  if (mod) kern_cpu_modulate(ref, shift, scale, ref, rows, dim);
  float *base = round_bf16(ref, n); /* fp32 in: only the output is bf16 */
  float *dx = dev((size_t)n * 4), *dsh = NULL, *dsc = NULL;
  uint16_t *dw = NULL, *db = NULL, *dy = dev((size_t)n * 2);
  up(dx, x, (size_t)n * 4);
  if (aff) {
    uint16_t *wb = to_bf16(w, dim), *bb = to_bf16(b, dim);
    dw = dev((size_t)dim * 2);
    db = dev((size_t)dim * 2);
    up(dw, wb, (size_t)dim * 2);
    up(db, bb, (size_t)dim * 2);
    free(wb); free(bb);
  }
  if (mod) {
    dsh = dev((size_t)dim * 4);
    dsc = dev((size_t)dim * 4);
    up(dsh, shift, (size_t)dim * 4);
    up(dsc, scale, (size_t)dim * 4);
  }
  uint16_t *out[2];
  for (int rep = 0; rep < 2; rep++) {
    int64_t r0, m;
    for (int i = 0; (m = call_rows(c, rows, i, &r0)) > 0; i++)
      dev_norm_layernorm_modulate(c->kernels, dx + r0 * dim, dw, db, dsh, dsc, dy + r0 * dim, m,
                                  dim, 1e-6f, 0);
    out[rep] = hb(n);
    down(out[rep], dy, (size_t)n * 2);
  }
  r->det = same_bytes(out[0], out[1], (size_t)n * 2);
  float *got = from_bf16(out[0], n);
  r->err = rel_l2(got, ref, n);
  r->base = rel_l2(base, ref, n);
  r->tol = TOL_BF16;
  free(got); free(out[0]); free(out[1]);
  free(x); free(w); free(b); free(shift); free(scale); free(ref); free(base);
  (void)g;
}

/* rmsnorm_rope: a, b, c = grid (F, H, W), d = heads, e bit 0 = with RoPE,
 * e bit 1 = bf16 input (the reference then sees the same rounded input). */
static void op_rmsnorm_rope(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t F = c->a, H = c->b, W = c->c, heads = c->d, hd = 128;
  const int64_t L = F * H * W, dim = heads * hd, n = L * dim, half = hd / 2;
  const int rope = (int)(c->e & 1), xbf = (int)((c->e >> 1) & 1);
  float *x = rand_f(n, -3, 3), *w = rand_bf16_valued(dim, 0.5, 1.5), *ref = hf(n);
  if (xbf) {
    float *xr = round_bf16(x, n);
    free(x);
    x = xr;
  }
  kern_cpu_rmsnorm(x, w, ref, L, dim, 1e-6f);
  double *ct = kt_dalloc(L * half), *st = kt_dalloc(L * half);
  float *ctf = hf(L * half), *stf = hf(L * half);
  kern_cpu_rope_table(F, H, W, hd, ct, st);
  for (int64_t i = 0; i < L * half; i++) {
    ctf[i] = (float)ct[i];
    stf[i] = (float)st[i];
  }
  if (rope) kern_cpu_rope_apply(ref, ct, st, L, heads, hd);
  float *base = round_bf16(ref, n);
  uint16_t *wb = to_bf16(w, dim), *dw = dev((size_t)dim * 2), *dy = dev((size_t)n * 2);
  float *dx = dev((size_t)n * 4), *dc = NULL, *ds = NULL;
  uint16_t *xb = NULL;
  if (xbf) {
    xb = to_bf16(x, n);
    up(dx, xb, (size_t)n * 2);
  } else {
    up(dx, x, (size_t)n * 4);
  }
  up(dw, wb, (size_t)dim * 2);
  if (rope) {
    dc = dev((size_t)L * half * 4);
    ds = dev((size_t)L * half * 4);
    up(dc, ctf, (size_t)L * half * 4);
    up(ds, stf, (size_t)L * half * 4);
  }
  uint16_t *out[2];
  const size_t xsize = xbf ? 2 : 4;
  for (int rep = 0; rep < 2; rep++) {
    int64_t r0, m; /* a chunk's tables start at its first row */
    for (int i = 0; (m = call_rows(c, L, i, &r0)) > 0; i++)
      dev_norm_rmsnorm_rope(c->kernels, (char *)dx + (size_t)(r0 * dim) * xsize,
                            xbf ? KERN_DTYPE_BF16 : KERN_DTYPE_F32, dw, dc ? dc + r0 * half : NULL,
                            ds ? ds + r0 * half : NULL, dy + r0 * dim, m, heads, hd, 1e-6f, 0);
    out[rep] = hb(n);
    down(out[rep], dy, (size_t)n * 2);
  }
  r->det = same_bytes(out[0], out[1], (size_t)n * 2);
  float *got = from_bf16(out[0], n);
  r->err = rel_l2(got, ref, n);
  r->base = rel_l2(base, ref, n);
  r->tol = TOL_BF16;
  free(got); free(out[0]); free(out[1]);
  free(x); free(w); free(ref); free(ct); free(st); free(ctf); free(stf); free(base); free(wb);
  free(xb);
  (void)g;
}

/* gated_add: a = rows, b = dim, c = y dtype (0 fp32, 1 bf16), d = gate.
 * The reference uses the y values the GPU reads, so this is an fp32 path. */
static void op_gated_add(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t rows = c->a, dim = c->b, n = rows * dim;
  const kern_dtype yt = c->c ? KERN_DTYPE_BF16 : KERN_DTYPE_F32;
  float *x = rand_f(n, -4, 4);
  float *y = yt == KERN_DTYPE_BF16 ? rand_bf16_valued(n, -1, 1) : rand_f(n, -1, 1);
  float *gate = c->d ? rand_f(dim, -1, 1) : NULL, *ref = dup_f(x, n);
  kern_cpu_gated_add(ref, y, gate, rows, dim);
  const size_t ysize = kern_dtype_size(yt), ybytes = (size_t)n * ysize;
  float *dx = dev((size_t)n * 4), *dg = gate ? dev((size_t)dim * 4) : NULL;
  void *dy = dev(ybytes);
  if (yt == KERN_DTYPE_BF16) {
    uint16_t *yb = to_bf16(y, n);
    up(dy, yb, ybytes);
    free(yb);
  } else {
    up(dy, y, ybytes);
  }
  if (gate) up(dg, gate, (size_t)dim * 4);
  float *out[2];
  for (int rep = 0; rep < 2; rep++) {
    up(dx, x, (size_t)n * 4); /* in place: fresh x each run */
    int64_t r0, m;
    for (int i = 0; (m = call_rows(c, rows, i, &r0)) > 0; i++)
      dev_norm_gated_add(c->kernels, dx + r0 * dim, (const char *)dy + (size_t)(r0 * dim) * ysize,
                         yt, dg, m, dim, 0);
    out[rep] = hf(n);
    down(out[rep], dx, (size_t)n * 4);
  }
  r->det = same_bytes(out[0], out[1], (size_t)n * 4);
  r->err = rel_l2(out[0], ref, n);
  r->base = -1;
  r->tol = TOL_F32;
  free(out[0]); free(out[1]); free(x); free(y); free(gate); free(ref);
  (void)g;
}

/* Device copies of host fp32 values, as fp32 or rounded to bf16 (NULL for
 * NULL: an operand the row leaves out). */
static float *dev_f32(const float *x, int64_t n) {
  if (!x) return NULL;
  float *d = dev((size_t)n * 4);
  up(d, x, (size_t)n * 4);
  return d;
}
static uint16_t *dev_bf16(const float *x, int64_t n) {
  if (!x) return NULL;
  uint16_t *b = to_bf16(x, n), *d = dev((size_t)n * 2);
  up(d, b, (size_t)n * 2);
  free(b);
  return d;
}

/* gated_add_ln: a = rows, b = dim, c = y dtype (0 fp32, 1 bf16), d = gate,
 * e bit 0 = affine, e bit 1 = modulate. h against the CPU composition
 * gated_add -> layernorm -> modulate; x against gated_add at the fp32
 * tolerance; and h and x bit-identical to the unfused GPU calls, which the
 * header promises (so the fused call can replace them without a change in
 * the results). */
static void op_gated_add_ln(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t rows = c->a, dim = c->b, n = rows * dim;
  const kern_dtype yt = c->c ? KERN_DTYPE_BF16 : KERN_DTYPE_F32;
  const int aff = (int)(c->e & 1), mod = (int)((c->e >> 1) & 1);
  float *x = rand_f(n, -2, 4); /* the residual stream's non-zero mean */
  float *y = yt == KERN_DTYPE_BF16 ? rand_bf16_valued(n, -1, 1) : rand_f(n, -1, 1);
  float *gate = c->d ? rand_f(dim, -1, 1) : NULL;
  float *w = aff ? rand_bf16_valued(dim, 0.5, 1.5) : NULL;
  float *b = aff ? rand_bf16_valued(dim, -0.5, 0.5) : NULL;
  float *shift = mod ? rand_f(dim, -0.5, 0.5) : NULL, *scale = mod ? rand_f(dim, -0.5, 0.5) : NULL;
  float *xref = dup_f(x, n), *ref = hf(n); // (rows, dim)
  kern_cpu_gated_add(xref, y, gate, rows, dim);
  kern_cpu_layernorm(xref, w, b, ref, rows, dim, 1e-6f);
  if (mod) kern_cpu_modulate(ref, shift, scale, ref, rows, dim);
  float *base = round_bf16(ref, n); /* exact inputs: only the output is bf16 */
  const size_t ysize = kern_dtype_size(yt);
  float *dx = dev((size_t)n * 4), *dg = dev_f32(gate, dim);
  float *dsh = dev_f32(shift, dim), *dsc = dev_f32(scale, dim);
  void *dy = yt == KERN_DTYPE_BF16 ? (void *)dev_bf16(y, n) : (void *)dev_f32(y, n);
  uint16_t *dw = dev_bf16(w, dim), *db = dev_bf16(b, dim), *dh = dev((size_t)n * 2);
  uint16_t *hout[3];
  float *xout[3];
  for (int rep = 0; rep < 3; rep++) { /* fused twice, then the two unfused calls */
    up(dx, x, (size_t)n * 4);
    int64_t r0, m;
    for (int i = 0; (m = call_rows(c, rows, i, &r0)) > 0; i++) {
      float *xc = dx + r0 * dim;
      const void *yc = (const char *)dy + (size_t)(r0 * dim) * ysize;
      if (rep < 2) {
        dev_norm_gated_add_layernorm(c->kernels, xc, yc, yt, dg, dw, db, dsh, dsc, dh + r0 * dim,
                                     m, dim, 1e-6f, 0);
      } else {
        dev_norm_gated_add(c->kernels, xc, yc, yt, dg, m, dim, 0);
        dev_norm_layernorm_modulate(c->kernels, xc, dw, db, dsh, dsc, dh + r0 * dim, m, dim, 1e-6f,
                                    0);
      }
    }
    hout[rep] = hb(n);
    xout[rep] = hf(n);
    down(hout[rep], dh, (size_t)n * 2);
    down(xout[rep], dx, (size_t)n * 4);
    CK(cudaMemset(dh, 0xFF, (size_t)n * 2)); /* NaN again: the next run must write it all */
  }
  r->det = same_bytes(hout[0], hout[1], (size_t)n * 2) &&
           same_bytes(xout[0], xout[1], (size_t)n * 4);
  const int unfused = same_bytes(hout[0], hout[2], (size_t)n * 2) &&
                      same_bytes(xout[0], xout[2], (size_t)n * 4);
  float *got = from_bf16(hout[0], n);
  r->err = rel_l2(got, ref, n);
  r->base = rel_l2(base, ref, n);
  r->tol = TOL_BF16;
  const double xerr = rel_l2(xout[0], xref, n);
  r->extra_ok = xerr <= TOL_F32 && unfused;
  snprintf(r->note, sizeof r->note, "x err %.2e (tol %.0e), %s", xerr, TOL_F32,
           unfused ? "= unfused bits" : "NOT the unfused bits");
  free(got);
  for (int i = 0; i < 3; i++) free(hout[i]), free(xout[i]);
  free(x); free(y); free(gate); free(w); free(b); free(shift); free(scale);
  free(xref); free(ref); free(base);
  (void)g;
}

/* gelu_tanh / silu: a = n, b = dtype (0 fp32, 1 bf16), c = 0 gelu, 1 silu. */
static void op_act(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t n = c->a;
  const kern_dtype t = c->b ? KERN_DTYPE_BF16 : KERN_DTYPE_F32;
  float *x = t == KERN_DTYPE_BF16 ? rand_bf16_valued(n, -6, 6) : rand_f(n, -6, 6);
  float *ref = dup_f(x, n);
  if (c->c) kern_cpu_silu(ref, n); else kern_cpu_gelu_tanh(ref, n);
  const size_t bytes = (size_t)n * kern_dtype_size(t);
  void *dx = dev(bytes), *hx = t == KERN_DTYPE_BF16 ? (void *)to_bf16(x, n) : (void *)dup_f(x, n);
  char *out[2];
  for (int rep = 0; rep < 2; rep++) {
    up(dx, hx, bytes);
    if (c->c) kern_cuda_silu(dx, t, n, 0); else kern_cuda_gelu_tanh(dx, t, n, 0);
    out[rep] = hmalloc(bytes);
    down(out[rep], dx, bytes);
  }
  r->det = same_bytes(out[0], out[1], bytes);
  if (t == KERN_DTYPE_BF16) {
    float *got = from_bf16((uint16_t *)out[0], n), *base = round_bf16(ref, n);
    r->err = rel_l2(got, ref, n);
    r->base = rel_l2(base, ref, n);
    r->tol = TOL_BF16;
    free(got); free(base);
  } else {
    r->err = rel_l2((float *)out[0], ref, n);
    r->base = -1;
    r->tol = TOL_F32;
  }
  free(out[0]); free(out[1]); free(x); free(ref); free(hx);
  (void)g;
}

/* patchify: a..d = C, F, H, W, e = tokens dtype (0 fp32, 1 bf16). Exact:
 * the same values, rounded the same way as kern_f32_to_bf16. */
static void op_patchify(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t C = c->a, F = c->b, H = c->c, W = c->d, n = C * F * H * W;
  const kern_dtype t = c->e ? KERN_DTYPE_BF16 : KERN_DTYPE_F32;
  float *x = rand_f(n, -3, 3), *ref = hf(n);
  kern_cpu_patchify(x, ref, C, F, H, W);
  float *want = t == KERN_DTYPE_BF16 ? round_bf16(ref, n) : dup_f(ref, n);
  const size_t bytes = (size_t)n * kern_dtype_size(t);
  float *dx = dev((size_t)n * 4);
  void *dt = dev(bytes);
  up(dx, x, (size_t)n * 4);
  char *out[2];
  for (int rep = 0; rep < 2; rep++) {
    kern_cuda_patchify(dx, dt, t, C, F, H, W, 0);
    out[rep] = hmalloc(bytes);
    down(out[rep], dt, bytes);
  }
  r->det = same_bytes(out[0], out[1], bytes);
  float *got = t == KERN_DTYPE_BF16 ? from_bf16((uint16_t *)out[0], n) : dup_f((float *)out[0], n);
  r->err = same_bytes(got, want, (size_t)n * 4) ? 0.0 : fmax(rel_l2(got, want, n), 1e-30);
  r->base = -1;
  r->tol = 0;
  free(got); free(out[0]); free(out[1]); free(x); free(ref); free(want);
  (void)g;
}

/* unpatchify: a..d = C, F, H, W. Exact. */
static void op_unpatchify(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t C = c->a, F = c->b, H = c->c, W = c->d, n = C * F * H * W;
  float *tok = rand_f(n, -3, 3), *ref = hf(n);
  kern_cpu_unpatchify(tok, ref, C, F, H, W);
  float *dt = dev((size_t)n * 4), *dx = dev((size_t)n * 4);
  up(dt, tok, (size_t)n * 4);
  float *out[2];
  for (int rep = 0; rep < 2; rep++) {
    kern_cuda_unpatchify(dt, dx, C, F, H, W, 0);
    out[rep] = hf(n);
    down(out[rep], dx, (size_t)n * 4);
  }
  r->det = same_bytes(out[0], out[1], (size_t)n * 4);
  r->err = same_bytes(out[0], ref, (size_t)n * 4) ? 0.0 : fmax(rel_l2(out[0], ref, n), 1e-30);
  r->base = -1;
  r->tol = 0;
  free(out[0]); free(out[1]); free(tok); free(ref);
  (void)g;
}

/* convert: a = n. fp32 -> bf16 -> fp32, both directions bit-exact against
 * kern_dtype.h, with the special values (NaN, +-Inf, +-0, subnormals, ties,
 * overflow to Inf) at the front. */
static void op_convert(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t n = c->a;
  float *x = rand_f(n, -100, 100);
  const uint32_t special[] = {0x7fc00000u, 0xff800001u, 0x7f800000u, 0xff800000u, 0x00000000u,
                              0x80000000u, 0x00000001u, 0x807fffffu, 0x3f808000u, 0x3f818000u,
                              0x7f7fffffu, 0x3f80ffffu};
  for (size_t i = 0; i < sizeof special / sizeof special[0] && (int64_t)i < n; i++)
    memcpy(&x[i], &special[i], 4);
  uint16_t *want_b = to_bf16(x, n);
  float *want_f = from_bf16(want_b, n);
  float *dx = dev((size_t)n * 4), *df = dev((size_t)n * 4);
  uint16_t *db = dev((size_t)n * 2);
  up(dx, x, (size_t)n * 4);
  uint16_t *ob[2];
  float *of[2];
  for (int rep = 0; rep < 2; rep++) {
    kern_cuda_f32_to_bf16(dx, db, n, 0);
    kern_cuda_bf16_to_f32(db, df, n, 0);
    ob[rep] = hb(n);
    of[rep] = hf(n);
    down(ob[rep], db, (size_t)n * 2);
    down(of[rep], df, (size_t)n * 4);
  }
  r->det = same_bytes(ob[0], ob[1], (size_t)n * 2) && same_bytes(of[0], of[1], (size_t)n * 4);
  /* NaN payloads may differ; NaN-ness may not. Every other value exact. */
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    int wn = isnan(want_f[i]), gn = isnan(of[0][i]);
    if (wn != gn || (!wn && (ob[0][i] != want_b[i] || memcmp(&of[0][i], &want_f[i], 4) != 0)))
      bad++;
  }
  r->err = bad ? (double)bad / (double)n : 0.0;
  r->base = -1;
  r->tol = 0;
  free(ob[0]); free(ob[1]); free(of[0]); free(of[1]); free(x); free(want_b); free(want_f);
  (void)g;
}

/* attention: a = Lq, b = Lk, c = heads, d = queries per chunk (0: all). */
static void op_attention(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t Lq = c->a, Lk = c->b, heads = c->c, hd = 128;
  const int64_t nq = Lq * heads * hd, nk = Lk * heads * hd;
  float *q = rand_f(nq, -2, 2), *k = rand_f(nk, -2, 2), *v = rand_f(nk, -1, 1);
  float *ref = hf(nq), *base = hf(nq);
  kern_cpu_attention(q, k, v, ref, Lq, Lk, heads, hd);
  float *qr = round_bf16(q, nq), *kr = round_bf16(k, nk), *vr = round_bf16(v, nk);
  kern_cpu_attention(qr, kr, vr, base, Lq, Lk, heads, hd);
  float *t = round_bf16(base, nq);
  free(base);
  base = t;
  uint16_t *qb = to_bf16(q, nq), *kb = to_bf16(k, nk), *vb = to_bf16(v, nk);
  uint16_t *dq = dev((size_t)nq * 2), *dk = dev((size_t)nk * 2), *dv = dev((size_t)nk * 2);
  uint16_t *dout = dev((size_t)nq * 2);
  const size_t sbytes = kern_cuda_attention_scratch_bytes(c->d ? c->d : Lq, Lk, heads);
  void *scratch = dev(sbytes);
  up(dq, qb, (size_t)nq * 2);
  up(dk, kb, (size_t)nk * 2);
  up(dv, vb, (size_t)nk * 2);
  uint16_t *out[2];
  for (int rep = 0; rep < 2; rep++) {
    kern_cuda_attention(g, dq, dk, dv, dout, Lq, Lk, heads, hd, scratch, sbytes, 0);
    out[rep] = hb(nq);
    down(out[rep], dout, (size_t)nq * 2);
  }
  r->det = same_bytes(out[0], out[1], (size_t)nq * 2);
  float *got = from_bf16(out[0], nq);
  r->err = rel_l2(got, ref, nq);
  r->base = rel_l2(base, ref, nq);
  r->tol = TOL_BF16;
  free(got); free(out[0]); free(out[1]);
  free(q); free(k); free(v); free(ref); free(base); free(qr); free(kr); free(vr);
  free(qb); free(kb); free(vb);
}

/* Shapes: the real Wan widths (1536: 1.3B, 5120: 14B, head_dim 128, FFN
 * 8960/13824, text 4096, patch 64 values) and odd sizes for the tails. */
static const op_case cases[] = {
    {"linear", op_linear, 77, 1536, 1536, 0, 0, 0, 0, NULL},
    {"linear", op_linear, 64, 5120, 5120, 1, 0, 0, 0, NULL},
    {"linear", op_linear, 33, 1536, 8960, 1, 1, 0, 0, NULL},
    {"linear", op_linear, 20, 5120, 13824, 1, 1, 0, 0, NULL},
    {"linear", op_linear, 31, 1536, 8960, 0, 1, 0, 0, NULL},
    {"linear", op_linear, 45, 13824, 5120, 0, 0, 0, 0, NULL},
    {"linear", op_linear, 50, 64, 1536, 0, 0, 1, 0, NULL},
    {"linear", op_linear, 37, 5120, 64, 0, 0, 0, 0, NULL},
    {"linear", op_linear, 130, 4096, 1536, 1, 1, 0, 0, NULL},
    {"linear", op_linear, 9, 256, 640, 0, 2, 1, 0, NULL},
    {"linear_f32", op_linear_f32, 1, 256, 1536, 0, 0, 0, 0, NULL},
    {"linear_f32", op_linear_f32, 1, 1536, 9216, 0, 0, 0, 0, NULL},
    {"linear_f32", op_linear_f32, 1, 5120, 5120, 0, 0, 0, 0, NULL},
    {"linear_f32", op_linear_f32, 3, 100, 77, 0, 0, 1, 0, NULL},
    {"modulation", op_modulation, 6 * 1536, 0, 0, 0, 0, 1, 0, NULL},
    {"modulation", op_modulation, 6 * 5120, 0, 0, 0, 0, 0, 0, NULL},
    {"layernorm_mod", op_layernorm_mod, 100, 1536, 0, 1, 0, 0, 0, NULL},
    {"layernorm_mod", op_layernorm_mod, 37, 5120, 1, 0, 0, 0, 0, NULL},
    {"layernorm_mod", op_layernorm_mod, 64, 5120, 0, 1, 0, 0, 0, NULL},
    {"layernorm_mod", op_layernorm_mod, 5, 300, 1, 1, 0, 1, 0, NULL},
    {"layernorm_mod", op_layernorm_mod, 3, 256, 0, 0, 0, 1, 0, NULL},
    {"layernorm_mod", op_layernorm_mod, 9, 1000, 1, 1, 0, 1, 0, NULL}, /* last warp partly idle */
    {"layernorm_mod", op_layernorm_mod, 75, 5120, 0, 1, 0, 0, 16, NULL},
    /* 300 wide: offsets of 3 bf16 rows are not 16-byte aligned */
    {"layernorm_mod", op_layernorm_mod, 7, 300, 1, 1, 0, 1, 3, NULL},
    {"layernorm_mod", op_layernorm_mod, 40, 1536, 1, 1, 0, 0, 0, "scalar"},
    {"layernorm_mod", op_layernorm_mod, 33, 5120, 0, 1, 0, 0, 0, "vec:8"},
    {"rmsnorm_rope", op_rmsnorm_rope, 2, 4, 6, 12, 1, 1, 0, NULL},
    {"rmsnorm_rope", op_rmsnorm_rope, 3, 3, 5, 40, 1, 0, 0, NULL},
    {"rmsnorm_rope", op_rmsnorm_rope, 21, 3, 4, 2, 1, 0, 0, NULL},
    {"rmsnorm_rope", op_rmsnorm_rope, 1, 7, 11, 40, 0, 1, 0, NULL},
    {"rmsnorm_rope", op_rmsnorm_rope, 21, 3, 4, 40, 3, 0, 0, NULL},
    {"rmsnorm_rope", op_rmsnorm_rope, 2, 3, 5, 12, 2, 1, 0, NULL},
    {"rmsnorm_rope", op_rmsnorm_rope, 2, 3, 5, 3, 1, 1, 0, NULL}, /* 384 wide: a partly idle warp */
    {"rmsnorm_rope", op_rmsnorm_rope, 3, 4, 5, 40, 3, 0, 7, NULL},
    {"rmsnorm_rope", op_rmsnorm_rope, 2, 3, 5, 40, 3, 0, 0, "scalar"},
    {"rmsnorm_rope", op_rmsnorm_rope, 2, 3, 5, 12, 3, 0, 0, "vec:8"},
    {"rmsnorm_rope", op_rmsnorm_rope, 2, 3, 5, 40, 1, 0, 13, "vec:3"},
    {"gated_add", op_gated_add, 77, 1536, 0, 1, 0, 0, 0, NULL},
    {"gated_add", op_gated_add, 33, 5120, 1, 1, 0, 0, 0, NULL},
    {"gated_add", op_gated_add, 19, 5120, 0, 0, 0, 0, 0, NULL},
    {"gated_add", op_gated_add, 7, 333, 1, 0, 0, 1, 0, NULL},
    {"gated_add", op_gated_add, 50, 5120, 1, 1, 0, 0, 16, NULL},
    {"gated_add", op_gated_add, 7, 336, 1, 1, 0, 1, 3, NULL},
    {"gated_add", op_gated_add, 20, 1536, 1, 1, 0, 0, 0, "scalar"},
    {"gated_add_ln", op_gated_add_ln, 64, 5120, 1, 1, 1, 0, 0, NULL}, /* gated add 1 + norm3 */
    {"gated_add_ln", op_gated_add_ln, 77, 1536, 1, 0, 2, 0, 0, NULL}, /* add 2 + norm2 */
    {"gated_add_ln", op_gated_add_ln, 37, 5120, 1, 1, 2, 0, 0, NULL}, /* gated add 3 + next norm1 */
    {"gated_add_ln", op_gated_add_ln, 33, 5120, 0, 1, 3, 0, 0, NULL},
    {"gated_add_ln", op_gated_add_ln, 19, 1536, 1, 1, 0, 0, 0, NULL},
    {"gated_add_ln", op_gated_add_ln, 40, 1536, 1, 1, 2, 0, 16, NULL},
    {"gated_add_ln", op_gated_add_ln, 5, 300, 1, 1, 3, 1, 0, NULL},
    {"gated_add_ln", op_gated_add_ln, 9, 1000, 1, 0, 2, 1, 0, NULL},
    {"gated_add_ln", op_gated_add_ln, 20, 5120, 1, 1, 1, 0, 0, "scalar"},
    {"gated_add_ln", op_gated_add_ln, 20, 5120, 1, 1, 2, 0, 7, "vec:5"},
    {"gelu_tanh", op_act, 100003, 0, 0, 0, 0, 0, 0, NULL},
    {"gelu_tanh", op_act, 33 * 8960, 1, 0, 0, 0, 0, 0, NULL},
    {"silu", op_act, 5120, 0, 1, 0, 0, 1, 0, NULL},
    {"silu", op_act, 1537, 1, 1, 0, 0, 1, 0, NULL},
    {"patchify", op_patchify, 16, 21, 60, 104, 1, 0, 0, NULL},
    {"patchify", op_patchify, 16, 3, 6, 10, 0, 1, 0, NULL},
    {"patchify", op_patchify, 3, 2, 4, 2, 1, 1, 0, NULL},
    {"unpatchify", op_unpatchify, 16, 21, 60, 104, 0, 0, 0, NULL},
    {"unpatchify", op_unpatchify, 16, 3, 6, 10, 0, 1, 0, NULL},
    {"convert", op_convert, 1000003, 0, 0, 0, 0, 0, 0, NULL},
    {"convert", op_convert, 12, 0, 0, 0, 0, 1, 0, NULL},
    {"attention", op_attention, 77, 77, 2, 0, 0, 1, 0, NULL},
    {"attention", op_attention, 300, 512, 12, 0, 0, 0, 0, NULL},
    {"attention", op_attention, 333, 1025, 12, 64, 0, 0, 0, NULL},
    {"attention", op_attention, 520, 520, 40, 100, 0, 0, 0, NULL},
    {"attention", op_attention, 1, 3, 1, 0, 0, 1, 0, NULL},
    {"attention", op_attention, 130, 7, 40, 1, 0, 1, 0, NULL},
};

/* ---- --bench: the residual-stream row ops at the Wan shapes ------------ */

#include "ops_bench.h"

static void usage(FILE *f) {
  fprintf(f, "usage: test_ops [-o OP] [--small] [--bench]\n"
             "  -o, --op OP   run the rows of one op only (default: all)\n"
             "  -s, --small   only the small rows (for compute-sanitizer; default: all)\n"
             "  -b, --bench   time the residual-stream row ops at L 32760, D 5120 and 1536,\n"
             "                every kernel variant (default: off, run the op table)\n"
             "  -h, --help    this text\n"
             "ops: linear linear_f32 modulation layernorm_mod rmsnorm_rope gated_add\n"
             "     gated_add_ln gelu_tanh silu patchify unpatchify convert attention\n");
}

int main(int argc, char **argv) {
  const char *only = NULL;
  int small = 0, bench = 0;
  static const struct option longopts[] = {{"op", required_argument, NULL, 'o'},
                                           {"small", no_argument, NULL, 's'},
                                           {"bench", no_argument, NULL, 'b'},
                                           {"help", no_argument, NULL, 'h'},
                                           {0, 0, 0, 0}};
  int ch;
  while ((ch = getopt_long(argc, argv, "o:sbh", longopts, NULL)) != -1) {
    if (ch == 'o') {
      only = optarg;
    } else if (ch == 's') {
      small = 1;
    } else if (ch == 'b') {
      bench = 1;
    } else if (ch == 'h') {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  const int ncases = (int)(sizeof cases / sizeof cases[0]);
  if (only) {
    int any = 0;
    for (int i = 0; i < ncases; i++) any |= strcmp(cases[i].op, only) == 0;
    if (!any) {
      fprintf(stderr, "test_ops: -o %s: no such op\n", only);
      usage(stderr);
      return 2;
    }
  }
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    printf("test_ops: skipped: no CUDA device (cudaGetDeviceCount: %s, %d devices)\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "ok", ndev);
    return 77;
  }
  kt_seed("test_ops");
  if (bench) return ops_bench_run(kt_next());
  kern_cuda_gemm_ctx *g = kern_cuda_gemm_ctx_create(0);
  printf("# %-14s %-26s %10s %10s %8s %9s %5s %3s %s\n", "op", "shape", "err", "bf16_err",
         "tol", "same", "guard", "det", "result");
  printf("# err: relative L2 vs CPU fp32 (tol 0: bit-exact); rows with bf16_err also need\n"
         "# err <= 2*bf16_err + %.0e; same (fp32-output GEMM vs CPU on identical inputs)\n"
         "# <= %.0e; guard: bytes after every buffer intact; det: rerun bit-identical\n"
         "# shape: the op's a,b,c,d,e [/rows per call] [kernel variant]\n",
         BASE_EPS, TOL_SAME);
  int failed = 0, ran = 0;
  for (int i = 0; i < ncases; i++) {
    const op_case *c = &cases[i];
    if ((only && strcmp(c->op, only) != 0) || (small && !c->small)) continue;
    result r = {0};
    r.same = -1;
    r.extra_ok = 1;
    c->fn(c, g, &r);
    const int guard = dev_release();
    int ok = guard && r.det && r.extra_ok;
    if (r.tol == 0)
      ok = ok && r.err == 0.0;
    else
      ok = ok && r.err <= r.tol && (r.base < 0 || r.err <= 2.0 * r.base + BASE_EPS) &&
           (r.same < 0 || r.same <= TOL_SAME);
    char shape[96], base[16];
    int len = snprintf(shape, sizeof shape, "%lld,%lld,%lld,%lld,%lld", (long long)c->a,
                       (long long)c->b, (long long)c->c, (long long)c->d, (long long)c->e);
    if (c->split) len += snprintf(shape + len, sizeof shape - len, "/%lld", (long long)c->split);
    if (c->kernels) snprintf(shape + len, sizeof shape - len, " %s", c->kernels);
    if (r.base < 0) snprintf(base, sizeof base, "-");
    else snprintf(base, sizeof base, "%.3e", r.base);
    char same[16];
    if (r.same < 0) snprintf(same, sizeof same, "-");
    else snprintf(same, sizeof same, "%.2e", r.same);
    printf("  %-14s %-26s %10.3e %10s %8.0e %9s %5s %3s %s%s%s\n", c->op, shape, r.err, base,
           r.tol, same, guard ? "ok" : "BAD", r.det ? "ok" : "BAD", ok ? "pass" : "FAIL",
           r.note[0] ? "  " : "", r.note);
    fflush(stdout);
    failed += !ok;
    ran++;
  }
  kern_cuda_gemm_ctx_destroy(g);
  printf("# %d rows, %d failed\n", ran, failed);
  return failed ? 1 : 0;
}
