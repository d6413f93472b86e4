/* Attention benchmark of our backends: ms and TFLOP/s of the own
 * flash kernel and cuDNN's fused attention at the Wan shapes, 40 heads x
 * 128: 32,760 and 75,600 tokens, self and cross (512 context rows).
 * FLOPs = 4 * Lq * Lk * heads * 128.
 * Before timing, every flash output is compared with cudnn's (relative L2
 * between them <= 2e-2, both bf16 paths of the same exact attention): a
 * wrong kernel is not timed as a fast one.
 *
 *   test_attention_bench             ctest mode: the 32,760 self shape only,
 *                                    3 timed runs, checks and table
 *   test_attention_bench --bench     all four shapes, then self-attention
 *                                    over 8,190 and 16,380 tokens (where
 *                                    --attn auto's rule, kern_attn_auto_rule,
 *                                    has no measurement), 20 timed runs
 *                                    each
 *   test_attention_bench --variants  every variant of the flash kernel
 *       (tests/gpu/dev/flash_variants.h): first checked on Lq = Lk = 1000,
 *       2 heads (tails for every tile shape) against fp32 attention on the
 *       CPU, within 2x (+ 2e-4) of a plain bf16 implementation's error and
 *       bit-identical to the first variant with the same register tile;
 *       then timed at self-32760 (3 runs), self-75600 (1 run) and
 *       cross-32760 (20 runs), each output checked against cudnn first.
 *       One table row per variant and a cudnn row; about 2 minutes on an
 *       H200.
 *   test_attention_bench --fa3-variants  every variant of the Hopper kernel
 *       (tests/gpu/dev/fa3_variants.h, sm_90 only): first checked per head
 *       dim on Lq = Lk = 1000, 2 heads, as --variants checks flash (the
 *       key: the variant's key tile); then timed at head dim 128 on the
 *       three shapes of --variants (each output checked against cudnn),
 *       and at head dim 64 on self-32760 and cross-32760 (each output
 *       against the first head-dim-64 variant's, relative L2 <= 2e-2).
 *   test_attention_bench --fa3-variants WORD  only the variants whose name
 *       holds WORD (e.g. fp8), and the cudnn row
 * The default mode and --bench add an fa3 row (kern_attn_fa3), an
 * fa3-int8 row (kern_attn_fa3_int8_run, its quantisation passes inside the
 * time) and an fa3-fp8 row (kern_attn_fa3_fp8_run, likewise) where fa3
 * runs, checked against cudnn as the flash row is (int8: relative L2 <=
 * INT8_VS_BF16, fp8: <= FP8_VS_BF16). --fa3-variants holds the 8-bit
 * variants to those bounds too.
 * Output: a table (header lines start with '#') and one JSON line per
 * result prefixed "json ". launch/bench/bench_attention.sh runs this and
 * PyTorch's SDPA side by side. Exit 77 without a CUDA device, 1 when a
 * check failed. */
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kern_attn.h"
#include "kern_cpu.h"
#include "dev_time.h"
#include "fa3_variants.h"
#include "flash_variants.h"
#include "kern_dtype.h"
#include "log.h"

#define SP_TEST_CUDA
#include "sp_test.h"

#define HEADS 40
/* fa3-int8 against cudnn's bf16: the bound 8-bit attention is held to
 * against fp32 (tests/gpu/test_attention.c holds it to fp32 itself) */
#define INT8_VS_BF16 3e-2
/* fa3-fp8 (P and V in e4m3 as well) against cudnn's bf16: its CPU
 * emulation (launch/bench/dev/fa3_int8_emulation.py) puts it at 3.3e-2
 * from fp32 on uniform inputs like these, above fa3-int8's bound
 * (tests/gpu/test_attention.c holds it to the scheme's CPU form) */
#define FP8_VS_BF16 5e-2
typedef struct bcase {
  int64_t Lq, Lk;
  const char *name;
  int64_t hd; /* 0: KERN_ATTN_HD */
} bcase;

static int64_t bcase_hd(const bcase *bc) { return bc->hd ? bc->hd : KERN_ATTN_HD; }

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) {
    fprintf(stderr, "FAIL: out of host memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

/* n bf16 values uniform in [-a, a) from the tests' generator, started at
 * *state and left there for the next call. */
static void fill_host(uint16_t *h, int64_t n, float a, uint64_t *state) {
  sp_rand_state_set(*state);
  for (int64_t i = 0; i < n; i++) h[i] = kern_f32_to_bf16((float)sp_rand_uniform(-a, a));
  *state = sp_rand_state_get();
}

/* Fills n bf16 values on the device with uniform [-a, a) numbers: a 1 Mi
 * random block made on the host, copied over and over (the long shapes
 * would take seconds to generate value by value). */
static void fill_dev(uint16_t *d, int64_t n, float a, uint64_t *state) {
  enum { BLK = 1 << 20 };
  static uint16_t h[BLK];
  fill_host(h, BLK, a, state);
  for (int64_t off = 0; off < n; off += BLK) {
    int64_t m = n - off < BLK ? n - off : BLK;
    CHECK_CUDA(cudaMemcpy(d + off, h, (size_t)m * 2, cudaMemcpyHostToDevice));
  }
}

/* Relative L2 of a against ref (both bf16, n values); *max_rel (may be
 * NULL) gets max |a - ref| / max |ref|. */
static double rel_l2_bf16(const uint16_t *a, const uint16_t *ref, int64_t n, double *max_rel) {
  double num = 0, den = 0, dmax = 0, rmax = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = kern_bf16_to_f32(a[i]), y = kern_bf16_to_f32(ref[i]);
    num += (x - y) * (x - y);
    den += y * y;
    dmax = fabs(x - y) > dmax ? fabs(x - y) : dmax;
    rmax = fabs(y) > rmax ? fabs(y) : rmax;
  }
  if (max_rel) *max_rel = rmax > 0 ? dmax / rmax : dmax;
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The same against an fp32 reference. */
static double rel_l2_f32(const uint16_t *a, const float *ref, int64_t n, double *max_rel) {
  double num = 0, den = 0, dmax = 0, rmax = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = kern_bf16_to_f32(a[i]), y = ref[i];
    num += (x - y) * (x - y);
    den += y * y;
    dmax = fabs(x - y) > dmax ? fabs(x - y) : dmax;
    rmax = fabs(y) > rmax ? fabs(y) : rmax;
  }
  if (max_rel) *max_rel = rmax > 0 ? dmax / rmax : dmax;
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The own kernel later "own" calls run: a flash variant (dev_flash_run; 0
 * is the production kernel, kern_attn_flash), or with use_fa3 an fa3
 * variant (dev_fa3_run; -1 is kern_attn_fa3). */
static int flash_variant = 0;
static int use_fa3, fa3_variant = -1;
/* with use_fa3 and fa3_variant -1: 1 kern_attn_fa3_int8_run, 2 kern_attn_fa3_fp8_run
 * instead of kern_attn_fa3 (with a variant: its precision, dev_fa3_variant.int8) */
static int use_int8;

/* The bound against cudnn's bf16 of the precision use_int8 names. */
static double bound_vs_bf16(int prec) {
  return prec == 2 ? FP8_VS_BF16 : prec == 1 ? INT8_VS_BF16 : 2e-2;
}
static kern_attn_fa3_int8 *int8_ctx;

static void use_variant(int i) { flash_variant = i; }

/* The own kernel chosen above. */
static void run_own(kern_attn_params p, cudaStream_t st) {
  if (!use_fa3)
    dev_flash_run(flash_variant, p, st);
  else if (fa3_variant < 0 && use_int8 == 2)
    kern_attn_fa3_fp8_run(int8_ctx, p, st);
  else if (fa3_variant < 0 && use_int8)
    kern_attn_fa3_int8_run(int8_ctx, p, st);
  else if (fa3_variant < 0)
    kern_attn_fa3(p, st);
  else
    dev_fa3_run(fa3_variant, p, st);
}

/* One call of the own kernel (cd NULL) or cudnn; 0, or 1 when cudnn
 * refused. */
static int run_backend(kern_attn_cudnn *cd, kern_attn_params p, cudaStream_t st) {
  if (!cd) {
    run_own(p, st);
    return 0;
  }
  return kern_attn_cudnn_run(cd, p, st) == SP_OK ? 0 : 1;
}

/* One run_backend call, as dev_time_ms calls it. */
typedef struct backend_job {
  kern_attn_cudnn *cd;
  kern_attn_params p;
  cudaStream_t st;
} backend_job;

static void backend_job_call(void *arg) {
  const backend_job *j = arg;
  (void)run_backend(j->cd, j->p, j->st);
}

/* ms per call over iters calls, after `warm` untimed ones. The caller has
 * made one successful call with the same arguments (a cudnn plan cached). */
static double time_backend(kern_attn_cudnn *cd, kern_attn_params p, int warm, int iters,
                           cudaStream_t st) {
  backend_job j = {cd, p, st};
  return dev_time_ms(backend_job_call, &j, warm, iters, st);
}

static void print_json(const bcase *bc, const char *backend, const char *variant, double ms,
                       double tf, const char *gpu) {
  printf("json {\"case\":\"%s\",\"backend\":\"%s\",", bc->name, backend);
  if (variant) printf("\"variant\":\"%s\",", variant);
  printf("\"Lq\":%lld,\"Lk\":%lld,\"heads\":%d,\"hd\":%d,\"ms\":%.4f,\"tflops\":%.2f,"
         "\"gpu\":\"%s\"}\n",
         (long long)bc->Lq, (long long)bc->Lk, HEADS, (int)bcase_hd(bc), ms, tf, gpu);
}

/* One shape on the device: inputs, an output, and cudnn's output on the
 * host (NULL when cudnn refused it or is missing). */
typedef struct dev_case {
  const bcase *bc;
  uint16_t *q, *k, *v, *o;
  uint16_t *ref; /* host, (Lq, heads, hd) */
  int64_t nq;
  double flop;
} dev_case;

static void dev_case_make(const bcase *bc, uint64_t seed, kern_attn_cudnn *cd, cudaStream_t st,
                          dev_case *dc) {
  const int64_t hd = bcase_hd(bc), nk = bc->Lk * HEADS * hd;
  dc->bc = bc;
  dc->nq = bc->Lq * HEADS * hd;
  dc->flop = 4.0 * (double)bc->Lq * (double)bc->Lk * HEADS * hd;
  CHECK_CUDA(cudaMalloc((void **)&dc->q, (size_t)dc->nq * 2));
  CHECK_CUDA(cudaMalloc((void **)&dc->k, (size_t)nk * 2));
  CHECK_CUDA(cudaMalloc((void **)&dc->v, (size_t)nk * 2));
  CHECK_CUDA(cudaMalloc((void **)&dc->o, (size_t)dc->nq * 2));
  uint64_t s = seed;
  fill_dev(dc->q, dc->nq, 2.f, &s);
  fill_dev(dc->k, nk, 2.f, &s);
  fill_dev(dc->v, nk, 1.f, &s);
  dc->ref = NULL;
  kern_attn_params p = {dc->q, dc->k, dc->v, dc->o, bc->Lq, bc->Lk, HEADS, hd, 0.f};
  if (cd && hd == KERN_ATTN_HD && run_backend(cd, p, st) == 0) {
    dc->ref = xmalloc((size_t)dc->nq * 2);
    CHECK_CUDA(cudaMemcpy(dc->ref, dc->o, (size_t)dc->nq * 2, cudaMemcpyDeviceToHost));
  }
}

static void dev_case_free(dev_case *dc) {
  CHECK_CUDA(cudaFree(dc->q));
  CHECK_CUDA(cudaFree(dc->k));
  CHECK_CUDA(cudaFree(dc->v));
  CHECK_CUDA(cudaFree(dc->o));
  free(dc->ref);
}

/* Runs the own kernel on p once into dc->o and compares with cudnn: 1 when
 * they agree. */
static int agrees_with_cudnn(const dev_case *dc, kern_attn_params p, uint16_t *host,
                             cudaStream_t st, const char *what) {
  run_own(p, st);
  CHECK_CUDA(cudaStreamSynchronize(st));
  CHECK_CUDA(cudaMemcpy(host, dc->o, (size_t)dc->nq * 2, cudaMemcpyDeviceToHost));
  double d = rel_l2_bf16(host, dc->ref, dc->nq, NULL);
  const double bound = bound_vs_bf16(use_int8);
  printf("# %s: %s vs cudnn rel L2 %.3e\n", dc->bc->name, what, d);
  if (!(d <= bound)) {
    fprintf(stderr, "FAIL %s: %s and cudnn disagree (rel L2 %.3e)\n", dc->bc->name, what, d);
    return 0;
  }
  return 1;
}

/* ---- default mode and --bench ------------------------------------------- */

/* fa3 runs on this GPU and build (kern_attn_fa3_available). */
static int fa3_here;

static int bench_backends(int full, uint64_t seed, kern_attn_cudnn *cd, cudaStream_t st,
                          const char *gpu) {
  static const bcase cases[] = {
      {32760, 32760, "self-32760", 0},
      {32760, 512, "cross-32760", 0},
      {75600, 75600, "self-75600", 0},
      {75600, 512, "cross-75600", 0},
      {8190, 8190, "self-8190", 0},
      {16380, 16380, "self-16380", 0},
  };
  enum { B_FLASH, B_CUDNN, B_FA3, B_INT8, B_FP8, NB };
  static const char *const names[NB] = {"flash", "cudnn", "fa3", "fa3-int8", "fa3-fp8"};
  const int ncases = full ? (int)(sizeof cases / sizeof cases[0]) : 1, iters = full ? 20 : 3;
  int fails = 0;
  printf("# %-12s %-12s %8s %8s %10s %10s\n", "case", "backend", "Lq", "Lk", "ms", "TFLOP/s");
  for (int c = 0; c < ncases; c++) {
    dev_case dc;
    dev_case_make(&cases[c], seed + (uint64_t)c, cd, st, &dc);
    const bcase *bc = dc.bc;
    kern_attn_params p = {dc.q, dc.k, dc.v, dc.o, bc->Lq, bc->Lk, HEADS, KERN_ATTN_HD, 0.f};
    uint16_t *host = xmalloc((size_t)dc.nq * 2);
    int ok[NB] = {0};
    use_variant(0);
    ok[B_FLASH] = !dc.ref || agrees_with_cudnn(&dc, p, host, st, "flash");
    fails += !ok[B_FLASH];
    ok[B_CUDNN] = dc.ref != NULL;
    if (fa3_here) {
      use_fa3 = 1;
      ok[B_FA3] = !dc.ref || agrees_with_cudnn(&dc, p, host, st, "fa3");
      use_int8 = 1;
      ok[B_INT8] = !dc.ref || agrees_with_cudnn(&dc, p, host, st, "fa3-int8");
      use_int8 = 2;
      ok[B_FP8] = !dc.ref || agrees_with_cudnn(&dc, p, host, st, "fa3-fp8");
      use_fa3 = use_int8 = 0;
      fails += !ok[B_FA3] + !ok[B_INT8] + !ok[B_FP8];
    }
    free(host);
    for (int b = 0; b < NB; b++) {
      if ((b == B_FA3 || b == B_INT8 || b == B_FP8) && !fa3_here) continue;
      if (!ok[b]) {
        printf("  %-12s %-12s %8lld %8lld %10s %10s\n", bc->name, names[b], (long long)bc->Lq,
               (long long)bc->Lk, b == B_CUDNN || !dc.ref ? "refused" : "wrong", "-");
        continue;
      }
      use_fa3 = b == B_FA3 || b == B_INT8 || b == B_FP8;
      use_int8 = b == B_FP8 ? 2 : b == B_INT8;
      double ms = time_backend(b == B_CUDNN ? cd : NULL, p, 2, iters, st);
      use_fa3 = use_int8 = 0;
      double tf = dc.flop / (ms * 1e-3) / 1e12;
      printf("  %-12s %-12s %8lld %8lld %10.3f %10.1f\n", bc->name, names[b], (long long)bc->Lq,
             (long long)bc->Lk, ms, tf);
      print_json(bc, names[b], NULL, ms, tf, gpu);
      if (!(ms > 0)) {
        fprintf(stderr, "FAIL %s %s: no time measured\n", bc->name, names[b]);
        fails++;
      }
    }
    dev_case_free(&dc);
  }
  return fails;
}

/* ---- --variants --------------------------------------------------------- */

#define SMALL_L 1000
#define SMALL_HEADS 2

/* The small check's data: bf16 inputs on the device, fp32 attention of
 * those inputs on the CPU, and a plain bf16 implementation's error. */
typedef struct small_case {
  uint16_t *dq, *dk, *dv, *dout;
  float *exact;
  double plain_err;
  int64_t n, hd;
} small_case;

static void small_case_make(uint64_t seed, int64_t hd, small_case *sc) {
  const int64_t n = (int64_t)SMALL_L * SMALL_HEADS * hd;
  uint16_t *h[3];
  float *f[3];
  uint64_t s = seed;
  for (int i = 0; i < 3; i++) {
    h[i] = xmalloc((size_t)n * 2);
    f[i] = xmalloc((size_t)n * 4);
    fill_host(h[i], n, i == 2 ? 1.f : 2.f, &s);
    kern_bf16_to_f32_n(h[i], f[i], (size_t)n);
  }
  sc->n = n;
  sc->hd = hd;
  sc->exact = xmalloc((size_t)n * 4);
  kern_cpu_attention(f[0], f[1], f[2], sc->exact, SMALL_L, SMALL_L, SMALL_HEADS, hd);
  uint16_t *plain = xmalloc((size_t)n * 2);
  kern_f32_to_bf16_n(sc->exact, plain, (size_t)n);
  sc->plain_err = rel_l2_f32(plain, sc->exact, n, NULL);
  uint16_t **d[3] = {&sc->dq, &sc->dk, &sc->dv};
  for (int i = 0; i < 3; i++) {
    CHECK_CUDA(cudaMalloc((void **)d[i], (size_t)n * 2));
    CHECK_CUDA(cudaMemcpy(*d[i], h[i], (size_t)n * 2, cudaMemcpyHostToDevice));
    free(h[i]), free(f[i]);
  }
  CHECK_CUDA(cudaMalloc((void **)&sc->dout, (size_t)n * 2));
  free(plain);
}

static void small_case_free(small_case *sc) {
  CHECK_CUDA(cudaFree(sc->dq));
  CHECK_CUDA(cudaFree(sc->dk));
  CHECK_CUDA(cudaFree(sc->dv));
  CHECK_CUDA(cudaFree(sc->dout));
  free(sc->exact);
}

static int bench_variants(uint64_t seed, kern_attn_cudnn *cd, cudaStream_t st, const char *gpu) {
  static const bcase cases[] = {
      {32760, 32760, "self-32760", 0},
      {75600, 75600, "self-75600", 0},
      {32760, 512, "cross-32760", 0},
  };
  static const int iters[] = {3, 1, 20};
  enum { NC = 3 };
  struct timespec ta, tb;
  clock_gettime(CLOCK_MONOTONIC, &ta);
  int fails = 0;
  small_case sc;
  small_case_make(seed, KERN_ATTN_HD, &sc);
  dev_case dc[NC];
  int64_t nmax = 0;
  for (int c = 0; c < NC; c++) {
    dev_case_make(&cases[c], seed + 1 + (uint64_t)c, cd, st, &dc[c]);
    nmax = dc[c].nq > nmax ? dc[c].nq : nmax;
    if (!dc[c].ref) {
      fprintf(stderr, "FAIL %s: no cudnn output to check the variants against\n", cases[c].name);
      fails++;
    }
  }
  uint16_t *host = xmalloc((size_t)nmax * 2);
  const double bound = 2.0 * sc.plain_err + 2e-4;
  printf("# small check: Lq = Lk = %d, %d heads, fp32 CPU reference, plain bf16 rel L2 %.3e, "
         "bound %.3e\n",
         SMALL_L, SMALL_HEADS, sc.plain_err, bound);
  printf("# %-20s %4s %3s %3s %4s %9s %9s", "variant", "br", "bc", "sub", "lazy", "relL2", "maxrel");
  for (int c = 0; c < NC; c++) printf(" %11s %9s", cases[c].name, "TFLOP/s");
  printf("\n");

  const int nv = dev_flash_variant_count();
  uint16_t **first = calloc((size_t)nv, sizeof *first); /* small output, first variant per sub */
  int *first_sub = calloc((size_t)nv, sizeof *first_sub);
  int nfirst = 0;
  if (!first || !first_sub) {
    fprintf(stderr, "FAIL: out of host memory\n");
    exit(1);
  }
  for (int i = 0; i <= nv; i++) {
    dev_flash_variant fv = {"cudnn", 0, 0, 0, 0};
    const int is_cudnn = i == nv;
    if (!is_cudnn && dev_flash_variant_get(i, &fv) != SP_OK) {
      fprintf(stderr, "FAIL: variant %d of %d not listed\n", i, nv);
      fails++;
      continue;
    }
    int ok = 1;
    if (is_cudnn) {
      printf("  %-20s %4s %3s %3s %4s %9s %9s", fv.name, "-", "-", "-", "-", "-", "-");
    } else {
      use_variant(i);
      kern_attn_params p = {sc.dq, sc.dk, sc.dv, sc.dout, SMALL_L, SMALL_L, SMALL_HEADS,
                            KERN_ATTN_HD, 0.f};
      dev_flash_run(i, p, st);
      CHECK_CUDA(cudaStreamSynchronize(st));
      CHECK_CUDA(cudaMemcpy(host, sc.dout, (size_t)sc.n * 2, cudaMemcpyDeviceToHost));
      double maxrel = 0, err = rel_l2_f32(host, sc.exact, sc.n, &maxrel);
      printf("  %-20s %4d %3d %3d %4d %9.3e %9.3e", fv.name, fv.br, fv.bc, fv.sub, fv.lazy, err,
             maxrel);
      if (!(err <= bound && err <= 1e-2)) {
        fprintf(stderr, "\nFAIL %s: small check rel L2 %.3e above bound %.3e\n", fv.name, err,
                bound);
        ok = 0;
      }
      int f = 0;
      while (f < nfirst && first_sub[f] != fv.sub) f++;
      if (f == nfirst) {
        first_sub[nfirst] = fv.sub;
        first[nfirst] = xmalloc((size_t)sc.n * 2);
        memcpy(first[nfirst++], host, (size_t)sc.n * 2);
      } else if (memcmp(host, first[f], (size_t)sc.n * 2) != 0) {
        fprintf(stderr, "\nFAIL %s: not bit-identical to the first variant with sub %d\n", fv.name,
                fv.sub);
        ok = 0;
      }
    }
    for (int c = 0; c < NC; c++) {
      const bcase *bc = dc[c].bc;
      kern_attn_params p = {dc[c].q, dc[c].k, dc[c].v, dc[c].o, bc->Lq, bc->Lk, HEADS,
                            KERN_ATTN_HD, 0.f};
      if (!ok || !dc[c].ref) {
        printf(" %11s %9s", ok ? "unchecked" : "wrong", "-");
        continue;
      }
      /* the check run is the warm-up run */
      if (!is_cudnn && !agrees_with_cudnn(&dc[c], p, host, st, fv.name)) {
        ok = 0;
        printf(" %11s %9s", "wrong", "-");
        continue;
      }
      double ms = time_backend(is_cudnn ? cd : NULL, p, is_cudnn, iters[c], st);
      double tf = dc[c].flop / (ms * 1e-3) / 1e12;
      printf(" %11.3f %9.1f", ms, tf);
      print_json(bc, is_cudnn ? "cudnn" : "flash", is_cudnn ? NULL : fv.name, ms, tf, gpu);
    }
    printf("\n");
    fails += !ok;
  }
  use_variant(0);
  for (int f = 0; f < nfirst; f++) free(first[f]);
  free(first), free(first_sub), free(host);
  for (int c = 0; c < NC; c++) dev_case_free(&dc[c]);
  small_case_free(&sc);
  clock_gettime(CLOCK_MONOTONIC, &tb);
  printf("# variants: %d, %.1f s\n", nv,
         (double)(tb.tv_sec - ta.tv_sec) + 1e-9 * (double)(tb.tv_nsec - ta.tv_nsec));
  return fails;
}

/* ---- --fa3-variants ------------------------------------------------------ */

/* Variant i of fa3 on the small case: prints its row's start (name, tile,
 * relL2, maxrel) and returns 1 when within the bound and bit-identical to
 * the first variant with the same head dim and key tile (*firsts: the
 * outputs of those, keyed by hd * 1000 + bn in keys[]). */
static int fa3_small_check(int i, const dev_fa3_variant *fv, const small_case *sc, uint16_t *host,
                           uint16_t **firsts, int *keys, int *nfirst, cudaStream_t st) {
  kern_attn_params p = {sc->dq,  sc->dk,  sc->dv,      sc->dout, SMALL_L,
                        SMALL_L, SMALL_HEADS, sc->hd, 0.f};
  dev_fa3_run(i, p, st);
  CHECK_CUDA(cudaStreamSynchronize(st));
  CHECK_CUDA(cudaMemcpy(host, sc->dout, (size_t)sc->n * 2, cudaMemcpyDeviceToHost));
  double maxrel = 0, err = rel_l2_f32(host, sc->exact, sc->n, &maxrel);
  /* 8-bit: its bound (test_attention holds it to the scheme's CPU form) */
  const double bound = fv->int8 ? bound_vs_bf16(fv->int8) : 2.0 * sc->plain_err + 2e-4;
  printf("  %-26s %4d %3d %3d %2d %2d %2d %2d %9.3e %9.3e", fv->name, fv->hd, fv->bn, fv->ncwg,
         fv->stages, fv->overlap, fv->pingpong, fv->persist, err, maxrel);
  int ok = 1;
  if (!(err <= bound && (fv->int8 || err <= 1e-2))) {
    fprintf(stderr, "\nFAIL %s: small check rel L2 %.3e above bound %.3e\n", fv->name, err, bound);
    ok = 0;
  }
  const int key = ((fv->hd * 1000 + fv->bn) * 3 + fv->int8) * 4 + (fv->int8 ? fv->ncwg : 0);
  int f = 0;
  while (f < *nfirst && keys[f] != key) f++;
  if (f == *nfirst) {
    keys[f] = key;
    firsts[f] = xmalloc((size_t)sc->n * 2);
    memcpy(firsts[f], host, (size_t)sc->n * 2);
    (*nfirst)++;
  } else if (memcmp(host, firsts[f], (size_t)sc->n * 2) != 0) {
    fprintf(stderr, "\nFAIL %s: not bit-identical to the first variant with its tiles\n",
            fv->name);
    ok = 0;
  }
  return ok;
}

static int bench_fa3_variants(uint64_t seed, kern_attn_cudnn *cd, cudaStream_t st,
                              const char *gpu, const char *only) {
  static const bcase cases[] = {
      {32760, 32760, "self-32760", 128}, {75600, 75600, "self-75600", 128},
      {32760, 512, "cross-32760", 128},  {32760, 32760, "self-32760", 64},
      {32760, 512, "cross-32760", 64},
  };
  static const int iters[] = {10, 2, 50, 10, 50};
  enum { NC = 5 };
  int fails = 0;
  small_case sc[2]; /* hd 128, 64 */
  small_case_make(seed, 128, &sc[0]);
  small_case_make(seed + 7, 64, &sc[1]);
  dev_case dc[NC];
  int64_t nmax = 0;
  for (int c = 0; c < NC; c++) {
    dev_case_make(&cases[c], seed + 1 + (uint64_t)c, cd, st, &dc[c]);
    nmax = dc[c].nq > nmax ? dc[c].nq : nmax;
  }
  /* the reference of the hd 64 cases: the first hd 64 variant's output */
  uint16_t *ref64[NC] = {0};
  uint16_t *host = xmalloc((size_t)nmax * 2);
  printf("# small checks: Lq = Lk = %d, %d heads, fp32 CPU reference; plain bf16 rel L2 %.3e "
         "(hd 128), %.3e (hd 64)\n", SMALL_L, SMALL_HEADS, sc[0].plain_err, sc[1].plain_err);
  printf("# %-26s %4s %3s %3s %2s %2s %2s %2s %9s %9s", "variant", "hd", "bn", "wg", "st", "ov",
         "pp", "pe", "relL2", "maxrel");
  for (int c = 0; c < NC; c++) printf(" %8s/%-3d %9s", cases[c].name, (int)cases[c].hd, "TFLOP/s");
  printf("\n");
  const int nv = dev_fa3_variant_count();
  uint16_t **firsts = calloc((size_t)nv + 1, sizeof *firsts);
  int *keys = calloc((size_t)nv + 1, sizeof *keys), nfirst = 0;
  for (int i = 0; i <= nv; i++) {
    dev_fa3_variant fv = {"cudnn", 128, 0, 0, 0, 0, 0, 0, 0, 0};
    const int is_cudnn = i == nv;
    int ok = 1;
    if (is_cudnn) {
      printf("  %-26s %4s %3s %3s %2s %2s %2s %2s %9s %9s", fv.name, "-", "-", "-", "-", "-", "-",
             "-", "-", "-");
    } else {
      if (dev_fa3_variant_get(i, &fv) != SP_OK) {
        fprintf(stderr, "FAIL: fa3 variant %d of %d not listed\n", i, nv);
        fails++;
        continue;
      }
      if (only && !strstr(fv.name, only)) continue;
      ok = fa3_small_check(i, &fv, &sc[fv.hd == 64], host, firsts, keys, &nfirst, st);
    }
    use_fa3 = 1;
    use_int8 = fv.int8;
    fa3_variant = i;
    for (int c = 0; c < NC; c++) {
      const bcase *bc = dc[c].bc;
      const int64_t hd = bcase_hd(bc);
      kern_attn_params p = {dc[c].q, dc[c].k, dc[c].v, dc[c].o, bc->Lq, bc->Lk, HEADS, hd, 0.f};
      if (hd != fv.hd || (is_cudnn && !dc[c].ref)) {
        printf(" %12s %9s", "-", "-");
        continue;
      }
      if (!ok) {
        printf(" %12s %9s", "wrong", "-");
        continue;
      }
      if (!is_cudnn && dc[c].ref && !agrees_with_cudnn(&dc[c], p, host, st, fv.name)) ok = 0;
      if (!is_cudnn && !dc[c].ref) { /* hd 64: against the first hd 64 variant */
        run_own(p, st);
        CHECK_CUDA(cudaStreamSynchronize(st));
        CHECK_CUDA(cudaMemcpy(host, dc[c].o, (size_t)dc[c].nq * 2, cudaMemcpyDeviceToHost));
        if (!ref64[c]) {
          ref64[c] = xmalloc((size_t)dc[c].nq * 2);
          memcpy(ref64[c], host, (size_t)dc[c].nq * 2);
        }
        double d = rel_l2_bf16(host, ref64[c], dc[c].nq, NULL);
        if (!(d <= bound_vs_bf16(fv.int8))) {
          fprintf(stderr, "\nFAIL %s %s hd 64: rel L2 %.3e against the first hd 64 variant\n",
                  fv.name, bc->name, d);
          ok = 0;
        }
      }
      if (!ok) {
        printf(" %12s %9s", "wrong", "-");
        continue;
      }
      double ms = time_backend(is_cudnn ? cd : NULL, p, 1, iters[c], st);
      double tf = dc[c].flop / (ms * 1e-3) / 1e12;
      printf(" %12.3f %9.1f", ms, tf);
      print_json(bc, is_cudnn ? "cudnn" : "fa3", is_cudnn ? NULL : fv.name, ms, tf, gpu);
    }
    use_fa3 = use_int8 = 0;
    fa3_variant = -1;
    printf("\n");
    fails += !ok;
  }
  for (int f = 0; f < nfirst; f++) free(firsts[f]);
  for (int c = 0; c < NC; c++) free(ref64[c]), dev_case_free(&dc[c]);
  free(firsts), free(keys), free(host);
  small_case_free(&sc[0]);
  small_case_free(&sc[1]);
  return fails;
}

int main(int argc, char **argv) {
  const int full = argc > 1 && strcmp(argv[1], "--bench") == 0;
  const int variants = argc > 1 && strcmp(argv[1], "--variants") == 0;
  const int fa3v = argc > 1 && strcmp(argv[1], "--fa3-variants") == 0;
  if (argc > 3 || (argc > 2 && !fa3v) || (argc > 1 && !full && !variants && !fa3v)) {
    fprintf(stderr, "usage: %s [--bench | --variants | --fa3-variants [WORD]]\n", argv[0]);
    return 2;
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("skip: no CUDA device\n");
    return 77;
  }
  struct cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  if (prop.major < 8) {
    printf("skip: %s is sm_%d%d, the flash kernel needs sm_80 or later\n", prop.name, prop.major,
           prop.minor);
    return 77;
  }
  const char *env = getenv("SP_SEED");
  const uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
  kern_attn_cudnn *cd = NULL;
  if (kern_attn_cudnn_create(&cd) != SP_OK) cd = NULL; /* cause logged; flash rows only */
  char why[192];
  fa3_here = kern_attn_fa3_available(why, sizeof why);
  if (!fa3_here) printf("# fa3: no rows: %s\n", why);
  if (fa3_here && kern_attn_fa3_int8_create(&int8_ctx) != SP_OK) {
    fprintf(stderr, "FAIL: no 8-bit (fa3-int8, fa3-fp8) context where fa3 runs (see the log)\n");
    return 1;
  }
  if (fa3v && !fa3_here) {
    fprintf(stderr, "FAIL: --fa3-variants on a GPU or build without fa3\n");
    return 1;
  }
  cudaStream_t st;
  CHECK_CUDA(cudaStreamCreate(&st));
  printf("# attention benchmark, %s (sm_%d%d), cudnn %zu, heads %d x %d, bf16, seed %llu\n",
         prop.name, prop.major, prop.minor, cd ? (size_t)cudnnGetVersion() : (size_t)0, HEADS,
         KERN_ATTN_HD, (unsigned long long)seed);
  int fails = variants ? bench_variants(seed, cd, st, prop.name)
              : fa3v   ? bench_fa3_variants(seed, cd, st, prop.name, argc > 2 ? argv[2] : NULL)
                       : bench_backends(full, seed, cd, st, prop.name);
  kern_attn_cudnn_destroy(cd);
  kern_attn_fa3_int8_destroy(int8_ctx);
  CHECK_CUDA(cudaStreamDestroy(st));
  if (!cd) {
    fprintf(stderr, "FAIL: no cudnn (see the log): the cudnn rows are missing\n");
    fails++;
  }
  return fails ? 1 : 0;
}
