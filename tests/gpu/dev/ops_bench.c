/* The row-op benchmark (ops_bench.h).
 *
 * Each op of a Wan block's memory-bound share at L = 32,760 tokens (81
 * frames at 480x832), D = 5120 (14B) and 1536 (1.3B), bf16 projection
 * outputs, for the production kernels, the scalar ones and each forced
 * chunk count. Each variant is first checked against the CPU on BENCH_ROWS
 * rows (relative L2 within STYLE.md's tolerances: 1e-5 for the fp32 stream,
 * 1e-2 for bf16 outputs), then timed: 2 warm-up calls, BENCH_REPS calls
 * between CUDA events. Bytes are what the op must move (each input read
 * once, each output written once); % is of BENCH_PEAK, about what a plain
 * copy reaches on an H200. */
#include "ops_bench.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "dev_time.h"
#include "kern_cpu.h"
#include "kern_cuda.h"
#include "kern_dtype.h"
#include "log.h"
#include "norm_variants.h"

#define BENCH_L 32760
#define BENCH_ROWS 16
#define BENCH_REPS 20
#define BENCH_PEAK 4.0e12
#define TOL_F32 1e-5
#define TOL_BF16 1e-2
#define GUARD 256 /* bytes after every per-column operand and table */
#define GUARD_BYTE 0xA5
#define MAX_GUARDED 8

typedef enum { BK_LN, BK_ADD, BK_ADD_LN, BK_ADD_THEN_LN, BK_ROPE, BK_COUNT } bench_kind;
static const char *bench_name[BK_COUNT] = {"layernorm_mod", "gated_add", "gated_add_ln",
                                           "add,layernorm", "rmsnorm_rope"};

/* ---- inputs ------------------------------------------------------------- */

/* splitmix64 over the run's seed, uniform in [lo, hi). */
static double bench_uniform(uint64_t *state, double lo, double hi) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return lo + (hi - lo) * ((double)(z >> 11) * (1.0 / 9007199254740992.0));
}

static float *rand_f(uint64_t *state, int64_t n, double lo, double hi) {
  float *p = sp_xmalloc((size_t)n * sizeof *p);
  for (int64_t i = 0; i < n; i++) p[i] = (float)bench_uniform(state, lo, hi);
  return p;
}

/* Values that are exactly bf16 (weights are stored bf16). */
static float *rand_bf16_valued(uint64_t *state, int64_t n, double lo, double hi) {
  float *p = rand_f(state, n, lo, hi);
  for (int64_t i = 0; i < n; i++) p[i] = kern_bf16_to_f32(kern_f32_to_bf16(p[i]));
  return p;
}

/* Fills n device values with a 1 Mi block of host random numbers in
 * [lo, hi), copied over and over (a block is not a whole number of rows,
 * so rows differ). */
static void bench_fill(uint64_t *state, void *d, int64_t n, int bf16, double lo, double hi) {
  enum { BLK = 1 << 20 };
  float *blk = rand_f(state, BLK, lo, hi);
  uint16_t *blk16 = sp_xmalloc((size_t)BLK * 2);
  kern_f32_to_bf16_n(blk, blk16, BLK);
  const size_t esize = bf16 ? 2 : 4;
  for (int64_t off = 0; off < n; off += BLK) {
    const int64_t m = n - off < BLK ? n - off : BLK;
    CUDA_CHECK(cudaMemcpy((char *)d + (size_t)off * esize, bf16 ? (void *)blk16 : (void *)blk,
                          (size_t)m * esize, cudaMemcpyHostToDevice));
  }
  free(blk);
  free(blk16);
}

/* ---- device operands with guard bytes ----------------------------------- */

typedef struct guarded {
  char *p[MAX_GUARDED];
  size_t bytes[MAX_GUARDED];
  int n;
} guarded;

/* A device copy of n host values (as bf16 when bf16), followed by GUARD
 * guard bytes. */
static void *guarded_upload(guarded *g, const float *x, int64_t n, int bf16) {
  if (g->n == MAX_GUARDED) sp_fatal("ops bench: more than %d guarded operands", MAX_GUARDED);
  const size_t bytes = (size_t)n * (bf16 ? 2 : 4);
  char *d;
  CUDA_CHECK(cudaMalloc((void **)&d, bytes + GUARD));
  CUDA_CHECK(cudaMemset(d + bytes, GUARD_BYTE, GUARD));
  if (bf16) {
    uint16_t *b = sp_xmalloc(bytes);
    kern_f32_to_bf16_n(x, b, (size_t)n);
    CUDA_CHECK(cudaMemcpy(d, b, bytes, cudaMemcpyHostToDevice));
    free(b);
  } else {
    CUDA_CHECK(cudaMemcpy(d, x, bytes, cudaMemcpyHostToDevice));
  }
  g->p[g->n] = d;
  g->bytes[g->n++] = bytes;
  return d;
}

/* 1 when every guard is intact; frees the operands. */
static int guarded_release(guarded *g) {
  int ok = 1;
  unsigned char buf[GUARD];
  for (int i = 0; i < g->n; i++) {
    CUDA_CHECK(cudaMemcpy(buf, g->p[i] + g->bytes[i], GUARD, cudaMemcpyDeviceToHost));
    for (int j = 0; j < GUARD; j++) ok &= buf[j] == GUARD_BYTE;
    CUDA_CHECK(cudaFree(g->p[i]));
  }
  g->n = 0;
  return ok;
}

/* ---- one op ------------------------------------------------------------- */

typedef struct bench_bufs {
  int64_t L, D, heads;
  float *x, *x0;               // (L, D) the residual stream, and its first value
  uint16_t *y, *h;             // (L, D) bf16: a projection's output, a norm's output
  float *gate, *shift, *scale; // (D)
  uint16_t *wn;                // (D) bf16 RMSNorm weight
  float *cos_t, *sin_t;        // (L, 64) RoPE tables, grid 21 x 30 x 52
} bench_bufs;

/* The same operands as block_forward gives each op (gated add 3 + norm1),
 * through variant var (NULL: production). */
static void bench_call(bench_kind k, const char *var, const bench_bufs *b) {
  const int64_t L = b->L, D = b->D;
  const float eps = 1e-6f;
  if (k == BK_LN)
    dev_norm_layernorm_modulate(var, b->x, NULL, NULL, b->shift, b->scale, b->h, L, D, eps, 0);
  else if (k == BK_ADD)
    dev_norm_gated_add(var, b->x, b->y, KERN_DTYPE_BF16, b->gate, L, D, 0);
  else if (k == BK_ADD_LN)
    dev_norm_gated_add_layernorm(var, b->x, b->y, KERN_DTYPE_BF16, b->gate, NULL, NULL,
                                 b->shift, b->scale, b->h, L, D, eps, 0);
  else if (k == BK_ADD_THEN_LN) {
    dev_norm_gated_add(var, b->x, b->y, KERN_DTYPE_BF16, b->gate, L, D, 0);
    dev_norm_layernorm_modulate(var, b->x, NULL, NULL, b->shift, b->scale, b->h, L, D, eps, 0);
  } else
    dev_norm_rmsnorm_rope(var, b->y, KERN_DTYPE_BF16, b->wn, b->cos_t, b->sin_t, b->h, L,
                          b->heads, 128, eps, 0);
}

static double bench_bytes(bench_kind k, int64_t L, int64_t D) {
  const double LD = (double)L * (double)D;
  static const double per_elem[BK_COUNT] = {4 + 2, 4 + 2 + 4, 4 + 2 + 4 + 2,
                                            (4 + 2 + 4) + (4 + 2), 2 + 2};
  return LD * per_elem[k] + (k == BK_ROPE ? (double)L * 64 * 4 * 2 : 0.0);
}

static void down_row(void *h, const void *d, int64_t row, int64_t D, size_t esize) {
  CUDA_CHECK(cudaMemcpy(h, (const char *)d + (size_t)(row * D) * esize, (size_t)D * esize,
                        cudaMemcpyDeviceToHost));
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

/* Runs op k once on the first x and compares BENCH_ROWS rows of its outputs
 * with the CPU on the same rows; returns the worst relative L2 over the
 * outputs, each divided by its tolerance (pass: <= 1). */
static double bench_check(bench_kind k, const char *var, const bench_bufs *b, uint64_t *state,
                          const float *gate, const float *shift, const float *scale,
                          const float *wn, const double *ct, const double *st) {
  const int64_t D = b->D;
  CUDA_CHECK(cudaMemcpy(b->x, b->x0, (size_t)(b->L * D) * 4, cudaMemcpyDeviceToDevice));
  CUDA_CHECK(cudaMemset(b->h, 0xFF, (size_t)(b->L * D) * 2));
  bench_call(k, var, b);
  CUDA_CHECK(cudaDeviceSynchronize());
  const int adds = k == BK_ADD || k == BK_ADD_LN || k == BK_ADD_THEN_LN;
  const int norms = k != BK_ADD;
  float *x = sp_xmalloc((size_t)D * 4), *y = sp_xmalloc((size_t)D * 4);
  float *gx = sp_xmalloc((size_t)D * 4), *gh = sp_xmalloc((size_t)D * 4);
  float *ref = sp_xmalloc((size_t)D * 4);
  uint16_t *yb = sp_xmalloc((size_t)D * 2), *hbuf = sp_xmalloc((size_t)D * 2);
  double worst = 0.0;
  for (int i = 0; i < BENCH_ROWS; i++) {
    const int64_t row =
        i == 0 ? 0 : i == 1 ? b->L - 1 : (int64_t)bench_uniform(state, 0, (double)b->L);
    down_row(x, b->x0, row, D, 4);
    down_row(yb, b->y, row, D, 2);
    kern_bf16_to_f32_n(yb, y, (size_t)D);
    if (adds) {
      kern_cpu_gated_add(x, y, gate, 1, D);
      down_row(gx, b->x, row, D, 4);
      worst = fmax(worst, rel_l2(gx, x, D) / TOL_F32);
    }
    if (!norms) continue;
    if (k == BK_ROPE) {
      kern_cpu_rmsnorm(y, wn, ref, 1, D, 1e-6f);
      kern_cpu_rope_apply(ref, ct + row * 64, st + row * 64, 1, b->heads, 128);
    } else {
      kern_cpu_layernorm(x, NULL, NULL, ref, 1, D, 1e-6f);
      kern_cpu_modulate(ref, shift, scale, ref, 1, D);
    }
    down_row(hbuf, b->h, row, D, 2);
    kern_bf16_to_f32_n(hbuf, gh, (size_t)D);
    worst = fmax(worst, rel_l2(gh, ref, D) / TOL_BF16);
  }
  free(x); free(y); free(gx); free(gh); free(ref); free(yb); free(hbuf);
  return worst;
}

/* One bench_call, as dev_time_ms calls it. */
typedef struct bench_job {
  bench_kind k;
  const char *var;
  const bench_bufs *b;
} bench_job;

static void bench_job_call(void *arg) {
  const bench_job *j = arg;
  bench_call(j->k, j->var, j->b);
}

static double bench_time(bench_kind k, const char *var, const bench_bufs *b) {
  bench_job j = {k, var, b};
  return dev_time_ms(bench_job_call, &j, 2, BENCH_REPS, 0);
}

/* ---- the table ---------------------------------------------------------- */

int ops_bench_run(uint64_t seed) {
  /* NULL: the production kernels; then the variants norm_variants.h forces. */
  static const char *variants[] = {NULL, "scalar", "vec:1", "vec:2", "vec:3",
                                   "vec:4", "vec:5", "vec:8"};
  static const int64_t dims[] = {5120, 1536};
  const int64_t L = BENCH_L, F = 21, H = 30, W = 52; /* L = F * H * W */
  uint64_t state = seed;
  struct cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("# row-op benchmark, %s, L %d, %d reps after 2 warm-up calls, %% of %.1f TB/s, "
         "seed %llu\n",
         prop.name, BENCH_L, BENCH_REPS, BENCH_PEAK / 1e12, (unsigned long long)seed);
  printf("# bytes per element: layernorm_mod 6, gated_add 10, gated_add_ln 12, add,layernorm 16\n"
         "# (the two unfused calls: compare its ms with gated_add_ln), rmsnorm_rope 4 + tables;\n"
         "# check: worst relative L2 / tolerance on %d rows against the CPU (<= 1 passes)\n",
         BENCH_ROWS);
  printf("# %-14s %5s %-8s %9s %9s %7s %7s %s\n", "op", "D", "kernels", "ms", "GB/s", "%peak",
         "check", "result");
  double *ct = sp_xmalloc((size_t)(L * 64) * sizeof(double));
  double *st = sp_xmalloc((size_t)(L * 64) * sizeof(double));
  kern_cpu_rope_table(F, H, W, 128, ct, st);
  float *ctf = sp_xmalloc((size_t)(L * 64) * 4), *stf = sp_xmalloc((size_t)(L * 64) * 4);
  for (int64_t i = 0; i < L * 64; i++) ctf[i] = (float)ct[i], stf[i] = (float)st[i];
  int failed = 0;
  for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
    const int64_t D = dims[di], n = L * D;
    bench_bufs b = {L, D, D / 128, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    guarded g = {{NULL}, {0}, 0};
    float *gate = rand_f(&state, D, -1, 1), *shift = rand_f(&state, D, -0.5, 0.5);
    float *scale = rand_f(&state, D, -0.5, 0.5), *wn = rand_bf16_valued(&state, D, 0.5, 1.5);
    CUDA_CHECK(cudaMalloc((void **)&b.x, (size_t)n * 4));
    CUDA_CHECK(cudaMalloc((void **)&b.x0, (size_t)n * 4));
    CUDA_CHECK(cudaMalloc((void **)&b.y, (size_t)n * 2));
    CUDA_CHECK(cudaMalloc((void **)&b.h, (size_t)n * 2));
    bench_fill(&state, b.x0, n, 0, -2, 4);
    bench_fill(&state, b.y, n, 1, -3, 3);
    b.gate = guarded_upload(&g, gate, D, 0);
    b.shift = guarded_upload(&g, shift, D, 0);
    b.scale = guarded_upload(&g, scale, D, 0);
    b.wn = guarded_upload(&g, wn, D, 1);
    b.cos_t = guarded_upload(&g, ctf, L * 64, 0);
    b.sin_t = guarded_upload(&g, stf, L * 64, 0);
    for (int k = 0; k < BK_COUNT; k++) {
      for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        const char *var = variants[v];
        /* A forced count the row cannot take (more than 512 threads) runs
         * the scalar kernels: not a row of its own. */
        if (var && var[0] == 'v' && (D / 8 + (var[4] - '0') - 1) / (var[4] - '0') > 512) continue;
        const double check =
            bench_check((bench_kind)k, var, &b, &state, gate, shift, scale, wn, ct, st);
        const double ms = bench_time((bench_kind)k, var, &b);
        const double gbs = bench_bytes((bench_kind)k, L, D) / (ms * 1e-3) / 1e9;
        const int ok = check <= 1.0;
        printf("  %-14s %5lld %-8s %9.4f %9.1f %6.1f%% %7.3f %s\n", bench_name[k], (long long)D,
               var ? var : "default", ms, gbs, 100.0 * gbs * 1e9 / BENCH_PEAK, check,
               ok ? "pass" : "FAIL");
        fflush(stdout);
        failed += !ok;
      }
    }
    CUDA_CHECK(cudaFree(b.x));
    CUDA_CHECK(cudaFree(b.x0));
    CUDA_CHECK(cudaFree(b.y));
    CUDA_CHECK(cudaFree(b.h));
    if (!guarded_release(&g)) { /* the per-column operands and the tables */
      printf("  FAIL: D %lld: a guard after a per-column operand or table was overwritten\n",
             (long long)D);
      failed++;
    }
    free(gate); free(shift); free(scale); free(wn);
  }
  free(ct); free(st); free(ctf); free(stf);
  printf("# %d failed\n", failed);
  return failed ? 1 : 0;
}
