/* Every CUDA op (kern_cuda.h) against its CPU version (kern_cpu.h), table
 * driven in the style of ggml's test-backend-ops.
 *
 * A row of the table names its op and its parameters by field
 * ({.op = OP_GATED_ADD_LN, .rows = 20, .dim = 5120, .gate = 1, ...}). The
 * op's function builds the inputs and the CPU reference and runs the
 * kernel twice; the harness allocates every device buffer NaN-filled with
 * guard bytes after it (dev), uploads (dev_f32, dev_bf16), compares
 * (result_compare), checks every guard (dev_release) and prints the row.
 *
 * For each row:
 * - err: relative L2 of the GPU output against the CPU fp32 reference on
 *   the fp32 inputs;
 * - base, where the op has a bf16 path: the error of a plain bf16
 *   implementation (the inputs the GPU gets rounded to bf16, fp32 on the
 *   CPU, the output rounded where the GPU's is bf16); the GPU must be within
 *   2x of it (+ a small epsilon) and under 1e-2 (STYLE.md 9); fp32 paths
 *   must be under 1e-5; copies and conversions must be bit-exact;
 * - guard bytes after every device buffer are untouched, outputs start as
 *   NaN (so an element not written fails), and a rerun is bit-identical.
 * Inputs are fresh random numbers each run; the seed is printed (SP_SEED=n
 * replays one).
 *
 * Rows with .split run the op in calls of that many rows on offset
 * pointers (the way a caller chunks activations); rows with .kernels
 * run that benchmark variant (tests/gpu/dev/norm_variants.h).
 *
 *   test_ops            all rows       test_ops -o OP   the rows of one op
 *   test_ops --small    small rows only, for compute-sanitizer memcheck
 *   test_ops --bench    time the residual-stream row ops at the Wan shapes
 *                       (every kernel variant, checked before it is timed;
 *                       tests/gpu/dev/ops_bench.c)
 * Exit 77 with one line when there is no CUDA device. */
#include <cuda_runtime_api.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_cpu.h"
#include "kern_cuda.h"
#include "kern_cuda_t5.h"
#include "kern_dtype.h"
#include "norm_variants.h"
#include "ops_bench.h"

#define TOL_BF16 1e-2
#define TOL_F32 1e-5
#define BASE_EPS 2e-4 /* slack over 2x the plain bf16 error */
#define TOL_SAME 2e-5 /* fp32 accumulation in another order, K <= 13824 */
/* fp8 GEMM against the fp32 CPU: x and w each quantised per tensor to e4m3
 * (3 mantissa bits) carry a relative rms rounding error of about 2.6e-2
 * (tests/kernels/test_fp8.c measures it); a dot product of independent
 * errors adds them in quadrature, sqrt(2) x 2.6e-2 = 3.7e-2, so 6e-2 holds
 * with margin while a wrong scale (a factor off) or a lost operand is far
 * above it. The row also must stay within 2x of a plain fp8 implementation
 * (the CPU on the same e4m3 values), and close to it: SAME_FP8 for fp32
 * output (Hopper's fp8 MMA accumulates in fp32 with periodic promotion,
 * other order), SAME_FP8_BF16 when both outputs are rounded to bf16. */
#define TOL_FP8 6e-2
#define SAME_FP8 1e-3
#define SAME_FP8_BF16 4e-3
#define GUARD 256     /* bytes after every device buffer */
#define GUARD_BYTE 0xA5
#define MAX_BUFS 32

#define SP_TEST_CUDA
#include "sp_test.h"

/* ---- the harness: device buffers with guards --------------------------- */

static struct { char *p; size_t bytes; } bufs[MAX_BUFS];
static int nbufs;

/* bytes of 0xFF (NaN as fp32 and as bf16) followed by GUARD guard bytes. */
static void *dev(size_t bytes) {
  if (nbufs == MAX_BUFS) {
    fprintf(stderr, "FAIL: more than %d device buffers in one case\n", MAX_BUFS);
    exit(1);
  }
  char *p;
  CHECK_CUDA(cudaMalloc((void **)&p, bytes + GUARD));
  CHECK_CUDA(cudaMemset(p, 0xFF, bytes));
  CHECK_CUDA(cudaMemset(p + bytes, GUARD_BYTE, GUARD));
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
    CHECK_CUDA(cudaMemcpy(g, bufs[i].p + bufs[i].bytes, GUARD, cudaMemcpyDeviceToHost));
    for (int j = 0; j < GUARD; j++)
      if (g[j] != GUARD_BYTE) ok = 0;
    CHECK_CUDA(cudaFree(bufs[i].p));
  }
  nbufs = 0;
  return ok;
}

static void up(void *d, const void *h, size_t bytes) {
  CHECK_CUDA(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
}
static void down(void *h, const void *d, size_t bytes) {
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}

/* ---- host helpers ------------------------------------------------------ */

static void *hmalloc(size_t bytes) { return sp_test_malloc(bytes); }
static float *hf(int64_t n) { return hmalloc((size_t)n * sizeof(float)); }
static uint16_t *hb(int64_t n) { return hmalloc((size_t)n * sizeof(uint16_t)); }

static float *rand_f(int64_t n, double lo, double hi) {
  float *p = hf(n);
  sp_rand_fill(p, n, lo, hi);
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

/* ---- the harness: uploads ---------------------------------------------- */

/* Device copies of host fp32 values, as fp32 or rounded to bf16, each with
 * its guard (NULL for NULL: an operand the row leaves out). */
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

/* ---- rows, results and the comparison ---------------------------------- */

typedef struct result {
  double err, base, tol; /* base < 0: no bf16 baseline; tol 0: bit-exact */
  double same;           /* fp32-output GEMMs: error against the CPU on the
                            very inputs the GPU had (< 0: not measured) */
  int det;               /* rerun bit-identical */
  int extra_ok;          /* the op's own further checks, said in note */
  char note[64];
} result;

typedef enum op_kind {
  OP_LINEAR, OP_LINEAR_F32, OP_MODULATION, OP_LAYERNORM_MOD, OP_RMSNORM_ROPE, OP_GATED_ADD,
  OP_GATED_ADD_LN, OP_GELU_TANH, OP_SILU, OP_PATCHIFY, OP_UNPATCHIFY, OP_CONVERT, OP_ATTENTION,
  OP_LINEAR_LORA, OP_QUANT_FP8, OP_LINEAR_FP8, OP_T5_ATTENTION, OP_COUNT
} op_kind;

/* One row: the op and its parameters by name. A field an op does not read
 * stays 0; each op's function says which it reads. */
typedef struct op_case {
  op_kind op;
  int64_t rows;        /* GEMM M, rows of a row op, attention queries (Lq) */
  int64_t dim;         /* GEMM K, the row width of a row op */
  int64_t out_dim;     /* GEMM N */
  int64_t n;           /* elements of an elementwise op or conversion */
  int64_t keys;        /* attention keys (Lk) */
  int64_t heads;       /* attention, rmsnorm_rope (head_dim is 128), t5_attention */
  int64_t head_dim;    /* t5_attention: the head width */
  int64_t chunk;       /* attention: queries per scratch chunk (0: all) */
  int64_t channels;    /* patchify, unpatchify */
  int64_t grid[3];     /* F, H, W: latent grid (patchify) or token grid (rope) */
  int bf16_in;         /* the op's input in bf16 (else fp32) */
  int bf16_out;        /* the op's output in bf16 (else fp32) */
  int gelu;            /* linear: GELU-tanh epilogue */
  int no_bias;         /* linear: no bias */
  int64_t lora_rank;   /* linear_lora: rank r of the bypassed pair */
  int affine;          /* layernorm: weight and bias */
  int modulate;        /* layernorm: shift and scale after */
  int gate;            /* gated add: a gate (else plain add) */
  int rope;            /* rmsnorm_rope: apply RoPE */
  int small;           /* in the --small set (for compute-sanitizer) */
  int64_t split;       /* rows per call, offset pointers (0: one call) */
  const char *kernels; /* the row ops' benchmark variant (norm_variants.h), or NULL */
} op_case;

typedef void (*op_fn)(const op_case *c, kern_cuda_gemm_ctx *g, result *r);

/* The rows of call i of a case that splits `rows` rows into calls of
 * c->split rows: *r0 the first, returns the count (0: no more calls). */
static int64_t call_rows(const op_case *c, int64_t rows, int i, int64_t *r0) {
  const int64_t per = c->split > 0 ? c->split : (rows > 0 ? rows : 1);
  *r0 = (int64_t)i * per;
  return *r0 >= rows ? 0 : (rows - *r0 < per ? rows - *r0 : per);
}

/* A GPU output run twice (fresh inputs each time) must give the same bytes. */
static int same_bytes(const void *x, const void *y, size_t n) { return memcmp(x, y, n) == 0; }

/* The comparison every row ends with: got (the GPU output as fp32) against
 * ref (the CPU fp32 result) at tol, and base (a plain bf16
 * implementation's output, NULL: none) against ref. tol 0: bit-exact,
 * err 0 when every bit matches, else the relative L2 (at least 1e-30). */
static void result_compare(result *r, const float *got, const float *ref, const float *base,
                           int64_t n, double tol) {
  if (tol == 0)
    r->err = same_bytes(got, ref, (size_t)n * 4) ? 0.0
                                                 : fmax(sp_test_rel_l2_f32(got, ref, n), 1e-30);
  else
    r->err = sp_test_rel_l2_f32(got, ref, n);
  r->base = base ? sp_test_rel_l2_f32(base, ref, n) : -1;
  r->tol = tol;
}

/* ---- the ops ----------------------------------------------------------- */

/* linear: rows = M, dim = K, out_dim = N, bf16_out, gelu, no_bias. */
static void op_linear(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t M = c->rows, K = c->dim, N = c->out_dim;
  const kern_dtype yt = c->bf16_out ? KERN_DTYPE_BF16 : KERN_DTYPE_F32;
  const int gelu = c->gelu, has_b = !c->no_bias;
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
  result_compare(r, got, ref, base, M * N, TOL_BF16);
  /* With fp32 output only the summation order differs from base: this is
   * what would catch a wrong epilogue (an erf GELU, a missing bias), which
   * the bf16-level tolerance alone could not. */
  r->same = yt == KERN_DTYPE_F32 ? sp_test_rel_l2_f32(got, base, M * N) : -1;
  if (got != (float *)out[0]) free(got);
  free(out[0]); free(out[1]);
  free(x); free(w); free(b); free(ref); free(base); free(xr); free(xb); free(wb); free(bb);
}

/* linear_lora: rows = M, dim = K, out_dim = N, lora_rank = r, bf16_out,
 * gelu: a linear layer with a bypassed pair as the CUDA stage runs it
 * (MODEL.md "LoRA", bypass): the pair merged into a copy of the weight,
 * w' = bf16(w + B A) (kern_cuda_lora_merge), then the layer's GEMM with
 * w'. The reference is the CPU bypass's arithmetic in fp32, act(x W^T + b
 * + (x A^T) B^T); the baseline a plain bf16 form of the GPU's (x rounded
 * to bf16, w' rounded once from its fp32 sum); the pair's share of y far
 * above the error. Reported, not judged: the same GEMM accumulating in
 * place (C = D) against the merge into a copy, and the W8A8 pairs'
 * y += t B'^T (M = max(rows, 8192), N = out_dim, K = r, y bf16) in place
 * against the same product written to another buffer (and whether two
 * in-place runs give the same bits: "rerun!" when not): the elements more
 * than one bf16 ulp apart (kern_cuda_lora_merge refuses in place since
 * they differed beyond rounding on an H100; the W8A8 pairs' y += t B'^T
 * accumulates in place). */
/* Elements of two bf16 arrays more than one bf16 ulp apart. */
static int64_t bf16_far(const uint16_t *m1, const uint16_t *m2, int64_t n) {
  int64_t nfar = 0;
  for (int64_t i = 0; i < n; i++) {
    if (m1[i] == m2[i]) continue;
    const float a = kern_bf16_to_f32(m1[i]), b = kern_bf16_to_f32(m2[i]);
    const float big = fmaxf(fabsf(a), fabsf(b));
    int e;
    frexpf(big, &e); /* big = f 2^e, f in [0.5, 1): bf16's ulp there is 2^(e - 8) */
    if (fabsf(a - b) > ldexpf(1.0f, e - 8)) nfar++;
  }
  return nfar;
}

/* The W8A8 pair's y += t B'^T for op_linear_lora: far elements of the
 * product accumulated in place (return) and written to a second buffer
 * (*copy_far), each against bf16(y + t B'^T) summed in fp32 on the CPU;
 * *rerun_differs: the in-place product made twice from the same y gave
 * other bits (a race, where a wrong rounding would repeat). */
static int64_t lora_t_in_place_far(kern_cuda_gemm_ctx *g, int64_t M, int64_t N, int64_t R,
                                   int64_t *copy_far, int *rerun_differs) {
  float *y = rand_f(M * N, -1, 1), *t = rand_bf16_valued(M * R, -1, 1);
  float *bl = rand_bf16_valued(N * R, -0.1, 0.1);
  uint16_t *yb = to_bf16(y, M * N), *tb = to_bf16(t, M * R), *blb = to_bf16(bl, N * R);
  const size_t ybytes = (size_t)(M * N) * 2;
  uint16_t *dy = dev(ybytes), *dy2 = dev(ybytes), *dt = dev((size_t)(M * R) * 2);
  uint16_t *dbl = dev((size_t)(N * R) * 2);
  up(dy, yb, ybytes);
  up(dt, tb, (size_t)(M * R) * 2);
  up(dbl, blb, (size_t)(N * R) * 2);
  kern_cuda_matmul_params m; /* the product as the W8A8 stage makes it (stage_cuda_quant.c) */
  kern_cuda_gemm_linear_params(dt, dbl, NULL, dy2, KERN_DTYPE_BF16, M, R, N, KERN_CUDA_ACT_NONE,
                               1.0f, &m);
  m.c = dy;
  kern_cuda_matmul(g, &m, 0); /* into a second buffer */
  m.d = dy, m.c = NULL;
  kern_cuda_matmul(g, &m, 0); /* in place */
  uint16_t *h1 = hb(M * N), *h2 = hb(M * N);
  down(h1, dy, ybytes);
  up(dy, yb, ybytes);
  kern_cuda_matmul(g, &m, 0); /* in place again */
  down(h2, dy, ybytes);
  *rerun_differs = memcmp(h1, h2, ybytes) != 0;
  down(h2, dy2, ybytes);
  float *yr = hf(M * N), *u = hf(M * N);
  for (int64_t i = 0; i < M * N; i++) yr[i] = kern_bf16_to_f32(yb[i]);
  kern_cpu_linear(t, bl, NULL, u, M, R, N);
  kern_cpu_gated_add(yr, u, NULL, M, N);
  uint16_t *ref = to_bf16(yr, M * N);
  const int64_t far = bf16_far(h1, ref, M * N);
  *copy_far = bf16_far(h2, ref, M * N);
  free(y), free(t), free(bl), free(yb), free(tb), free(blb), free(h1), free(h2);
  free(yr), free(u), free(ref);
  return far;
}

static void op_linear_lora(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t M = c->rows, K = c->dim, N = c->out_dim, R = c->lora_rank;
  const kern_dtype yt = c->bf16_out ? KERN_DTYPE_BF16 : KERN_DTYPE_F32;
  const kern_cuda_act act = c->gelu ? KERN_CUDA_ACT_GELU_TANH : KERN_CUDA_ACT_NONE;
  float *x = rand_f(M * K, -1, 1);                  // (M, K)
  float *w = rand_bf16_valued(N * K, -0.05, 0.05);  // (N, K)
  float *b = rand_bf16_valued(N, -0.5, 0.5);        // (N)
  float *a = rand_bf16_valued(R * K, -0.1, 0.1);    // (R, K)
  float *bl = rand_bf16_valued(N * R, -0.1, 0.1);   // (N, R)
  float *ref = hf(M * N), *base = hf(M * N), *t = hf(M * R), *u = hf(M * N);
  /* ref: the CPU bypass in fp32 */
  kern_cpu_linear(x, w, b, ref, M, K, N);
  kern_cpu_linear(x, a, NULL, t, M, K, R);
  kern_cpu_linear(t, bl, NULL, u, M, R, N);
  kern_cpu_gated_add(ref, u, NULL, M, N);
  /* base: x in bf16 times w' = bf16(w + B A), B A summed in fp32 */
  float *at = hf(K * R), *wm = hf(N * K);
  for (int64_t k = 0; k < K; k++)
    for (int64_t i = 0; i < R; i++) at[k * R + i] = a[i * K + k]; /* A^T (K, R) */
  kern_cpu_linear(bl, at, NULL, wm, N, R, K);                    /* B A (N, K) */
  for (int64_t i = 0; i < N * K; i++) wm[i] = kern_bf16_to_f32(kern_f32_to_bf16(wm[i] + w[i]));
  float *xr = round_bf16(x, M * K);
  kern_cpu_linear(xr, wm, b, base, M, K, N);
  if (c->gelu) {
    kern_cpu_gelu_tanh(ref, M * N);
    kern_cpu_gelu_tanh(base, M * N);
  }
  if (yt == KERN_DTYPE_BF16) {
    float *q = round_bf16(base, M * N);
    free(base);
    base = q;
  }
  uint16_t *xb = to_bf16(x, M * K), *wb = to_bf16(w, N * K), *bb = to_bf16(b, N);
  uint16_t *ab = to_bf16(a, R * K), *blb = to_bf16(bl, N * R);
  const size_t wbytes = (size_t)(N * K) * 2;
  uint16_t *dx = dev((size_t)(M * K) * 2), *dw = dev(wbytes), *db = dev((size_t)N * 2);
  uint16_t *da = dev((size_t)(R * K) * 2), *dbl = dev((size_t)(N * R) * 2);
  uint16_t *dwm = dev(wbytes), *dwi = dev(wbytes);
  const size_t ybytes = (size_t)(M * N) * kern_dtype_size(yt);
  void *dy = dev(ybytes);
  up(dx, xb, (size_t)(M * K) * 2);
  up(dw, wb, wbytes);
  up(dwi, wb, wbytes);
  up(db, bb, (size_t)N * 2);
  up(da, ab, (size_t)(R * K) * 2);
  up(dbl, blb, (size_t)(N * R) * 2);
  char *out[2];
  for (int rep = 0; rep < 2; rep++) {
    kern_cuda_lora_merge(g, dw, da, dbl, R, dwm, N, K, 0);
    kern_cuda_linear(g, dx, dwm, db, dy, yt, M, K, N, act, 0);
    out[rep] = hmalloc(ybytes);
    down(out[rep], dy, ybytes);
  }
  r->det = same_bytes(out[0], out[1], ybytes);
  float *got = yt == KERN_DTYPE_F32 ? (float *)out[0] : from_bf16((uint16_t *)out[0], M * N);
  result_compare(r, got, ref, base, M * N, TOL_BF16);
  /* the same GEMM shape accumulating in place (C = D), as the W8A8 pairs'
   * y += t B'^T does: within one bf16 ulp of the merge into a copy */
  kern_cuda_matmul_params ip;
  kern_cuda_lora_merge_params(dwi, da, dbl, R, dwi, N, K, &ip);
  kern_cuda_matmul(g, &ip, 0);
  uint16_t *m1 = hb(N * K), *m2 = hb(N * K);
  down(m1, dwm, wbytes);
  down(m2, dwi, wbytes);
  const int64_t nfar = bf16_far(m1, m2, N * K);
  int64_t ycopy = 0;
  int yrerun = 0;
  const int64_t yfar = lora_t_in_place_far(g, M > 8192 ? M : 8192, N, R, &ycopy, &yrerun);
  /* The pair must show: its share of the output is far above the error. */
  float *plain = hf(M * N);
  kern_cpu_linear(x, w, b, plain, M, K, N);
  if (c->gelu) kern_cpu_gelu_tanh(plain, M * N);
  const double share = sp_test_rel_l2_f32(plain, ref, M * N);
  r->extra_ok = share > 4 * r->err;
  snprintf(r->note, sizeof r->note, "pair %.1e; far: merge %lld, y %lld (copy %lld)%s", share,
           (long long)nfar, (long long)yfar, (long long)ycopy, yrerun ? " rerun!" : "");
  if (got != (float *)out[0]) free(got);
  free(out[0]); free(out[1]); free(plain); free(m1); free(m2);
  free(x); free(w); free(b); free(a); free(bl); free(ref); free(base); free(t); free(u);
  free(at); free(wm); free(xr); free(xb); free(wb); free(bb); free(ab); free(blb);
}

/* linear_f32: rows = M, dim = K, out_dim = N (fp32 input, bf16 weights,
 * fp32 out). */
static void op_linear_f32(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t M = c->rows, K = c->dim, N = c->out_dim;
  float *x = rand_f(M * K, -1, 1), *w = rand_bf16_valued(N * K, -0.05, 0.05);
  float *b = rand_bf16_valued(N, -0.5, 0.5), *ref = hf(M * N);
  kern_cpu_linear(x, w, b, ref, M, K, N);
  float *dx = dev_f32(x, M * K), *dy = dev((size_t)M * N * 4);
  uint16_t *dw = dev_bf16(w, N * K), *db = dev_bf16(b, N);
  float *out[2];
  for (int rep = 0; rep < 2; rep++) {
    kern_cuda_linear_f32_input(dx, dw, db, dy, M, K, N, 0);
    out[rep] = hf(M * N);
    down(out[rep], dy, (size_t)M * N * 4);
  }
  r->det = same_bytes(out[0], out[1], (size_t)M * N * 4);
  result_compare(r, out[0], ref, NULL, M * N, TOL_F32);
  free(out[0]); free(out[1]); free(x); free(w); free(b); free(ref);
  (void)g;
}

/* modulation: n. out = bf16 table + fp32 e, exact in fp32. */
static void op_modulation(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t n = c->n;
  float *t = rand_bf16_valued(n, -1, 1), *e = rand_f(n, -1, 1), *ref = hf(n);
  for (int64_t i = 0; i < n; i++) ref[i] = t[i] + e[i];
  uint16_t *dt = dev_bf16(t, n);
  float *de = dev_f32(e, n), *dout = dev((size_t)n * 4);
  float *out[2];
  for (int rep = 0; rep < 2; rep++) {
    kern_cuda_modulation(dt, de, dout, n, 0);
    out[rep] = hf(n);
    down(out[rep], dout, (size_t)n * 4);
  }
  r->det = same_bytes(out[0], out[1], (size_t)n * 4);
  result_compare(r, out[0], ref, NULL, n, TOL_F32);
  free(out[0]); free(out[1]); free(t); free(e); free(ref);
  (void)g;
}

/* layernorm_mod: rows, dim, affine, modulate, split. */
static void op_layernorm_mod(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t rows = c->rows, dim = c->dim, n = rows * dim;
  const int aff = c->affine, mod = c->modulate;
  float *x = rand_f(n, -2, 4); /* a non-zero mean, as the residual stream has */
  float *w = aff ? rand_bf16_valued(dim, 0.5, 1.5) : NULL, *b = aff ? rand_bf16_valued(dim, -0.5, 0.5) : NULL;
  float *shift = mod ? rand_f(dim, -0.5, 0.5) : NULL, *scale = mod ? rand_f(dim, -0.5, 0.5) : NULL;
  float *ref = hf(n);
  kern_cpu_layernorm(x, w, b, ref, rows, dim, 1e-6f);
  if (mod) kern_cpu_modulate(ref, shift, scale, ref, rows, dim);
  float *base = round_bf16(ref, n); /* fp32 in: only the output is bf16 */
  float *dx = dev_f32(x, n), *dsh = dev_f32(shift, dim), *dsc = dev_f32(scale, dim);
  uint16_t *dw = dev_bf16(w, dim), *db = dev_bf16(b, dim), *dy = dev((size_t)n * 2);
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
  result_compare(r, got, ref, base, n, TOL_BF16);
  free(got); free(out[0]); free(out[1]);
  free(x); free(w); free(b); free(shift); free(scale); free(ref); free(base);
  (void)g;
}

/* rmsnorm_rope: grid (F, H, W), heads, rope, bf16_in (the reference then
 * sees the same rounded input), split. */
static void op_rmsnorm_rope(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t F = c->grid[0], H = c->grid[1], W = c->grid[2], heads = c->heads, hd = 128;
  const int64_t L = F * H * W, dim = heads * hd, n = L * dim, half = hd / 2;
  const int rope = c->rope, xbf = c->bf16_in;
  float *x = rand_f(n, -3, 3), *w = rand_bf16_valued(dim, 0.5, 1.5), *ref = hf(n);
  if (xbf) {
    float *xr = round_bf16(x, n);
    free(x);
    x = xr;
  }
  kern_cpu_rmsnorm(x, w, ref, L, dim, 1e-6f);
  double *ct = sp_test_dalloc(L * half), *st = sp_test_dalloc(L * half);
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
  result_compare(r, got, ref, base, n, TOL_BF16);
  free(got); free(out[0]); free(out[1]);
  free(x); free(w); free(ref); free(ct); free(st); free(ctf); free(stf); free(base); free(wb);
  free(xb);
  (void)g;
}

/* gated_add: rows, dim, bf16_in (y in bf16), gate, split.
 * The reference uses the y values the GPU reads, so this is an fp32 path. */
static void op_gated_add(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t rows = c->rows, dim = c->dim, n = rows * dim;
  const kern_dtype yt = c->bf16_in ? KERN_DTYPE_BF16 : KERN_DTYPE_F32;
  float *x = rand_f(n, -4, 4);
  float *y = yt == KERN_DTYPE_BF16 ? rand_bf16_valued(n, -1, 1) : rand_f(n, -1, 1);
  float *gate = c->gate ? rand_f(dim, -1, 1) : NULL, *ref = dup_f(x, n);
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
  result_compare(r, out[0], ref, NULL, n, TOL_F32);
  free(out[0]); free(out[1]); free(x); free(y); free(gate); free(ref);
  (void)g;
}

/* gated_add_ln: rows, dim, bf16_in (y in bf16), gate, affine, modulate,
 * split. h against the CPU composition
 * gated_add -> layernorm -> modulate; x against gated_add at the fp32
 * tolerance; and h and x bit-identical to the unfused GPU calls, which the
 * header promises (so the fused call can replace them without a change in
 * the results). */
static void op_gated_add_ln(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t rows = c->rows, dim = c->dim, n = rows * dim;
  const kern_dtype yt = c->bf16_in ? KERN_DTYPE_BF16 : KERN_DTYPE_F32;
  const int aff = c->affine, mod = c->modulate;
  float *x = rand_f(n, -2, 4); /* the residual stream's non-zero mean */
  float *y = yt == KERN_DTYPE_BF16 ? rand_bf16_valued(n, -1, 1) : rand_f(n, -1, 1);
  float *gate = c->gate ? rand_f(dim, -1, 1) : NULL;
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
    CHECK_CUDA(cudaMemset(dh, 0xFF, (size_t)n * 2)); /* NaN again: the next run must write it all */
  }
  r->det = same_bytes(hout[0], hout[1], (size_t)n * 2) &&
           same_bytes(xout[0], xout[1], (size_t)n * 4);
  const int unfused = same_bytes(hout[0], hout[2], (size_t)n * 2) &&
                      same_bytes(xout[0], xout[2], (size_t)n * 4);
  float *got = from_bf16(hout[0], n);
  result_compare(r, got, ref, base, n, TOL_BF16);
  const double xerr = sp_test_rel_l2_f32(xout[0], xref, n);
  r->extra_ok = xerr <= TOL_F32 && unfused;
  snprintf(r->note, sizeof r->note, "x err %.2e (tol %.0e), %s", xerr, TOL_F32,
           unfused ? "= unfused bits" : "NOT the unfused bits");
  free(got);
  for (int i = 0; i < 3; i++) free(hout[i]), free(xout[i]);
  free(x); free(y); free(gate); free(w); free(b); free(shift); free(scale);
  free(xref); free(ref); free(base);
  (void)g;
}

/* gelu_tanh / silu: n, bf16_in (the in-place buffer in bf16). */
static void op_act(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t n = c->n;
  const int silu = c->op == OP_SILU;
  const kern_dtype t = c->bf16_in ? KERN_DTYPE_BF16 : KERN_DTYPE_F32;
  float *x = t == KERN_DTYPE_BF16 ? rand_bf16_valued(n, -6, 6) : rand_f(n, -6, 6);
  float *ref = dup_f(x, n);
  if (silu) kern_cpu_silu(ref, n); else kern_cpu_gelu_tanh(ref, n);
  const size_t bytes = (size_t)n * kern_dtype_size(t);
  void *dx = dev(bytes), *hx = t == KERN_DTYPE_BF16 ? (void *)to_bf16(x, n) : (void *)dup_f(x, n);
  char *out[2];
  for (int rep = 0; rep < 2; rep++) {
    up(dx, hx, bytes);
    if (silu) kern_cuda_silu(dx, t, n, 0); else kern_cuda_gelu_tanh(dx, t, n, 0);
    out[rep] = hmalloc(bytes);
    down(out[rep], dx, bytes);
  }
  r->det = same_bytes(out[0], out[1], bytes);
  if (t == KERN_DTYPE_BF16) {
    float *got = from_bf16((uint16_t *)out[0], n), *base = round_bf16(ref, n);
    result_compare(r, got, ref, base, n, TOL_BF16);
    free(got); free(base);
  } else {
    result_compare(r, (float *)out[0], ref, NULL, n, TOL_F32);
  }
  free(out[0]); free(out[1]); free(x); free(ref); free(hx);
  (void)g;
}

/* patchify: channels, grid (F, H, W), bf16_out (tokens in bf16). Exact:
 * the same values, rounded the same way as kern_f32_to_bf16. */
static void op_patchify(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t C = c->channels, F = c->grid[0], H = c->grid[1], W = c->grid[2];
  const int64_t n = C * F * H * W;
  const kern_dtype t = c->bf16_out ? KERN_DTYPE_BF16 : KERN_DTYPE_F32;
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
  result_compare(r, got, want, NULL, n, 0);
  free(got); free(out[0]); free(out[1]); free(x); free(ref); free(want);
  (void)g;
}

/* unpatchify: channels, grid (F, H, W). Exact. */
static void op_unpatchify(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t C = c->channels, F = c->grid[0], H = c->grid[1], W = c->grid[2];
  const int64_t n = C * F * H * W;
  float *tok = rand_f(n, -3, 3), *ref = hf(n);
  kern_cpu_unpatchify(tok, ref, C, F, H, W);
  float *dt = dev_f32(tok, n), *dx = dev((size_t)n * 4);
  float *out[2];
  for (int rep = 0; rep < 2; rep++) {
    kern_cuda_unpatchify(dt, dx, C, F, H, W, 0);
    out[rep] = hf(n);
    down(out[rep], dx, (size_t)n * 4);
  }
  r->det = same_bytes(out[0], out[1], (size_t)n * 4);
  result_compare(r, out[0], ref, NULL, n, 0);
  free(out[0]); free(out[1]); free(tok); free(ref);
  (void)g;
}

/* convert: n. fp32 -> bf16 -> fp32, both directions bit-exact against
 * kern_dtype.h, with the special values (NaN, +-Inf, +-0, subnormals, ties,
 * overflow to Inf) at the front. */
static void op_convert(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t n = c->n;
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

/* attention: rows = Lq, keys = Lk, heads, chunk (queries per chunk, 0: all). */
static void op_attention(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t Lq = c->rows, Lk = c->keys, heads = c->heads, hd = 128;
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
  const size_t sbytes = kern_cuda_attention_scratch_bytes(c->chunk ? c->chunk : Lq, Lk, heads);
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
  result_compare(r, got, ref, base, nq, TOL_BF16);
  free(got); free(out[0]); free(out[1]);
  free(q); free(k); free(v); free(ref); free(base); free(qr); free(kr); free(vr);
  free(qb); free(kb); free(vb);
}

/* t5_attention: rows = L (queries and keys), heads, head_dim. The UMT5
 * encoder's fused attention (kern_cuda_t5_attention: no scale, T5's
 * relative-position bias added to the scores in the kernel) against the
 * CPU's biased attention (kern_cpu_attention_relbias, scale 1) on the fp32
 * q, k, v; base: the same on their bf16 roundings, output rounded to bf16.
 * The bias table is bf16-valued (the encoder's weights are bf16 on the
 * device) and the bucket of each of the 2L - 1 offsets is random in
 * [0, 32): any table is a valid input, and a random one makes a bias read
 * at the wrong offset, head or bucket show at once. q and k are small, as
 * T5's unscaled scores need for rows that are not one-hot. */
static void op_t5_attention(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t L = c->rows, heads = c->heads, hd = c->head_dim, nb = 32;
  const int64_t n = L * heads * hd;
  float *q = rand_f(n, -0.4, 0.4), *k = rand_f(n, -0.4, 0.4), *v = rand_f(n, -1, 1);
  float *pos = rand_bf16_valued(nb * heads, -2, 2);
  int32_t *bucket = hmalloc((size_t)(2 * L - 1) * sizeof *bucket);
  for (int64_t i = 0; i < 2 * L - 1; i++) bucket[i] = (int32_t)sp_rand_int(0, nb - 1);
  float *ref = hf(n), *base = hf(n);
  kern_cpu_attention_relbias(q, k, v, pos, bucket, 1.0f, ref, L, L, heads, hd);
  float *qr = round_bf16(q, n), *kr = round_bf16(k, n), *vr = round_bf16(v, n);
  kern_cpu_attention_relbias(qr, kr, vr, pos, bucket, 1.0f, base, L, L, heads, hd);
  float *t = round_bf16(base, n);
  free(base);
  base = t;
  uint16_t *dq = dev_bf16(q, n), *dk = dev_bf16(k, n), *dv = dev_bf16(v, n);
  uint16_t *dpos = dev_bf16(pos, nb * heads), *dout = dev((size_t)n * 2);
  int32_t *dbucket = dev((size_t)(2 * L - 1) * sizeof *bucket);
  up(dbucket, bucket, (size_t)(2 * L - 1) * sizeof *bucket);
  uint16_t *out[2];
  for (int rep = 0; rep < 2; rep++) {
    kern_cuda_t5_attention(dq, dk, dv, dpos, dbucket, dout, L, heads, hd, 0);
    out[rep] = hb(n);
    down(out[rep], dout, (size_t)n * 2);
  }
  r->det = same_bytes(out[0], out[1], (size_t)n * 2);
  float *got = from_bf16(out[0], n);
  result_compare(r, got, ref, base, n, TOL_BF16);
  free(got); free(out[0]); free(out[1]);
  free(q); free(k); free(v); free(pos); free(bucket); free(ref); free(base);
  free(qr); free(kr); free(vr);
  (void)g;
}

/* quant_fp8: n, bf16_in. The per-tensor quantiser must give the CPU's
 * bytes and scale exactly (kern_fp8_quantize_n: one fp32 multiply, then
 * round to nearest even), and the widening back to bf16 the CPU's bits. */
static void op_quant_fp8(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t n = c->n;
  float *x = c->bf16_in ? rand_bf16_valued(n, -3, 3) : rand_f(n, -3, 3);
  x[n / 2] = -4.5f; /* the largest magnitude sits on a negative value */
  uint8_t *want = hmalloc((size_t)n), *got[2];
  float want_scale = 0, got_scale[2];
  kern_fp8_quantize_n(x, (size_t)n, want, &want_scale);
  void *dx = c->bf16_in ? (void *)dev_bf16(x, n) : (void *)dev_f32(x, n);
  uint8_t *dq = dev((size_t)n);
  float *dsc = dev(16), *damax = dev(16);
  uint16_t *dw = dev((size_t)n * 2), *wide = hb(n);
  for (int rep = 0; rep < 2; rep++) {
    kern_cuda_quantize_fp8(dx, c->bf16_in ? KERN_DTYPE_BF16 : KERN_DTYPE_F32, n, dq, dsc, damax,
                           0);
    got[rep] = hmalloc((size_t)n);
    down(got[rep], dq, (size_t)n);
    down(&got_scale[rep], dsc, sizeof(float));
  }
  kern_cuda_fp8_to_bf16(dq, dsc, dw, n, 0);
  down(wide, dw, (size_t)n * 2);
  r->det = same_bytes(got[0], got[1], (size_t)n) && got_scale[0] == got_scale[1];
  int64_t bad = 0, bad_wide = 0;
  for (int64_t i = 0; i < n; i++) {
    bad += got[0][i] != want[i];
    bad_wide += wide[i] != kern_f32_to_bf16(kern_fp8_e4m3_to_f32(want[i]) * want_scale);
  }
  r->err = bad || got_scale[0] != want_scale ? fmax((double)bad / (double)n, 1e-30) : 0.0;
  r->base = -1;
  r->tol = 0;
  r->extra_ok = bad_wide == 0;
  snprintf(r->note, sizeof r->note, "scale %s cpu, %lld widened wrong",
           got_scale[0] == want_scale ? "==" : "!=", (long long)bad_wide);
  free(x); free(want); free(got[0]); free(got[1]); free(wide);
  (void)g;
}

/* linear_fp8: rows = M, dim = K, out_dim = N, bf16_out, gelu, no_bias.
 * x arrives bf16 (as activations do), w fp32 (as a converter holds it);
 * both are quantised on the GPU, then kern_cuda_linear_fp8. The baseline
 * is a plain fp8 implementation: the CPU quantiser's values widened to
 * fp32, an fp32 linear, the output rounded where the GPU's is bf16. */
static void op_linear_fp8(const op_case *c, kern_cuda_gemm_ctx *g, result *r) {
  const int64_t M = c->rows, K = c->dim, N = c->out_dim;
  const kern_dtype yt = c->bf16_out ? KERN_DTYPE_BF16 : KERN_DTYPE_F32;
  const int has_b = !c->no_bias;
  float *x = rand_bf16_valued(M * K, -1, 1);                // (M, K)
  float *w = rand_f(N * K, -0.05, 0.05);                    // (N, K)
  float *b = has_b ? rand_bf16_valued(N, -0.5, 0.5) : NULL; // (N)
  float *ref = hf(M * N), *base = hf(M * N), *xq = hf(M * K), *wq = hf(N * K);
  uint8_t *q = hmalloc((size_t)(N * K > M * K ? N * K : M * K));
  float sx, sw;
  kern_cpu_linear(x, w, b, ref, M, K, N);
  kern_fp8_quantize_n(x, (size_t)(M * K), q, &sx);
  for (int64_t i = 0; i < M * K; i++) xq[i] = kern_fp8_e4m3_to_f32(q[i]) * sx;
  kern_fp8_quantize_n(w, (size_t)(N * K), q, &sw);
  for (int64_t i = 0; i < N * K; i++) wq[i] = kern_fp8_e4m3_to_f32(q[i]) * sw;
  kern_cpu_linear(xq, wq, b, base, M, K, N);
  if (c->gelu) {
    kern_cpu_gelu_tanh(ref, M * N);
    kern_cpu_gelu_tanh(base, M * N);
  }
  if (yt == KERN_DTYPE_BF16) {
    float *t = round_bf16(base, M * N);
    free(base);
    base = t;
  }
  uint16_t *dx = dev_bf16(x, M * K), *db = dev_bf16(b, N);
  float *dw = dev_f32(w, N * K), *dsc = dev(64);
  uint8_t *dxq = dev((size_t)(M * K)), *dwq = dev((size_t)(N * K));
  const size_t ybytes = (size_t)(M * N) * kern_dtype_size(yt);
  void *dy = dev(ybytes);
  /* scales 16 bytes apart: sx, sw, and the amax scratch */
  kern_cuda_quantize_fp8(dw, KERN_DTYPE_F32, N * K, dwq, dsc + 4, dsc + 12, 0);
  char *out[2];
  for (int rep = 0; rep < 2; rep++) {
    kern_cuda_quantize_fp8(dx, KERN_DTYPE_BF16, M * K, dxq, dsc, dsc + 8, 0);
    kern_cuda_linear_fp8(g, dxq, dsc, dwq, dsc + 4, db, dy, yt, M, K, N,
                         c->gelu ? KERN_CUDA_ACT_GELU_TANH : KERN_CUDA_ACT_NONE, 0);
    out[rep] = hmalloc(ybytes);
    down(out[rep], dy, ybytes);
  }
  r->det = same_bytes(out[0], out[1], ybytes);
  float *got = yt == KERN_DTYPE_F32 ? (float *)out[0] : from_bf16((uint16_t *)out[0], M * N);
  result_compare(r, got, ref, base, M * N, TOL_FP8);
  /* against the plain fp8 implementation: catches a swapped or missing
   * scale, bias or GELU that the fp8-level tolerance alone could not */
  const double same = sp_test_rel_l2_f32(got, base, M * N);
  const double same_tol = yt == KERN_DTYPE_F32 ? SAME_FP8 : SAME_FP8_BF16;
  r->extra_ok = same <= same_tol;
  snprintf(r->note, sizeof r->note, "vs plain fp8 %.2e (tol %.0e)", same, same_tol);
  if (got != (float *)out[0]) free(got);
  free(out[0]); free(out[1]);
  free(x); free(w); free(b); free(ref); free(base); free(xq); free(wq); free(q);
}

/* ---- the table --------------------------------------------------------- */

/* Each op's name (for -o and the output) and function. */
static const struct {
  const char *name;
  op_fn fn;
} ops[OP_COUNT] = {
    [OP_LINEAR] = {"linear", op_linear},
    [OP_LINEAR_F32] = {"linear_f32", op_linear_f32},
    [OP_MODULATION] = {"modulation", op_modulation},
    [OP_LAYERNORM_MOD] = {"layernorm_mod", op_layernorm_mod},
    [OP_RMSNORM_ROPE] = {"rmsnorm_rope", op_rmsnorm_rope},
    [OP_GATED_ADD] = {"gated_add", op_gated_add},
    [OP_GATED_ADD_LN] = {"gated_add_ln", op_gated_add_ln},
    [OP_GELU_TANH] = {"gelu_tanh", op_act},
    [OP_SILU] = {"silu", op_act},
    [OP_PATCHIFY] = {"patchify", op_patchify},
    [OP_UNPATCHIFY] = {"unpatchify", op_unpatchify},
    [OP_CONVERT] = {"convert", op_convert},
    [OP_ATTENTION] = {"attention", op_attention},
    [OP_LINEAR_LORA] = {"linear_lora", op_linear_lora},
    [OP_QUANT_FP8] = {"quant_fp8", op_quant_fp8},
    [OP_LINEAR_FP8] = {"linear_fp8", op_linear_fp8},
    [OP_T5_ATTENTION] = {"t5_attention", op_t5_attention},
};

/* A row's parameters as "name=value" for the fields it sets, then
 * "/split" and the kernels. */
static void case_describe(const op_case *c, char *s, size_t cap) {
  size_t len = 0;
#define PUT(...)                                                      \
  do {                                                                \
    int k_ = snprintf(s + len, cap - len, __VA_ARGS__);               \
    if (k_ > 0) len = len + (size_t)k_ < cap ? len + (size_t)k_ : cap - 1; \
  } while (0)
  s[0] = '\0';
  const struct { const char *name; int64_t v; } num[] = {
      {"rows", c->rows},   {"dim", c->dim},     {"out", c->out_dim},       {"n", c->n},
      {"keys", c->keys},   {"heads", c->heads}, {"chunk", c->chunk},      {"C", c->channels},
      {"r", c->lora_rank}, {"hd", c->head_dim},
  };
  for (size_t i = 0; i < sizeof num / sizeof num[0]; i++)
    if (num[i].v) PUT("%s%s=%lld", len ? " " : "", num[i].name, (long long)num[i].v);
  if (c->grid[0])
    PUT("%sgrid=%lldx%lldx%lld", len ? " " : "", (long long)c->grid[0], (long long)c->grid[1],
        (long long)c->grid[2]);
  const struct { const char *name; int on; } flag[] = {
      {"bf16in", c->bf16_in}, {"bf16out", c->bf16_out}, {"gelu", c->gelu},
      {"nobias", c->no_bias}, {"affine", c->affine},    {"mod", c->modulate},
      {"gate", c->gate},      {"rope", c->rope},
  };
  for (size_t i = 0; i < sizeof flag / sizeof flag[0]; i++)
    if (flag[i].on) PUT(" %s", flag[i].name);
  if (c->split) PUT("/%lld", (long long)c->split);
  if (c->kernels) PUT(" %s", c->kernels);
#undef PUT
}

/* Shapes: the real Wan widths (1536: 1.3B, 5120: 14B, head_dim 128, FFN
 * 8960/13824, text 4096, patch 64 values) and odd sizes for the tails. */
static const op_case cases[] = {
    {.op = OP_LINEAR, .rows = 77, .dim = 1536, .out_dim = 1536},
    {.op = OP_LINEAR, .rows = 64, .dim = 5120, .out_dim = 5120, .bf16_out = 1},
    {.op = OP_LINEAR, .rows = 33, .dim = 1536, .out_dim = 8960, .bf16_out = 1, .gelu = 1},
    {.op = OP_LINEAR, .rows = 20, .dim = 5120, .out_dim = 13824, .bf16_out = 1, .gelu = 1},
    {.op = OP_LINEAR, .rows = 31, .dim = 1536, .out_dim = 8960, .gelu = 1},
    {.op = OP_LINEAR, .rows = 45, .dim = 13824, .out_dim = 5120},
    {.op = OP_LINEAR, .rows = 50, .dim = 64, .out_dim = 1536, .small = 1},
    {.op = OP_LINEAR, .rows = 37, .dim = 5120, .out_dim = 64},
    {.op = OP_LINEAR, .rows = 130, .dim = 4096, .out_dim = 1536, .bf16_out = 1, .gelu = 1},
    {.op = OP_LINEAR, .rows = 9, .dim = 256, .out_dim = 640, .no_bias = 1, .small = 1},
    /* bypassed LoRA pairs merged into the weight: q-like (bf16 out), ffn.0 (GELU), context k
     * (fp32 out) */
    {.op = OP_LINEAR_LORA, .rows = 64, .dim = 5120, .out_dim = 5120, .lora_rank = 64,
     .bf16_out = 1},
    {.op = OP_LINEAR_LORA, .rows = 33, .dim = 1536, .out_dim = 8960, .lora_rank = 16,
     .bf16_out = 1, .gelu = 1},
    {.op = OP_LINEAR_LORA, .rows = 77, .dim = 1536, .out_dim = 1536, .lora_rank = 32},
    {.op = OP_LINEAR_LORA, .rows = 9, .dim = 256, .out_dim = 640, .lora_rank = 8, .small = 1},
    {.op = OP_LINEAR_F32, .rows = 1, .dim = 256, .out_dim = 1536},
    {.op = OP_LINEAR_F32, .rows = 1, .dim = 1536, .out_dim = 9216},
    {.op = OP_LINEAR_F32, .rows = 1, .dim = 5120, .out_dim = 5120},
    {.op = OP_LINEAR_F32, .rows = 3, .dim = 100, .out_dim = 77, .small = 1},
    {.op = OP_MODULATION, .n = 6 * 1536, .small = 1},
    {.op = OP_MODULATION, .n = 6 * 5120},
    {.op = OP_LAYERNORM_MOD, .rows = 100, .dim = 1536, .modulate = 1},
    {.op = OP_LAYERNORM_MOD, .rows = 37, .dim = 5120, .affine = 1},
    {.op = OP_LAYERNORM_MOD, .rows = 64, .dim = 5120, .modulate = 1},
    {.op = OP_LAYERNORM_MOD, .rows = 5, .dim = 300, .affine = 1, .modulate = 1, .small = 1},
    {.op = OP_LAYERNORM_MOD, .rows = 3, .dim = 256, .small = 1},
    {.op = OP_LAYERNORM_MOD, .rows = 9, .dim = 1000, .affine = 1, .modulate = 1,
     .small = 1}, /* last warp partly idle */
    {.op = OP_LAYERNORM_MOD, .rows = 75, .dim = 5120, .modulate = 1, .split = 16},
    /* 300 wide: offsets of 3 bf16 rows are not 16-byte aligned */
    {.op = OP_LAYERNORM_MOD, .rows = 7, .dim = 300, .affine = 1, .modulate = 1, .small = 1,
     .split = 3},
    {.op = OP_LAYERNORM_MOD, .rows = 40, .dim = 1536, .affine = 1, .modulate = 1,
     .kernels = "scalar"},
    {.op = OP_LAYERNORM_MOD, .rows = 33, .dim = 5120, .modulate = 1, .kernels = "vec:8"},
    {.op = OP_RMSNORM_ROPE, .grid = {2, 4, 6}, .heads = 12, .rope = 1, .small = 1},
    {.op = OP_RMSNORM_ROPE, .grid = {3, 3, 5}, .heads = 40, .rope = 1},
    {.op = OP_RMSNORM_ROPE, .grid = {21, 3, 4}, .heads = 2, .rope = 1},
    {.op = OP_RMSNORM_ROPE, .grid = {1, 7, 11}, .heads = 40, .small = 1},
    {.op = OP_RMSNORM_ROPE, .grid = {21, 3, 4}, .heads = 40, .rope = 1, .bf16_in = 1},
    {.op = OP_RMSNORM_ROPE, .grid = {2, 3, 5}, .heads = 12, .bf16_in = 1, .small = 1},
    {.op = OP_RMSNORM_ROPE, .grid = {2, 3, 5}, .heads = 3, .rope = 1,
     .small = 1}, /* 384 wide: a partly idle warp */
    {.op = OP_RMSNORM_ROPE, .grid = {3, 4, 5}, .heads = 40, .rope = 1, .bf16_in = 1, .split = 7},
    {.op = OP_RMSNORM_ROPE, .grid = {2, 3, 5}, .heads = 40, .rope = 1, .bf16_in = 1,
     .kernels = "scalar"},
    {.op = OP_RMSNORM_ROPE, .grid = {2, 3, 5}, .heads = 12, .rope = 1, .bf16_in = 1,
     .kernels = "vec:8"},
    {.op = OP_RMSNORM_ROPE, .grid = {2, 3, 5}, .heads = 40, .rope = 1, .split = 13,
     .kernels = "vec:3"},
    {.op = OP_GATED_ADD, .rows = 77, .dim = 1536, .gate = 1},
    {.op = OP_GATED_ADD, .rows = 33, .dim = 5120, .bf16_in = 1, .gate = 1},
    {.op = OP_GATED_ADD, .rows = 19, .dim = 5120},
    {.op = OP_GATED_ADD, .rows = 7, .dim = 333, .bf16_in = 1, .small = 1},
    {.op = OP_GATED_ADD, .rows = 50, .dim = 5120, .bf16_in = 1, .gate = 1, .split = 16},
    {.op = OP_GATED_ADD, .rows = 7, .dim = 336, .bf16_in = 1, .gate = 1, .small = 1, .split = 3},
    {.op = OP_GATED_ADD, .rows = 20, .dim = 1536, .bf16_in = 1, .gate = 1, .kernels = "scalar"},
    {.op = OP_GATED_ADD_LN, .rows = 64, .dim = 5120, .bf16_in = 1, .gate = 1,
     .affine = 1}, /* gated add 1 + norm3 */
    {.op = OP_GATED_ADD_LN, .rows = 77, .dim = 1536, .bf16_in = 1,
     .modulate = 1}, /* add 2 + norm2 */
    {.op = OP_GATED_ADD_LN, .rows = 37, .dim = 5120, .bf16_in = 1, .gate = 1,
     .modulate = 1}, /* gated add 3 + next norm1 */
    {.op = OP_GATED_ADD_LN, .rows = 33, .dim = 5120, .gate = 1, .affine = 1, .modulate = 1},
    {.op = OP_GATED_ADD_LN, .rows = 19, .dim = 1536, .bf16_in = 1, .gate = 1},
    {.op = OP_GATED_ADD_LN, .rows = 40, .dim = 1536, .bf16_in = 1, .gate = 1, .modulate = 1,
     .split = 16},
    {.op = OP_GATED_ADD_LN, .rows = 5, .dim = 300, .bf16_in = 1, .gate = 1, .affine = 1,
     .modulate = 1, .small = 1},
    {.op = OP_GATED_ADD_LN, .rows = 9, .dim = 1000, .bf16_in = 1, .modulate = 1, .small = 1},
    {.op = OP_GATED_ADD_LN, .rows = 20, .dim = 5120, .bf16_in = 1, .gate = 1, .affine = 1,
     .kernels = "scalar"},
    {.op = OP_GATED_ADD_LN, .rows = 20, .dim = 5120, .bf16_in = 1, .gate = 1, .modulate = 1,
     .split = 7, .kernels = "vec:5"},
    {.op = OP_GELU_TANH, .n = 100003},
    {.op = OP_GELU_TANH, .n = 33 * 8960, .bf16_in = 1},
    {.op = OP_SILU, .n = 5120, .small = 1},
    {.op = OP_SILU, .n = 1537, .bf16_in = 1, .small = 1},
    {.op = OP_PATCHIFY, .channels = 16, .grid = {21, 60, 104}, .bf16_out = 1},
    {.op = OP_PATCHIFY, .channels = 16, .grid = {3, 6, 10}, .small = 1},
    {.op = OP_PATCHIFY, .channels = 3, .grid = {2, 4, 2}, .bf16_out = 1, .small = 1},
    {.op = OP_UNPATCHIFY, .channels = 16, .grid = {21, 60, 104}},
    {.op = OP_UNPATCHIFY, .channels = 16, .grid = {3, 6, 10}, .small = 1},
    {.op = OP_CONVERT, .n = 1000003},
    {.op = OP_CONVERT, .n = 12, .small = 1},
    {.op = OP_ATTENTION, .rows = 77, .keys = 77, .heads = 2, .small = 1},
    {.op = OP_ATTENTION, .rows = 300, .keys = 512, .heads = 12},
    {.op = OP_ATTENTION, .rows = 333, .keys = 1025, .heads = 12, .chunk = 64},
    {.op = OP_ATTENTION, .rows = 520, .keys = 520, .heads = 40, .chunk = 100},
    {.op = OP_ATTENTION, .rows = 1, .keys = 3, .heads = 1, .small = 1},
    {.op = OP_ATTENTION, .rows = 130, .keys = 7, .heads = 40, .chunk = 1, .small = 1},
    {.op = OP_QUANT_FP8, .n = 1000003},
    {.op = OP_QUANT_FP8, .n = 32760 * 5120 / 16, .bf16_in = 1},
    {.op = OP_QUANT_FP8, .n = 7, .small = 1},
    {.op = OP_QUANT_FP8, .n = 1537, .bf16_in = 1, .small = 1},
    /* bf16 output first: the stage's form; fp32 output and a row count
     * that is no multiple of 16 last */
    {.op = OP_LINEAR_FP8, .rows = 128, .dim = 5120, .out_dim = 13824, .bf16_out = 1, .gelu = 1},
    {.op = OP_LINEAR_FP8, .rows = 256, .dim = 13824, .out_dim = 5120, .bf16_out = 1},
    {.op = OP_LINEAR_FP8, .rows = 16, .dim = 256, .out_dim = 640, .bf16_out = 1, .small = 1},
    {.op = OP_LINEAR_FP8, .rows = 64, .dim = 5120, .out_dim = 5120},
    {.op = OP_LINEAR_FP8, .rows = 32, .dim = 1536, .out_dim = 8960, .gelu = 1, .no_bias = 1},
    {.op = OP_LINEAR_FP8, .rows = 77, .dim = 1536, .out_dim = 1536, .bf16_out = 1},
    /* the UMT5 encoder's attention: odd lengths up to the longest prompt,
     * XXL's head width 64 and the tiny encoder's 16, and 20 (not a
     * multiple of 8: the element-wise loads and stores) */
    {.op = OP_T5_ATTENTION, .rows = 1, .heads = 4, .head_dim = 64, .small = 1},
    {.op = OP_T5_ATTENTION, .rows = 7, .heads = 3, .head_dim = 64, .small = 1},
    {.op = OP_T5_ATTENTION, .rows = 77, .heads = 5, .head_dim = 64},
    {.op = OP_T5_ATTENTION, .rows = 512, .heads = 8, .head_dim = 64},
    {.op = OP_T5_ATTENTION, .rows = 1, .heads = 2, .head_dim = 16, .small = 1},
    {.op = OP_T5_ATTENTION, .rows = 7, .heads = 4, .head_dim = 16, .small = 1},
    {.op = OP_T5_ATTENTION, .rows = 77, .heads = 4, .head_dim = 16},
    {.op = OP_T5_ATTENTION, .rows = 512, .heads = 4, .head_dim = 16},
    {.op = OP_T5_ATTENTION, .rows = 33, .heads = 3, .head_dim = 20, .small = 1},
};


static void usage(FILE *f) {
  fprintf(f, "usage: test_ops [-o OP] [--small] [--bench]\n"
             "  -o, --op OP   run the rows of one op only (default: all)\n"
             "  -s, --small   only the small rows (for compute-sanitizer; default: all)\n"
             "  -b, --bench   time the residual-stream row ops at L 32760, D 5120 and 1536,\n"
             "                every kernel variant (default: off, run the op table)\n"
             "  -h, --help    this text\n"
             "ops: linear linear_f32 modulation layernorm_mod rmsnorm_rope gated_add\n"
             "     gated_add_ln gelu_tanh silu patchify unpatchify convert attention\n"
             "     linear_lora quant_fp8 linear_fp8 (fp8 rows need an sm_89+ GPU)\n"
             "     t5_attention\n");
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
    for (int i = 0; i < ncases; i++) any |= strcmp(ops[cases[i].op].name, only) == 0;
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
  sp_test_begin("test_ops");
  if (bench) return ops_bench_run(sp_test_seed());
  kern_cuda_gemm_ctx *g = kern_cuda_gemm_ctx_create(0);
  printf("# %-14s %-44s %10s %10s %8s %9s %5s %3s %s\n", "op", "shape", "err", "bf16_err",
         "tol", "same", "guard", "det", "result");
  printf("# err: relative L2 vs CPU fp32 (tol 0: bit-exact); rows with bf16_err also need\n"
         "# err <= 2*bf16_err + %.0e; same (fp32-output GEMM vs CPU on identical inputs)\n"
         "# <= %.0e; guard: bytes after every buffer intact; det: rerun bit-identical\n"
         "# shape: the row's fields [/rows per call] [kernel variant]\n",
         BASE_EPS, TOL_SAME);
  int failed = 0, ran = 0;
  for (int i = 0; i < ncases; i++) {
    const op_case *c = &cases[i];
    const char *name = ops[c->op].name;
    if ((only && strcmp(name, only) != 0) || (small && !c->small)) continue;
    result r = {0};
    r.same = -1;
    r.extra_ok = 1;
    ops[c->op].fn(c, g, &r);
    const int guard = dev_release();
    int ok = guard && r.det && r.extra_ok;
    if (r.tol == 0)
      ok = ok && r.err == 0.0;
    else
      ok = ok && r.err <= r.tol && (r.base < 0 || r.err <= 2.0 * r.base + BASE_EPS) &&
           (r.same < 0 || r.same <= TOL_SAME);
    char shape[128], base[16];
    case_describe(c, shape, sizeof shape);
    if (r.base < 0) snprintf(base, sizeof base, "-");
    else snprintf(base, sizeof base, "%.3e", r.base);
    char same[16];
    if (r.same < 0) snprintf(same, sizeof same, "-");
    else snprintf(same, sizeof same, "%.2e", r.same);
    printf("  %-14s %-44s %10.3e %10s %8.0e %9s %5s %3s %s%s%s\n", name, shape, r.err, base,
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
