/* GPU attention backends (kern_attn.h) against the CPU fp32 attention
 * (kern_cpu_attention).
 *
 * For every shape and backend (flash, cudnn, and the auto context):
 * - error: relative L2 over a subset of query rows (all of them for small
 *   shapes, 256 random rows for long ones) against fp32 attention on the
 *   fp32 inputs, must be <= 1e-2 and within 2x (+ 2e-4) of a plain bf16
 *   implementation's own error (inputs and output rounded to bf16, fp32
 *   arithmetic between: STYLE.md 9);
 * - every output element written (the buffer starts as NaN) and guard
 *   bytes after the output untouched;
 * - a rerun is bit-identical;
 * - the auto context runs fa3 exactly where kern_attn_auto_rule says (with
 *   fa3 available here), another backend elsewhere; on the shapes with at
 *   least KERN_ATTN_FA3_MIN_KEYS keys, the auto context on the queries in
 *   chunks and on one head at a time (as the stage's chunks and Ulysses
 *   ranks call it) gives the bits of one call over the whole shape;
 * - every benchmark variant of the flash kernel (tests/gpu/dev/) passes the
 *   same checks on the shapes up to 4,099 tokens, and variants that share
 *   a register tile width (`sub`) give bit-identical outputs;
 * - fa3 (the Hopper kernel, sm_90 in a build with sm_90a code; on an sm_90
 *   GPU its absence is a failure): the same checks on every shape, head
 *   dims 128 and 64, directly and through an fa3 attention context (which
 *   must report that fa3 ran); every fa3 variant (tests/gpu/dev/
 *   fa3_variants.h, simplest first, so the first failing row names the
 *   stage that broke) on the shapes up to 4,099 tokens, each bit-identical
 *   to the first variant with the same head dim and key tile.
 * - fa3-int8 (kern_attn_fa3_int8_run and its context, where fa3 runs; the
 *   context must run the 8-bit kernel exactly where kern_attn_int8_rule
 *   says, what auto runs on the short-key shapes of head dim 128): against
 *   the same fp32 attention, within 2x (+ 2e-4) of the scheme's own CPU
 *   form (tests/common/sp_test_attn8.h) and under TOL_INT8, the bound
 *   8-bit attention is held to; its variants as fa3's.
 * - fa3-fp8 (kern_attn_fa3_fp8_run and its context, where fa3 runs): the
 *   same checks as fa3-int8 against its own CPU form (sp_test_attn_fp8)
 *   and under TOL_FP8; its context follows the same rule
 *   (kern_attn_8bit_rule); its variants as fa3's.
 * Head dim 64 has fa3 rows only (the other backends are built for 128).
 * Each row prints the largest absolute error, the relative L2 error, the
 * rerun's bit identity and the rerun's time.
 * Inputs are fresh random numbers (seed printed; SP_SEED=n replays one).
 *
 *   test_attention           all shapes, including 32,760 tokens x 2 heads
 *                            and 75,600 tokens x 1 head
 *   test_attention --small   five small shapes (both head dims), for
 *                            compute-sanitizer (memcheck, racecheck,
 *                            synccheck)
 *   --flash-only             only the own flash kernel (racecheck)
 *   --fa3-only               only fa3 and its variants (racecheck)
 *   -v                       log each cuDNN plan: its form and engine
 * Exit 77 with one line when there is no CUDA device. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fa3_variants.h"
#include "kern_attn.h"
#include "kern_cpu.h"
#include "flash_variants.h"
#include "kern_dtype.h"
#include "log.h"
#include "sp_test_attn8.h"

#define GUARD_BYTES 4096
#define SUBSET_ROWS 256
/* 8-bit Q K^T (fa3-int8): int8 keeps 1/254 of a tile's range, so each score
 * moves by some 1e-2 of its spread; on these inputs the scheme's CPU form
 * lands at 0.8-1.2e-2 from fp32 (fa3_int8.cu). */
#define TOL_INT8 3e-2
/* All 8-bit (fa3-fp8): P and V in e4m3 add their own rounding (3 mantissa
 * bits, some 2.5e-2 relative each on these mean-free values): the CPU
 * emulation (launch/bench/dev/fa3_int8_emulation.py, "int8 Q K per block,
 * e4m3 P, e4m3 V per channel") puts the scheme at 3.3e-2 from fp32 on these
 * uniform inputs and 3.2e-3 on model-shaped ones. The cap leaves room above
 * the former; the check that catches kernel bugs is the tight one, within
 * 2x of the scheme's own CPU form. */
#define TOL_FP8 5e-2

#define SP_TEST_CUDA
#include "sp_test.h"

typedef struct shape {
  int64_t Lq, Lk, heads, hd;
  float scale; /* 0: default */
  int need_cudnn; /* cuDNN refusing this shape is a failure */
  const char *what;
} shape;

/* One shape's host data: fp32 inputs, their bf16 forms, the query rows
 * checked and the two references on those rows. */
typedef struct host_case {
  int64_t nrows, *rows;
  float *exact, *plain; /* (nrows, heads, hd) */
  uint16_t *qb, *kb, *vb;
  double plain_err;
  double int8_err; /* the int8 scheme's CPU form's error (< 0: not computed) */
  double fp8_err;  /* the fp8 scheme's CPU form's error (< 0: not computed) */
} host_case;

static void host_case_build(const shape *s, host_case *hc) {
  const int64_t row = s->heads * s->hd;
  const int64_t nq = s->Lq * row, nk = s->Lk * row;
  float *q = malloc((size_t)nq * 4), *k = malloc((size_t)nk * 4), *v = malloc((size_t)nk * 4);
  hc->qb = malloc((size_t)nq * 2), hc->kb = malloc((size_t)nk * 2), hc->vb = malloc((size_t)nk * 2);
  if (!q || !k || !v || !hc->qb || !hc->kb || !hc->vb) {
    fprintf(stderr, "FAIL: out of host memory for shape %s\n", s->what);
    exit(1);
  }
  /* q, k uniform with std 1.5: scores with std ~2.25 at scale 1/sqrt(128),
   * a peaked softmax, far from uniform weights */
  sp_rand_fill(q, nq, -2.6, 2.6);
  sp_rand_fill(k, nk, -2.6, 2.6);
  sp_rand_fill(v, nk, -1.0, 1.0);
  kern_f32_to_bf16_n(q, hc->qb, (size_t)nq);
  kern_f32_to_bf16_n(k, hc->kb, (size_t)nk);
  kern_f32_to_bf16_n(v, hc->vb, (size_t)nk);

  /* rows: all, or a random subset (distinct, sorted, always with the
   * first and last row so the tail tile is checked) */
  hc->nrows = s->Lq <= SUBSET_ROWS ? s->Lq : SUBSET_ROWS;
  hc->rows = malloc((size_t)hc->nrows * sizeof(int64_t));
  if (hc->nrows == s->Lq) {
    for (int64_t i = 0; i < s->Lq; i++) hc->rows[i] = i;
  } else {
    hc->rows[0] = 0, hc->rows[1] = s->Lq - 1;
    for (int64_t i = 2; i < hc->nrows; i++) {
      int64_t r;
      int dup;
      do {
        r = (int64_t)(sp_rand_u64() % (uint64_t)s->Lq);
        dup = 0;
        for (int64_t j = 0; j < i; j++) dup |= hc->rows[j] == r;
      } while (dup);
      hc->rows[i] = r;
    }
  }
  /* the scale enters the CPU reference (fixed 1/sqrt(hd)) through q */
  const float qmul = s->scale > 0.f ? s->scale * sqrtf((float)s->hd) : 1.f;
  float *qs = malloc((size_t)(hc->nrows * row) * 4), *qsb = malloc((size_t)(hc->nrows * row) * 4);
  float *kr = malloc((size_t)nk * 4), *vr = malloc((size_t)nk * 4);
  hc->exact = malloc((size_t)(hc->nrows * row) * 4);
  hc->plain = malloc((size_t)(hc->nrows * row) * 4);
  for (int64_t i = 0; i < hc->nrows; i++)
    for (int64_t j = 0; j < row; j++) {
      qs[i * row + j] = q[hc->rows[i] * row + j] * qmul;
      qsb[i * row + j] = kern_bf16_to_f32(hc->qb[hc->rows[i] * row + j]) * qmul;
    }
  kern_bf16_to_f32_n(hc->kb, kr, (size_t)nk);
  kern_bf16_to_f32_n(hc->vb, vr, (size_t)nk);
  kern_cpu_attention(qs, k, v, hc->exact, hc->nrows, s->Lk, s->heads, s->hd);
  kern_cpu_attention(qsb, kr, vr, hc->plain, hc->nrows, s->Lk, s->heads, s->hd);
  for (int64_t i = 0; i < hc->nrows * row; i++)
    hc->plain[i] = kern_bf16_to_f32(kern_f32_to_bf16(hc->plain[i]));
  hc->plain_err = sp_test_rel_l2_f32(hc->plain, hc->exact, hc->nrows * row);
  hc->int8_err = hc->fp8_err = -1; /* host_case_8bit */
  free(q), free(k), free(v), free(qs), free(qsb), free(kr), free(vr);
}

/* The fa3-int8 and fa3-fp8 schemes' CPU forms on the checked rows (their
 * tiles: the shipped configurations'), their errors against hc->exact into
 * hc->int8_err and hc->fp8_err. */
static void host_case_8bit(const shape *s, host_case *hc) {
  const int64_t row = s->heads * s->hd, nq = s->Lq * row, nk = s->Lk * row;
  float *q = malloc((size_t)nq * 4), *k = malloc((size_t)nk * 4), *v = malloc((size_t)nk * 4);
  float *out = malloc((size_t)(hc->nrows * row) * 4);
  if (!q || !k || !v || !out) {
    fprintf(stderr, "FAIL: out of host memory for shape %s\n", s->what);
    exit(1);
  }
  kern_bf16_to_f32_n(hc->qb, q, (size_t)nq);
  kern_bf16_to_f32_n(hc->kb, k, (size_t)nk);
  kern_bf16_to_f32_n(hc->vb, v, (size_t)nk);
  int bm = 0, bn = 0;
  kern_attn_fa3_int8_blocks(s->hd, &bm, &bn);
  const double scale = s->scale > 0.f ? s->scale : 1.0 / sqrt((double)s->hd);
  const sp_test_attn8_in in = {.q = q, .k = k, .v = v, .Lq = s->Lq, .Lk = s->Lk,
                               .heads = s->heads, .hd = s->hd, .scale = scale, .bm = bm,
                               .bn = bn, .rows = hc->rows, .nrows = hc->nrows,
                               .l_e4m3 = kern_attn_fa3_fp8_l_e4m3(s->hd)};
  sp_test_attn_int8(&in, out);
  hc->int8_err = sp_test_rel_l2_f32(out, hc->exact, hc->nrows * row);
  sp_test_attn_fp8(&in, out);
  hc->fp8_err = sp_test_rel_l2_f32(out, hc->exact, hc->nrows * row);
  free(q), free(k), free(v), free(out);
}

static void host_case_free(host_case *hc) {
  free(hc->rows), free(hc->exact), free(hc->plain), free(hc->qb), free(hc->kb), free(hc->vb);
}

typedef enum { RUN_FLASH, RUN_CUDNN, RUN_CTX, RUN_FA3, RUN_FA3_INT8, RUN_FA3_FP8 } run_kind;
/* The flash variant RUN_FLASH runs (dev_flash_run): 0 is the production
 * kernel, kern_attn_flash. */
static int flash_variant = 0;
/* The fa3 variant RUN_FA3, RUN_FA3_INT8 and RUN_FA3_FP8 run (dev_fa3_run);
 * -1: kern_attn_fa3, kern_attn_fa3_int8_run, kern_attn_fa3_fp8_run. */
static int fa3_variant = -1;
static const char *run_name[] = {"flash", "cudnn", "auto", "fa3", "fa3-int8", "fa3-fp8"};
static kern_attn_fa3_int8 *fa3_int8_ctx; /* the 8-bit context; NULL: no fa3 here */

/* Runs one backend into dout; 0 ok, 1 cudnn refused (nothing written). */
static int run_once(run_kind kind, kern_attn_cudnn *cd, kern_attn_ctx *ctx, kern_attn_params p) {
  switch (kind) {
  case RUN_FLASH: dev_flash_run(flash_variant, p, 0); break;
  case RUN_CUDNN:
    if (kern_attn_cudnn_run(cd, p, 0) != SP_OK) return 1;
    break;
  case RUN_CTX: kern_attn_run(ctx, p, NULL, 0, 0); break;
  case RUN_FA3:
  case RUN_FA3_INT8:
  case RUN_FA3_FP8:
    if (fa3_variant >= 0)
      dev_fa3_run(fa3_variant, p, 0);
    else if (kind == RUN_FA3)
      kern_attn_fa3(p, 0);
    else if (kind == RUN_FA3_INT8)
      kern_attn_fa3_int8_run(fa3_int8_ctx, p, 0);
    else
      kern_attn_fa3_fp8_run(fa3_int8_ctx, p, 0);
    break;
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaGetLastError());
  return 0;
}

/* label: what the messages call the backend (NULL: its run_name). Prints
 * one row: largest absolute error, relative L2 (and its bound), whether the
 * rerun gave the same bits, the rerun's time. */
static void check_backend(const shape *s, const host_case *hc, run_kind kind, const char *label,
                          kern_attn_cudnn *cd, kern_attn_ctx *ctx, const uint16_t *dq,
                          const uint16_t *dk, const uint16_t *dv, unsigned char *dout) {
  const char *name = label ? label : run_name[kind];
  const int64_t row = s->heads * s->hd, nq = s->Lq * row;
  const size_t out_bytes = (size_t)nq * 2;
  kern_attn_params p = {dq, dk, dv, (uint16_t *)dout, s->Lq, s->Lk, s->heads, s->hd, s->scale};
  CHECK_CUDA(cudaMemset(dout, 0xff, out_bytes)); /* NaN: unwritten elements show */
  CHECK_CUDA(cudaMemset(dout + out_bytes, 0xa5, GUARD_BYTES));
  if (run_once(kind, cd, ctx, p)) {
    CHECK(!s->need_cudnn, "%s: %s refused a shape it must take (see the log)", s->what, name);
    if (!s->need_cudnn) printf("  %-26s refused by cudnn (allowed for this shape)\n", name);
    return;
  }
  char ran[32] = "";
  if (kind == RUN_CTX)
    snprintf(ran, sizeof ran, " ran %s", kern_attn_backend_name(kern_attn_ctx_last(ctx)));
  uint16_t *h1 = malloc(out_bytes + GUARD_BYTES), *h2 = malloc(out_bytes);
  float *got = malloc((size_t)(hc->nrows * row) * 4);
  CHECK_CUDA(cudaMemcpy(h1, dout, out_bytes + GUARD_BYTES, cudaMemcpyDeviceToHost));
  int64_t nan = 0;
  for (int64_t i = 0; i < nq; i++) nan += (h1[i] & 0x7fff) > 0x7f80;
  CHECK(nan == 0, "%s %s: %lld output elements NaN (unwritten?)", s->what, name,
           (long long)nan);
  const unsigned char *gb = (const unsigned char *)h1 + out_bytes;
  int guard_ok = 1;
  for (int i = 0; i < GUARD_BYTES; i++) guard_ok &= gb[i] == 0xa5;
  CHECK(guard_ok, "%s %s: guard bytes after the output overwritten", s->what, name);
  double maxabs = 0;
  for (int64_t i = 0; i < hc->nrows; i++)
    for (int64_t j = 0; j < row; j++) {
      got[i * row + j] = kern_bf16_to_f32(h1[hc->rows[i] * row + j]);
      const double d = fabs((double)got[i * row + j] - hc->exact[i * row + j]);
      maxabs = d > maxabs || d != d ? d : maxabs;
    }
  double err = sp_test_rel_l2_f32(got, hc->exact, hc->nrows * row);
  /* the precision: bf16, or an 8-bit scheme (its runs and its context's) */
  const kern_attn_backend last = kind == RUN_CTX && ctx ? kern_attn_ctx_last(ctx) : KERN_ATTN_AUTO;
  const int i8 = kind == RUN_FA3_INT8 || last == KERN_ATTN_FA3_INT8;
  const int f8 = kind == RUN_FA3_FP8 || last == KERN_ATTN_FA3_FP8;
  const double plain = f8 ? hc->fp8_err : i8 ? hc->int8_err : hc->plain_err;
  const double cap = f8 ? TOL_FP8 : i8 ? TOL_INT8 : 1e-2;
  const char *pname = f8 ? "fp8" : i8 ? "int8" : "bf16";
  double bound = 2.0 * plain + 2e-4;
  /* rerun, timed: bit-identical */
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  CHECK_CUDA(cudaMemset(dout, 0, out_bytes));
  CHECK_CUDA(cudaEventRecord(e0, 0));
  const int refused = run_once(kind, cd, ctx, p);
  CHECK_CUDA(cudaEventRecord(e1, 0));
  CHECK_CUDA(cudaEventSynchronize(e1));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
  CHECK_CUDA(cudaEventDestroy(e0));
  CHECK_CUDA(cudaEventDestroy(e1));
  CHECK(!refused, "%s %s: rerun refused", s->what, name);
  CHECK_CUDA(cudaMemcpy(h2, dout, out_bytes, cudaMemcpyDeviceToHost));
  const int same = memcmp(h1, h2, out_bytes) == 0;
  printf("  %-26s max abs %.3e  rel L2 %.3e (plain %s %.3e, bound %.3e)  rerun %s  %.3f ms%s\n",
         name, maxabs, err, pname, plain, bound, same ? "identical" : "DIFFERS", (double)ms, ran);
  CHECK(err <= bound && err <= cap, "%s %s: rel L2 %.3e above bound %.3e (plain %s %.3e, cap %g)",
           s->what, name, err, bound, pname, plain, cap);
  CHECK(same, "%s %s: rerun not bit-identical", s->what, name);
  free(h1), free(h2), free(got);
}

/* The output a variant left in dout against the first variant with the same
 * key (*first_of[i] == i: it is the first; its output is kept in first[i]). */
static void check_same_as_first(const shape *s, int i, const int *first_of, uint16_t **first,
                                const char *name, const char *name0, unsigned char *dout) {
  const size_t out_bytes = (size_t)(s->Lq * s->heads * s->hd) * 2;
  uint16_t *h = malloc(out_bytes);
  if (!h) {
    fprintf(stderr, "FAIL: out of host memory\n");
    exit(1);
  }
  CHECK_CUDA(cudaMemcpy(h, dout, out_bytes, cudaMemcpyDeviceToHost));
  if (first_of[i] == i) {
    first[i] = h;
    return;
  }
  CHECK(memcmp(h, first[first_of[i]], out_bytes) == 0, "%s: variants %s and %s not bit-identical",
        s->what, name, name0);
  free(h);
}

/* Every flash variant on one shape: the checks of check_backend, then the
 * output (left in dout by its rerun) against the first variant with the
 * same register tile width, which must be bit-identical. */
static void check_flash_variants(const shape *s, const host_case *hc, const uint16_t *dq,
                                 const uint16_t *dk, const uint16_t *dv, unsigned char *dout) {
  const int nv = dev_flash_variant_count();
  uint16_t **first = calloc((size_t)nv, sizeof *first); /* [i]: output of i if first of its sub */
  int *first_of = malloc((size_t)nv * sizeof *first_of);
  if (!first || !first_of) {
    fprintf(stderr, "FAIL: out of host memory\n");
    exit(1);
  }
  for (int i = 0; i < nv; i++) {
    dev_flash_variant fv, f0;
    CHECK(dev_flash_variant_get(i, &fv) == SP_OK, "variant %d of %d not listed", i, nv);
    first_of[i] = i;
    for (int j = 0; j < i; j++)
      if (dev_flash_variant_get(j, &f0) == SP_OK && f0.sub == fv.sub) {
        first_of[i] = j;
        break;
      }
    char label[64];
    snprintf(label, sizeof label, "flash:%s", fv.name);
    flash_variant = i;
    check_backend(s, hc, RUN_FLASH, label, NULL, NULL, dq, dk, dv, dout);
    flash_variant = 0;
    dev_flash_variant_get(first_of[i], &f0);
    check_same_as_first(s, i, first_of, first, fv.name, f0.name, dout);
  }
  for (int i = 0; i < nv; i++) free(first[i]);
  free(first), free(first_of);
}

/* Every fa3 variant of the shape's head dim, as check_flash_variants does
 * for flash: bit-identical to the first variant with the same key tile and
 * precision (and, in int8, the same query tile: the Q scales' blocks). */
static void check_fa3_variants(const shape *s, const host_case *hc, const uint16_t *dq,
                               const uint16_t *dk, const uint16_t *dv, unsigned char *dout) {
  const int nv = dev_fa3_variant_count();
  uint16_t **first = calloc((size_t)nv + 1, sizeof *first);
  int *first_of = malloc(((size_t)nv + 1) * sizeof *first_of);
  if (!first || !first_of) {
    fprintf(stderr, "FAIL: out of host memory\n");
    exit(1);
  }
  for (int i = 0; i < nv; i++) {
    dev_fa3_variant fv, f0;
    CHECK(dev_fa3_variant_get(i, &fv) == SP_OK, "fa3 variant %d of %d not listed", i, nv);
    if (fv.hd != s->hd) continue;
    first_of[i] = i;
    for (int j = 0; j < i; j++)
      if (dev_fa3_variant_get(j, &f0) == SP_OK && f0.hd == fv.hd && f0.bn == fv.bn &&
          f0.int8 == fv.int8 && (!fv.int8 || f0.ncwg == fv.ncwg)) {
        first_of[i] = j;
        break;
      }
    char label[64];
    snprintf(label, sizeof label, "fa3:%s", fv.name);
    fa3_variant = i;
    const run_kind rk = fv.int8 == 2 ? RUN_FA3_FP8 : fv.int8 ? RUN_FA3_INT8 : RUN_FA3;
    check_backend(s, hc, rk, label, NULL, NULL, dq, dk, dv, dout);
    fa3_variant = -1;
    dev_fa3_variant_get(first_of[i], &f0);
    check_same_as_first(s, i, first_of, first, fv.name, f0.name, dout);
  }
  for (int i = 0; i < nv; i++) free(first[i]);
  free(first), free(first_of);
}

/* The backends' contexts and what this GPU and build offer. */
typedef struct backends {
  kern_attn_cudnn *cd;
  kern_attn_ctx *ctx;     /* auto */
  kern_attn_ctx *ctx_fa3; /* --attn fa3 */
  kern_attn_ctx *ctx_int8; /* --attn fa3-int8 (NULL where fa3 does not run) */
  kern_attn_ctx *ctx_fp8;  /* --attn fa3-fp8 (NULL where fa3 does not run) */
  int fa3;                /* fa3 runs here */
  int flash_only, fa3_only;
} backends;

/* The auto context on one attention cut up as the stage cuts it
 * (ranks/nets/wan_dit/cuda/): the queries in chunks of 4,096 and of 1,000
 * rows, each chunk's rows in buffers of their own (the stage's qb and ab),
 * and the heads spread one per rank, each head's q, k, v packed into
 * buffers of their own (as after Ulysses' all-to-all). Every piece must
 * give the bits of the whole call: auto's choice depends on the shape's
 * head dim and keys only, and the kernel it picks must compute each row
 * the same whatever the query count and the heads. */
static void check_layouts(const shape *s, kern_attn_ctx *ctx, const uint16_t *dq,
                          const uint16_t *dk, const uint16_t *dv) {
  const int64_t hd = s->hd, row = s->heads * hd, nq = s->Lq * row;
  uint16_t *whole = malloc((size_t)nq * 2), *piece = malloc((size_t)nq * 2);
  uint16_t *cq, *co, *hk, *hv;
  if (!whole || !piece) {
    fprintf(stderr, "FAIL: out of host memory for shape %s\n", s->what);
    exit(1);
  }
  CHECK_CUDA(cudaMalloc((void **)&cq, (size_t)nq * 2));
  CHECK_CUDA(cudaMalloc((void **)&co, (size_t)nq * 2));
  CHECK_CUDA(cudaMalloc((void **)&hk, (size_t)(s->Lk * hd) * 2));
  CHECK_CUDA(cudaMalloc((void **)&hv, (size_t)(s->Lk * hd) * 2));
  kern_attn_params p = {dq, dk, dv, co, s->Lq, s->Lk, s->heads, hd, s->scale};
  kern_attn_run(ctx, p, NULL, 0, 0);
  const kern_attn_backend ran = kern_attn_ctx_last(ctx);
  CHECK_CUDA(cudaMemcpy(whole, co, (size_t)nq * 2, cudaMemcpyDeviceToHost));
  static const int64_t chunks[] = {4096, 1000};
  for (int c = 0; c < 2; c++) {
    int same = 1;
    for (int64_t r0 = 0; r0 < s->Lq; r0 += chunks[c]) {
      const int64_t n = s->Lq - r0 < chunks[c] ? s->Lq - r0 : chunks[c];
      CHECK_CUDA(cudaMemcpy(cq, dq + r0 * row, (size_t)(n * row) * 2, cudaMemcpyDeviceToDevice));
      kern_attn_params pc = {cq, dk, dv, co, n, s->Lk, s->heads, hd, s->scale};
      kern_attn_run(ctx, pc, NULL, 0, 0);
      same &= kern_attn_ctx_last(ctx) == ran;
      CHECK_CUDA(cudaMemcpy(piece + r0 * row, co, (size_t)(n * row) * 2, cudaMemcpyDeviceToHost));
    }
    same &= memcmp(piece, whole, (size_t)nq * 2) == 0;
    printf("  %-26s chunks of %lld rows: %s\n", "auto layouts", (long long)chunks[c],
           same ? "identical" : "DIFFER");
    CHECK(same, "%s: auto (%s) in chunks of %lld rows not bit-identical to one call", s->what,
          kern_attn_backend_name(ran), (long long)chunks[c]);
  }
  if (s->heads > 1) {
    int same = 1;
    for (int64_t h = 0; h < s->heads; h++) { /* one head per rank, packed */
      const size_t w = (size_t)hd * 2, src = (size_t)row * 2;
      CHECK_CUDA(cudaMemcpy2D(cq, w, dq + h * hd, src, w, (size_t)s->Lq, cudaMemcpyDeviceToDevice));
      CHECK_CUDA(cudaMemcpy2D(hk, w, dk + h * hd, src, w, (size_t)s->Lk, cudaMemcpyDeviceToDevice));
      CHECK_CUDA(cudaMemcpy2D(hv, w, dv + h * hd, src, w, (size_t)s->Lk, cudaMemcpyDeviceToDevice));
      kern_attn_params ph = {cq, hk, hv, co, s->Lq, s->Lk, 1, hd, s->scale};
      kern_attn_run(ctx, ph, NULL, 0, 0);
      same &= kern_attn_ctx_last(ctx) == ran;
      CHECK_CUDA(cudaMemcpy2D(piece + h * hd, src, co, w, w, (size_t)s->Lq,
                              cudaMemcpyDeviceToHost));
    }
    same &= memcmp(piece, whole, (size_t)nq * 2) == 0;
    printf("  %-26s one head per rank: %s\n", "auto layouts", same ? "identical" : "DIFFER");
    CHECK(same, "%s: auto (%s) one head at a time not bit-identical to one call", s->what,
          kern_attn_backend_name(ran));
  }
  CHECK_CUDA(cudaFree(cq));
  CHECK_CUDA(cudaFree(co));
  CHECK_CUDA(cudaFree(hk));
  CHECK_CUDA(cudaFree(hv));
  free(whole), free(piece);
}

/* All checks of one shape. */
static void check_shape(const shape *s, const backends *b) {
  host_case hc;
  host_case_build(s, &hc);
  printf("%s: Lq %lld Lk %lld heads %lld hd %lld, %lld rows checked\n", s->what, (long long)s->Lq,
         (long long)s->Lk, (long long)s->heads, (long long)s->hd, (long long)hc.nrows);
  const size_t qb = (size_t)(s->Lq * s->heads * s->hd) * 2;
  const size_t kb = (size_t)(s->Lk * s->heads * s->hd) * 2;
  uint16_t *dq, *dk, *dv;
  unsigned char *dout;
  CHECK_CUDA(cudaMalloc((void **)&dq, qb));
  CHECK_CUDA(cudaMalloc((void **)&dk, kb));
  CHECK_CUDA(cudaMalloc((void **)&dv, kb));
  CHECK_CUDA(cudaMalloc((void **)&dout, qb + GUARD_BYTES));
  CHECK_CUDA(cudaMemcpy(dq, hc.qb, qb, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dk, hc.kb, kb, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dv, hc.vb, kb, cudaMemcpyHostToDevice));
  const int small = s->Lq * s->Lk <= 4099 * 4099;
  if (s->hd == KERN_ATTN_HD && !b->fa3_only) {
    check_backend(s, &hc, RUN_FLASH, NULL, NULL, NULL, dq, dk, dv, dout);
    if (small) check_flash_variants(s, &hc, dq, dk, dv, dout);
    if (b->cd && !b->flash_only)
      check_backend(s, &hc, RUN_CUDNN, NULL, b->cd, NULL, dq, dk, dv, dout);
    if (!b->flash_only) {
      check_backend(s, &hc, RUN_CTX, NULL, NULL, b->ctx, dq, dk, dv, dout);
      const kern_attn_shape sh = {s->Lq, s->Lk, s->heads, s->hd};
      const int rule_fa3 = kern_attn_auto_rule(&sh, b->fa3) == KERN_ATTN_FA3;
      CHECK((kern_attn_ctx_last(b->ctx) == KERN_ATTN_FA3) == rule_fa3,
            "%s: auto ran %s where its rule says %s", s->what,
            kern_attn_backend_name(kern_attn_ctx_last(b->ctx)), rule_fa3 ? "fa3" : "not fa3");
      /* the shapes where auto may take fa3: cut up as the stage cuts them */
      if (s->Lk >= KERN_ATTN_FA3_MIN_KEYS) check_layouts(s, b->ctx, dq, dk, dv);
    }
  }
  if (b->fa3 && !b->flash_only) {
    check_backend(s, &hc, RUN_FA3, NULL, NULL, NULL, dq, dk, dv, dout);
    check_backend(s, &hc, RUN_CTX, "fa3 context", NULL, b->ctx_fa3, dq, dk, dv, dout);
    CHECK(kern_attn_ctx_last(b->ctx_fa3) == KERN_ATTN_FA3, "%s: the fa3 context ran %s", s->what,
          kern_attn_backend_name(kern_attn_ctx_last(b->ctx_fa3)));
    host_case_8bit(s, &hc);
    const kern_attn_shape sh8 = {s->Lq, s->Lk, s->heads, s->hd};
    static const kern_attn_backend eight[2] = {KERN_ATTN_FA3_INT8, KERN_ATTN_FA3_FP8};
    for (int e = 0; e < 2; e++) {
      kern_attn_ctx *c8 = e ? b->ctx_fp8 : b->ctx_int8;
      const kern_attn_backend want = eight[e];
      char label[32];
      snprintf(label, sizeof label, "%s context", kern_attn_backend_name(want));
      check_backend(s, &hc, e ? RUN_FA3_FP8 : RUN_FA3_INT8, NULL, NULL, NULL, dq, dk, dv, dout);
      check_backend(s, &hc, RUN_CTX, label, NULL, c8, dq, dk, dv, dout);
      const kern_attn_backend rule = kern_attn_8bit_rule(&sh8, want);
      CHECK((kern_attn_ctx_last(c8) == want) == (rule == want),
            "%s: the %s context ran %s where its rule says %s", s->what,
            kern_attn_backend_name(want), kern_attn_backend_name(kern_attn_ctx_last(c8)),
            kern_attn_backend_name(rule));
    }
    if (small) check_fa3_variants(s, &hc, dq, dk, dv, dout);
  }
  CHECK_CUDA(cudaFree(dq));
  CHECK_CUDA(cudaFree(dk));
  CHECK_CUDA(cudaFree(dv));
  CHECK_CUDA(cudaFree(dout));
  host_case_free(&hc);
}

int main(int argc, char **argv) {
  /* --flash-only, --fa3-only: one own kernel alone, for compute-sanitizer's
   * racecheck (which reports hazards inside cuDNN's generated wgmma
   * kernels, vendor code we cannot change or inspect). */
  int small = 0;
  backends b = {0};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--small") == 0) {
      small = 1;
    } else if (strcmp(argv[i], "--flash-only") == 0) {
      b.flash_only = 1;
    } else if (strcmp(argv[i], "--fa3-only") == 0) {
      b.fa3_only = 1;
    } else if (strcmp(argv[i], "-v") == 0) {
      sp_log_set_level(2); /* each cuDNN plan's form and engine */
    } else {
      fprintf(stderr, "usage: %s [--small] [--flash-only | --fa3-only] [-v]\n", argv[0]);
      return 2;
    }
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("skip: no CUDA device\n");
    return 77;
  }
  int major = 0, minor = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  CHECK_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
  if (major < 8) {
    printf("skip: device 0 is sm_%d*, the flash kernel needs sm_80 or later\n", major);
    return 77;
  }
  sp_test_begin("test_attention");

  /* {Lq, Lk, heads, hd, scale, need_cudnn, what} */
  static const shape small_shapes[] = {
      {70, 130, 2, 128, 0.f, 0, "small tails Lq 70 Lk 130 h 2"},
      {128, 64, 1, 128, 0.f, 0, "small exact tiles Lq 128 Lk 64 h 1"},
      {5, 512, 3, 128, 0.f, 0, "small cross Lq 5 Lk 512 h 3"},
      {70, 130, 2, 64, 0.f, 0, "small tails hd 64"},
      {200, 384, 1, 64, 0.f, 0, "small hd 64 Lq 200 Lk 384"},
  };
  static const shape full_shapes[] = {
      {1, 1, 1, 128, 0.f, 0, "one token"},
      {128, 64, 2, 128, 0.f, 0, "exact tiles Lq 128 Lk 64"},
      {256, 384, 2, 128, 0.f, 0, "exact fa3 tiles Lq 256 Lk 384"},
      {200, 200, 3, 128, 0.f, 0, "tails Lq 200 Lk 200"},
      {1000, 77, 2, 128, 0.05f, 0, "tails Lq 1000 Lk 77, scale 0.05"},
      {333, 512, 4, 128, 0.f, 1, "cross Lq 333 Lk 512"},
      {4099, 4099, 3, 128, 0.f, 0, "self 4099 (both tails)"},
      {1024, 1024, 4, 128, 0.f, 1, "self 1024 x 4 heads"},
      {32760, 512, 2, 128, 0.f, 1, "cross 32,760 x 512"},
      {32760, 32760, 2, 128, 0.f, 1, "self 32,760 x 2 heads"},
      {75600, 75600, 1, 128, 0.f, 1, "self 75,600 x 1 head"},
      {1, 1, 1, 64, 0.f, 0, "one token hd 64"},
      {200, 333, 3, 64, 0.f, 0, "tails hd 64 Lq 200 Lk 333"},
      {1000, 77, 2, 64, 0.05f, 0, "tails hd 64 Lq 1000 Lk 77, scale 0.05"},
      {4099, 4099, 2, 64, 0.f, 0, "self 4099 hd 64"},
      {32760, 512, 2, 64, 0.f, 0, "cross 32,760 x 512 hd 64"},
      {32760, 32760, 1, 64, 0.f, 0, "self 32,760 hd 64"},
  };
  const shape *shapes = small ? small_shapes : full_shapes;
  const int nshapes = small ? (int)(sizeof small_shapes / sizeof small_shapes[0])
                            : (int)(sizeof full_shapes / sizeof full_shapes[0]);

  const int others = !b.fa3_only;
  b.cd = NULL;
  if (others)
    CHECK(kern_attn_cudnn_create(&b.cd) == SP_OK, "cudnn could not be created (cause logged above)");
  /* fa3: must run on an sm_90 GPU when this build has it */
  char why[192];
  b.fa3 = kern_attn_fa3_available(why, sizeof why);
  if (!b.fa3) printf("fa3: not run here: %s\n", why);
  if (major == 9 && minor == 0 && dev_fa3_variant_count() > 0)
    CHECK(b.fa3, "fa3 is not available on an sm_90 GPU in a build with it: %s", why);
  if (kern_attn_ctx_create(KERN_ATTN_AUTO, NULL, &b.ctx) != SP_OK ||
      kern_attn_ctx_create(KERN_ATTN_FA3, NULL, &b.ctx_fa3) != SP_OK ||
      (b.fa3 && (kern_attn_ctx_create(KERN_ATTN_FA3_INT8, NULL, &b.ctx_int8) != SP_OK ||
                 kern_attn_ctx_create(KERN_ATTN_FA3_FP8, NULL, &b.ctx_fp8) != SP_OK ||
                 kern_attn_fa3_int8_create(&fa3_int8_ctx) != SP_OK))) {
    fprintf(stderr, "FAIL: the attention contexts could not be created\n");
    return 1;
  }
  for (int i = 0; i < nshapes; i++) check_shape(&shapes[i], &b);
  kern_attn_ctx_destroy(b.ctx);
  kern_attn_ctx_destroy(b.ctx_fa3);
  kern_attn_ctx_destroy(b.ctx_int8);
  kern_attn_ctx_destroy(b.ctx_fp8);
  kern_attn_fa3_int8_destroy(fa3_int8_ctx);
  kern_attn_cudnn_destroy(b.cd);
  return sp_test_end();
}
