/* The quantized-GEMM benchmark (quant_bench.h).
 *
 * Inputs: x (M, K) bf16 uniform in [-2, 2) (a 1 Mi block of host random
 * numbers copied over and over), weights bf16-valued uniform in [-0.05,
 * 0.05), bias bf16; fp8 and int8 weights quantised from them per output
 * channel on the GPU; Q8_0 and Q4_K weights random block bytes with the
 * f16 scales set to 2^-10 (sane magnitudes). Each variant runs once and is
 * compared with the bf16 GEMM of the same dequantised weights (relative
 * L2: the activation quantisation's error for W8A8, ~0 for weight-only),
 * then timed: BENCH_WARM untimed calls, BENCH_REPS calls between CUDA
 * events. Ratios are against the bf16 GEMM of the same shape, same run;
 * the rows "... alone" (a dequantisation, an activation quantiser) give
 * their rate in GB/s of the bytes they must move instead of TFLOP/s. */
#include "quant_bench.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "dev_time.h"
#include "kern_cuda.h"
#include "kern_cuda_quant.h"
#include "kern_quant.h"
#include "log.h"

#define BENCH_M 32760
#define BENCH_WARM 3
#define BENCH_REPS 10
#define BENCH_CHECK_TOL 0.1 /* W8A8 vs bf16 on the same weights: fp8 ~3e-2, int8 ~1e-2 */

typedef enum {
  V_BF16, V_FP8_AUTO, V_FP8_EPI, V_FP8_FAST, V_FP8_QUANT, V_I8, V_I8_QUANT, V_WO_FP8, V_WO_Q8_0, V_WO_Q4_K,
  V_DQ_FP8, V_DQ_Q8_0, V_DQ_Q4_K, V_QX_FP8, V_QX_I8, V_COUNT
} variant;
static const char *const vname[V_COUNT] = {
    "bf16 gemm", "fp8 w8a8 auto", "fp8 w8a8 epilogue", "fp8 w8a8 fast-accum",
    "fp8 quant x + w8a8",
    "int8 w8a8", "int8 quant x + w8a8", "fp8 dequant + bf16", "q8_0 dequant + bf16",
    "q4_k dequant + bf16", "fp8 dequant alone", "q8_0 dequant alone", "q4_k dequant alone",
    "fp8 quantise x alone", "int8 quantise x alone"};

typedef struct shape {
  const char *name;
  int64_t K, N;
  int gelu;
} shape;

/* Device buffers, sized for the largest shape. */
typedef struct bufs {
  uint16_t *x, *w, *b, *y, *yref, *wdq; /* bf16 */
  uint8_t *xq, *wq8, *wi8, *wq80, *wq4k;
  float *sx, *sw8, *swi8, *scratch;
  size_t scratch_bytes;
} bufs;

typedef struct call {
  variant v;
  const shape *s;
  bufs *b;
  kern_cuda_gemm_ctx *g;
  uint16_t *y;
  kern_cuda_w8a8_path took; /* the W8A8 variants: the path the call took */
} call;

static uint64_t rng_state;
static double uni(double lo, double hi) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return lo + (hi - lo) * ((double)(z >> 11) * (1.0 / 9007199254740992.0));
}

/* n bf16 values in [lo, hi): a 1 Mi host block copied over and over. */
static void fill_bf16(uint16_t *d, int64_t n, double lo, double hi) {
  enum { BLK = 1 << 20 };
  uint16_t *h = sp_xmalloc((size_t)BLK * 2);
  for (int i = 0; i < BLK; i++) h[i] = kern_f32_to_bf16((float)uni(lo, hi));
  for (int64_t off = 0; off < n; off += BLK)
    CUDA_CHECK(cudaMemcpy(d + off, h, (size_t)(n - off < BLK ? n - off : BLK) * 2,
                          cudaMemcpyHostToDevice));
  free(h);
}

/* Random block bytes of a (rows, cols) ggml-format weight, f16 scales 2^-10. */
static void fill_blocks(uint8_t *d, kern_qfmt f, int64_t rows, int64_t cols) {
  const kern_qfmt_info *in = kern_qfmt_get(f);
  const int64_t nb = rows * cols / in->block, bytes = nb * in->block_bytes;
  uint8_t *h = sp_xmalloc((size_t)bytes);
  for (int64_t i = 0; i < bytes; i++) h[i] = (uint8_t)(uni(0, 256));
  const int d_off = 0, m_off = f == KERN_QFMT_Q4_K ? 2 : -1; /* Q8_0: d; Q4_K: d, dmin */
  for (int64_t blk = 0; blk < nb; blk++) {
    uint8_t *p = h + blk * in->block_bytes;
    p[d_off] = 0x00, p[d_off + 1] = 0x14;
    if (m_off >= 0) p[m_off] = 0x00, p[m_off + 1] = 0x14;
  }
  CUDA_CHECK(cudaMemcpy(d, h, (size_t)bytes, cudaMemcpyHostToDevice));
  free(h);
}

static void run_call(void *arg) {
  call *c = arg;
  const shape *s = c->s;
  bufs *b = c->b;
  const kern_cuda_act act = s->gelu ? KERN_CUDA_ACT_GELU_TANH : KERN_CUDA_ACT_NONE;
  const int64_t M = BENCH_M, K = s->K, N = s->N;
  kern_cuda_w8a8_params p = {.sx = b->sx, .bias = b->b, .y = c->y, .y_dtype = KERN_DTYPE_BF16,
                             .M = M, .K = K, .N = N, .act = act, .scratch = b->scratch,
                             .scratch_bytes = b->scratch_bytes};
  kern_qtensor t = {.rows = N, .cols = K};
  switch (c->v) {
  case V_BF16: kern_cuda_linear(c->g, b->x, b->w, b->b, c->y, KERN_DTYPE_BF16, M, K, N, act, 0);
    return;
  case V_FP8_QUANT: kern_cuda_quantize_fp8_rows(b->x, KERN_DTYPE_BF16, M, K, b->xq, b->sx, 0);
    /* fall through */
  case V_FP8_AUTO: case V_FP8_EPI: case V_FP8_FAST:
    p.fmt = KERN_QFMT_E4M3_ROW, p.x_q = b->xq, p.w_q = b->wq8, p.sw = b->sw8;
    p.path = c->v == V_FP8_EPI    ? KERN_CUDA_W8A8_EPILOGUE
             : c->v == V_FP8_FAST ? KERN_CUDA_W8A8_GEMM_SCALES_FAST
                                  : KERN_CUDA_W8A8_AUTO;
    c->took = kern_cuda_linear_w8a8(c->g, &p, 0);
    return;
  case V_I8_QUANT: kern_cuda_quantize_i8_rows(b->x, KERN_DTYPE_BF16, M, K, (int8_t *)b->xq, b->sx,
                                              0);
    /* fall through */
  case V_I8:
    p.fmt = KERN_QFMT_I8_ROW, p.x_q = b->xq, p.w_q = b->wi8, p.sw = b->swi8;
    c->took = kern_cuda_linear_w8a8(c->g, &p, 0);
    return;
  case V_QX_FP8: kern_cuda_quantize_fp8_rows(b->x, KERN_DTYPE_BF16, M, K, b->xq, b->sx, 0);
    return;
  case V_QX_I8: kern_cuda_quantize_i8_rows(b->x, KERN_DTYPE_BF16, M, K, (int8_t *)b->xq, b->sx, 0);
    return;
  default: break;
  }
  /* weight-only and dequantisation alone */
  const variant base = c->v >= V_DQ_FP8 ? (variant)(c->v - 3) : c->v;
  t.fmt = base == V_WO_FP8 ? KERN_QFMT_E4M3_ROW : base == V_WO_Q8_0 ? KERN_QFMT_Q8_0 : KERN_QFMT_Q4_K;
  t.data = base == V_WO_FP8 ? b->wq8 : base == V_WO_Q8_0 ? b->wq80 : b->wq4k;
  t.scale = base == V_WO_FP8 ? b->sw8 : NULL;
  kern_cuda_dequant_bf16(&t, b->wdq, 0);
  if (c->v < V_DQ_FP8)
    kern_cuda_linear(c->g, b->x, b->wdq, b->b, c->y, KERN_DTYPE_BF16, M, K, N, act, 0);
}

/* Bytes a row "... alone" must move: the stored weight read and bf16
 * written (dequantisation), or bf16 x read and codes and scales written. */
static double moved_bytes(variant v, const shape *s) {
  const double n = (double)s->N * (double)s->K, x = (double)BENCH_M * (double)s->K;
  switch (v) {
  case V_DQ_FP8: return n + 4.0 * s->N + 2.0 * n;
  case V_DQ_Q8_0: return n / 32 * 34 + 2.0 * n;
  case V_DQ_Q4_K: return n / 256 * 144 + 2.0 * n;
  default: return 3.0 * x + 4.0 * BENCH_M;
  }
}

/* Relative L2 of two device bf16 tensors of n values. */
static double rel_l2_dev(const uint16_t *a, const uint16_t *r, int64_t n) {
  uint16_t *ha = sp_xmalloc((size_t)n * 2), *hr = sp_xmalloc((size_t)n * 2);
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(ha, a, (size_t)n * 2, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(hr, r, (size_t)n * 2, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    const double x = kern_bf16_to_f32(ha[i]), y = kern_bf16_to_f32(hr[i]);
    num += (x - y) * (x - y), den += y * y;
  }
  free(ha), free(hr);
  return isfinite(num) ? sqrt(num / (den > 0 ? den : 1)) : INFINITY;
}

/* The reference of variant v: the bf16 GEMM of the weights v uses,
 * dequantised to bf16 (the bf16 weights themselves for the bf16 GEMM). */
static void reference(const call *c) {
  call r = *c;
  r.y = c->b->yref;
  r.v = c->v == V_BF16 ? V_BF16
        : c->v <= V_FP8_QUANT || c->v == V_WO_FP8 ? V_WO_FP8
        : c->v == V_WO_Q8_0 ? V_WO_Q8_0
        : c->v == V_WO_Q4_K ? V_WO_Q4_K
                            : V_COUNT; /* int8: below */
  if (r.v == V_COUNT) { /* int8 weights dequantised: kern_cuda_dequant_bf16 of I8_ROW */
    const kern_qtensor t = {KERN_QFMT_I8_ROW, c->b->wi8, c->b->swi8, c->s->N, c->s->K};
    kern_cuda_dequant_bf16(&t, c->b->wdq, 0);
    kern_cuda_linear(c->g, c->b->x, c->b->wdq, c->b->b, r.y, KERN_DTYPE_BF16, BENCH_M, c->s->K,
                     c->s->N, c->s->gelu ? KERN_CUDA_ACT_GELU_TANH : KERN_CUDA_ACT_NONE, 0);
    return;
  }
  run_call(&r);
}

static void bufs_alloc(bufs *b, int64_t maxK, int64_t maxN, int64_t maxKN) {
  const int64_t M = BENCH_M;
  CUDA_CHECK(cudaMalloc((void **)&b->x, (size_t)(M * maxK) * 2));
  CUDA_CHECK(cudaMalloc((void **)&b->xq, (size_t)(M * maxK)));
  CUDA_CHECK(cudaMalloc((void **)&b->sx, (size_t)M * 4));
  CUDA_CHECK(cudaMalloc((void **)&b->y, (size_t)(M * maxN) * 2));
  CUDA_CHECK(cudaMalloc((void **)&b->yref, (size_t)(M * maxN) * 2));
  b->scratch_bytes = (size_t)(M * maxN) * 4;
  CUDA_CHECK(cudaMalloc((void **)&b->scratch, b->scratch_bytes));
  CUDA_CHECK(cudaMalloc((void **)&b->w, (size_t)maxKN * 2));
  CUDA_CHECK(cudaMalloc((void **)&b->wdq, (size_t)maxKN * 2));
  CUDA_CHECK(cudaMalloc((void **)&b->b, (size_t)maxN * 2));
  CUDA_CHECK(cudaMalloc((void **)&b->wq8, (size_t)maxKN));
  CUDA_CHECK(cudaMalloc((void **)&b->wi8, (size_t)maxKN));
  CUDA_CHECK(cudaMalloc((void **)&b->sw8, (size_t)maxN * 4));
  CUDA_CHECK(cudaMalloc((void **)&b->swi8, (size_t)maxN * 4));
  CUDA_CHECK(cudaMalloc((void **)&b->wq80, (size_t)(maxKN / 32 * 34)));
  CUDA_CHECK(cudaMalloc((void **)&b->wq4k, (size_t)(maxKN / 256 * 144)));
}

static void bufs_free(bufs *b) {
  void *all[] = {b->x, b->xq, b->sx, b->y, b->yref, b->scratch, b->w, b->wdq, b->b,
                 b->wq8, b->wi8, b->sw8, b->swi8, b->wq80, b->wq4k};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) CUDA_CHECK(cudaFree(all[i]));
}

int quant_bench_run(uint64_t seed, const char *json_path) {
  static const shape shapes[] = {{"qkvo", 5120, 5120, 0}, {"ffn.0", 5120, 13824, 1},
                                 {"ffn.2", 13824, 5120, 0}};
  const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
  rng_state = seed;
  kern_cuda_gemm_ctx *g = kern_cuda_gemm_ctx_create(0);
  const int sm = kern_cuda_gemm_ctx_sm(g);
  struct cudaDeviceProp prop;
  int dev;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  bufs b;
  bufs_alloc(&b, 13824, 13824, 13824 * 5120);
  fill_bf16(b.x, (int64_t)BENCH_M * 13824, -2, 2);
  char *json = sp_xmalloc(1 << 16);
  size_t jl = (size_t)snprintf(json, 1 << 16, "{\"bench\":\"quant\",\"device\":\"%s\",\"sm\":%d,"
                               "\"M\":%d,\"seed\":%llu,\"rows\":[", prop.name, sm, BENCH_M,
                               (unsigned long long)seed);
  printf("# quantized GEMMs at M %d on %s (sm_%d), mean of %d after %d warm-up; ratio: of the "
         "bf16 GEMM's time, same shape, same run\n# check: relative L2 against the bf16 GEMM on "
         "the same dequantised weights (<= %.1f)\n# %-6s %-22s %9s %12s %7s %10s  %s\n",
         BENCH_M, prop.name, sm, BENCH_REPS, BENCH_WARM, BENCH_CHECK_TOL, "shape", "variant",
         "ms", "TFLOP/s|GB/s", "ratio", "check", "w8a8 path");
  int failed = 0, first = 1;
  for (int si = 0; si < nshapes; si++) {
    const shape *s = &shapes[si];
    fill_bf16(b.w, s->K * s->N, -0.05, 0.05);
    fill_bf16(b.b, s->N, -0.5, 0.5);
    kern_cuda_quantize_fp8_rows(b.w, KERN_DTYPE_BF16, s->N, s->K, b.wq8, b.sw8, 0);
    kern_cuda_quantize_i8_rows(b.w, KERN_DTYPE_BF16, s->N, s->K, (int8_t *)b.wi8, b.swi8, 0);
    fill_blocks(b.wq80, KERN_QFMT_Q8_0, s->N, s->K);
    fill_blocks(b.wq4k, KERN_QFMT_Q4_K, s->N, s->K);
    double bf16_ms = 0;
    for (int v = 0; v < V_COUNT; v++) {
      if (v <= V_FP8_QUANT && v > V_BF16 && sm < 89) continue;
      if (v == V_FP8_FAST && sm != 90) continue;
      call c = {(variant)v, s, &b, g, b.y, KERN_CUDA_W8A8_AUTO};
      /* the W8A8 rows without the quantiser read the x_q made here, untimed */
      if (v == V_I8)
        kern_cuda_quantize_i8_rows(b.x, KERN_DTYPE_BF16, BENCH_M, s->K, (int8_t *)b.xq, b.sx, 0);
      if (v == V_FP8_AUTO || v == V_FP8_EPI || v == V_FP8_FAST)
        kern_cuda_quantize_fp8_rows(b.x, KERN_DTYPE_BF16, BENCH_M, s->K, b.xq, b.sx, 0);
      double check = -1;
      if (v < V_DQ_FP8) {
        run_call(&c);
        reference(&c);
        check = v == V_BF16 ? 0.0 : rel_l2_dev(b.y, b.yref, (int64_t)BENCH_M * s->N);
      }
      const double ms = dev_time_ms(run_call, &c, BENCH_WARM, BENCH_REPS, 0);
      if (v == V_BF16) bf16_ms = ms;
      const double flop = 2.0 * BENCH_M * (double)s->K * (double)s->N;
      const int ok = check <= BENCH_CHECK_TOL;
      failed += !ok;
      char chk[32];
      if (check < 0) snprintf(chk, sizeof chk, "-");
      else snprintf(chk, sizeof chk, "%.2e%s", check, ok ? "" : " FAIL");
      const char *took = v >= V_FP8_AUTO && v <= V_I8_QUANT
                             ? (c.took == KERN_CUDA_W8A8_EPILOGUE ? "epilogue"
                                : c.took == KERN_CUDA_W8A8_GEMM_SCALES ? "gemm-scales"
                                                                       : "gemm-scales-fast")
                             : "-";
      const double rate = v < V_DQ_FP8 ? flop / ms * 1e-9 : moved_bytes((variant)v, s) / ms * 1e-6;
      printf("  %-6s %-22s %9.3f %12.1f %7.3f %10s  %s\n", s->name, vname[v], ms, rate,
             ms / bf16_ms, chk, took);
      fflush(stdout);
      jl += (size_t)snprintf(json + jl, (1 << 16) - jl,
                             "%s{\"shape\":\"%s\",\"K\":%lld,\"N\":%lld,\"variant\":\"%s\","
                             "\"path\":\"%s\",\"ms\":%.4f,\"%s\":%.1f,\"ratio_to_bf16\":%.4f,"
                             "\"check_rel_l2\":%.3e}",
                             first ? "" : ",", s->name, (long long)s->K, (long long)s->N,
                             vname[v], took, ms, v < V_DQ_FP8 ? "tflops" : "gbps", rate,
                             ms / bf16_ms, check);
      first = 0;
    }
  }
  jl += (size_t)snprintf(json + jl, (1 << 16) - jl, "],\"failed\":%d}", failed);
  printf("%s\n", json);
  if (json_path) {
    FILE *f = fopen(json_path, "w");
    if (!f || fprintf(f, "%s\n", json) < 0 || fclose(f) != 0) {
      fprintf(stderr, "quant_bench: cannot write %s\n", json_path);
      failed++;
    }
  }
  free(json);
  bufs_free(&b);
  kern_cuda_gemm_ctx_destroy(g);
  return failed ? 1 : 0;
}
