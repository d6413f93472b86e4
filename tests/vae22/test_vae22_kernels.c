/* The Wan 2.2 VAE's CPU kernels (kernels/kern_cpu_vae22.h) against direct
 * float64 formulas written from the published modules' steps (I2V.md "The
 * Wan 2.2 VAE"), on fresh random data and odd sizes:
 * - patchify against the einops rearrangement done as a 6-index
 *   transpose; unpatchify as its inverse (a round trip is the identity);
 * - AvgDown3D as published: front padding, the (C, ft, fs, fs) block
 *   gathered into C ft fs fs channels, consecutive groups averaged;
 * - DupUp3D as published: repeat_interleave on channels, the copies read
 *   as (Co, ft, fs, fs) and spread over the block, the first frames dropped.
 * The encoder's stride-2 convolutions are the Wan 2.1 encoder's, tested
 * in tests/vae/test_vae_enc_kernels.c.
 * Guard floats after every output; every kernel bit-identical for 1, 2
 * and 3 threads. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_cpu_vae22.h"
#include "sp_test.h"

/* Runs fn at 1, 2, 3 threads into fresh outputs (each starting from init,
 * n floats) and checks they agree bit for bit with the first. */
typedef void (*kernel_fn)(void *ctx, float *y);
static void check_threads(const char *what, kernel_fn fn, void *ctx, const float *init,
                          int64_t n) {
  float *a = sp_test_alloc(n), *b = sp_test_alloc(n);
  const int saved = omp_get_max_threads();
  for (int th = 1; th <= 3; th++) {
    omp_set_num_threads(th);
    float *y = th == 1 ? a : b;
    memcpy(y, init, (size_t)n * sizeof *y);
    fn(ctx, y);
    if (th > 1) CHECK(memcmp(a, b, (size_t)n * sizeof *a) == 0, "%s: %d threads differ", what, th);
  }
  omp_set_num_threads(saved);
  free(a), free(b);
}

static double max_abs_err(const float *got, const double *ref, int64_t n) {
  double m = 0.0;
  for (int64_t i = 0; i < n; i++) {
    const double e = fabs((double)got[i] - ref[i]);
    if (!(e <= m)) m = e; /* NaN propagates */
  }
  return m;
}

/* ---------------------------------------------------------------- patchify */

typedef struct patch_ctx {
  const float *x;
  int64_t C, T, H, W;
} patch_ctx;

static void run_patchify(void *p, float *y) {
  patch_ctx *c = p;
  kern_cpu_vae22_patchify(c->x, y, c->C, c->T, c->H, c->W);
}

static void check_patchify(int64_t C, int64_t T, int64_t H, int64_t W) {
  const int64_t n = C * T * H * W, h = H / 2, w = W / 2;
  float *x = sp_test_alloc(n), *y = sp_test_alloc(n), *back = sp_test_alloc(n);
  double *ref = sp_test_dalloc(n);
  sp_rand_fill(x, n, -1.0, 1.0);
  /* x viewed (c, t, h, q, w, r), transposed to (c, r, q, t, h, w). */
  for (int64_t c = 0; c < C; c++)
    for (int64_t t = 0; t < T; t++)
      for (int64_t i = 0; i < h; i++)
        for (int64_t q = 0; q < 2; q++)
          for (int64_t j = 0; j < w; j++)
            for (int64_t r = 0; r < 2; r++) {
              const int64_t src = (((((c * T + t) * h + i) * 2 + q) * w + j) * 2) + r;
              const int64_t dst = ((((c * 2 + r) * 2 + q) * T + t) * h + i) * w + j;
              ref[dst] = x[src];
            }
  kern_cpu_vae22_patchify(x, y, C, T, H, W);
  CHECK(sp_test_guard_ok(y, n), "patchify wrote past its output");
  CHECK(max_abs_err(y, ref, n) == 0.0, "patchify (%lld, %lld, %lld, %lld) differs", (long long)C,
        (long long)T, (long long)H, (long long)W);
  kern_cpu_vae22_unpatchify(y, back, C, T, h, w);
  CHECK(sp_test_guard_ok(back, n) && memcmp(back, x, (size_t)n * sizeof *x) == 0,
        "unpatchify(patchify(x)) is not x");
  patch_ctx ctx = {x, C, T, H, W};
  check_threads("patchify", run_patchify, &ctx, y, n);
  free(x), free(y), free(back), free(ref);
}

/* ---------------------------------------------------------------- AvgDown3D */

typedef struct sc_ctx {
  const float *x;
  kern_vae22_shortcut s;
} sc_ctx;

static void run_avg(void *p, float *y) {
  sc_ctx *c = p;
  kern_cpu_vae22_avg_down_add(c->x, y, &c->s);
}

static void check_avg_down(int64_t C, int64_t Co, int64_t T, int64_t H, int64_t W, int ft,
                           int fs) {
  const int64_t pad = (ft - T % ft) % ft, Tp = T + pad, To = Tp / ft, Ho = H / fs, Wo = W / fs;
  const int64_t f = ft * fs * fs, g = C * f / Co, n = C * T * H * W, no = Co * To * Ho * Wo;
  float *x = sp_test_alloc(n), *y = sp_test_alloc(no), *y0 = sp_test_alloc(no);
  double *xp = sp_test_dalloc(C * Tp * H * W), *blk = sp_test_dalloc(C * f * To * Ho * Wo);
  double *ref = sp_test_dalloc(no);
  sp_rand_fill(x, n, -1.0, 1.0);
  sp_rand_fill(y0, no, -1.0, 1.0);
  /* F.pad in front, then view (C, To, ft, Ho, fs, Wo, fs) permuted to
   * (C, ft, fs, fs, To, Ho, Wo), then groups of g channels averaged. */
  for (int64_t c = 0; c < C; c++)
    for (int64_t t = 0; t < Tp; t++)
      for (int64_t s = 0; s < H * W; s++)
        xp[(c * Tp + t) * H * W + s] = t < pad ? 0.0 : x[(c * T + t - pad) * H * W + s];
  for (int64_t c = 0; c < C; c++)
    for (int64_t a = 0; a < ft; a++)
      for (int64_t q = 0; q < fs; q++)
        for (int64_t r = 0; r < fs; r++)
          for (int64_t j = 0; j < To; j++)
            for (int64_t i = 0; i < Ho; i++)
              for (int64_t k = 0; k < Wo; k++) {
                const int64_t ch = ((c * ft + a) * fs + q) * fs + r;
                blk[((ch * To + j) * Ho + i) * Wo + k] =
                    xp[((c * Tp + j * ft + a) * H + i * fs + q) * W + k * fs + r];
              }
  for (int64_t o = 0; o < Co; o++)
    for (int64_t s = 0; s < To * Ho * Wo; s++) {
      double m = 0.0;
      for (int64_t e = 0; e < g; e++) m += blk[(o * g + e) * To * Ho * Wo + s];
      ref[o * To * Ho * Wo + s] = y0[o * To * Ho * Wo + s] + m / (double)g;
    }
  memcpy(y, y0, (size_t)no * sizeof *y);
  sc_ctx ctx = {x, {T, H, W, C, Co, ft, fs, 0}};
  kern_cpu_vae22_avg_down_add(x, y, &ctx.s);
  CHECK(sp_test_guard_ok(y, no), "avg_down wrote past its output");
  const double e = max_abs_err(y, ref, no);
  CHECK(e <= 1e-6, "avg_down C %lld -> %lld, T %lld, %lldx%lld, ft %d fs %d: max error %.2e",
        (long long)C, (long long)Co, (long long)T, (long long)H, (long long)W, ft, fs, e);
  check_threads("avg_down", run_avg, &ctx, y0, no);
  free(x), free(y), free(y0), free(xp), free(blk), free(ref);
}

/* ---------------------------------------------------------------- DupUp3D */

static void run_dup(void *p, float *y) {
  sc_ctx *c = p;
  kern_cpu_vae22_dup_up_add(c->x, y, &c->s);
}

static void check_dup_up(int64_t C, int64_t Co, int64_t T, int64_t H, int64_t W, int ft, int fs,
                         int drop) {
  const int64_t R = Co * ft * fs * fs / C, Tf = T * ft, Ho = H * fs, Wo = W * fs;
  const int64_t To = Tf - drop, n = C * T * H * W, no = Co * To * Ho * Wo;
  float *x = sp_test_alloc(n), *y = sp_test_alloc(no), *y0 = sp_test_alloc(no);
  double *rep = sp_test_dalloc(C * R * T * H * W), *full = sp_test_dalloc(Co * Tf * Ho * Wo);
  double *ref = sp_test_dalloc(no);
  sp_rand_fill(x, n, -1.0, 1.0);
  sp_rand_fill(y0, no, -1.0, 1.0);
  /* repeat_interleave(R) on channels, view (Co, ft, fs, fs, T, H, W),
   * permute to (Co, T, ft, H, fs, W, fs). */
  for (int64_t k = 0; k < C * R; k++)
    for (int64_t s = 0; s < T * H * W; s++) rep[k * T * H * W + s] = x[(k / R) * T * H * W + s];
  for (int64_t o = 0; o < Co; o++)
    for (int64_t a = 0; a < ft; a++)
      for (int64_t q = 0; q < fs; q++)
        for (int64_t r = 0; r < fs; r++)
          for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < H; i++)
              for (int64_t j = 0; j < W; j++) {
                const int64_t k = ((o * ft + a) * fs + q) * fs + r;
                full[((o * Tf + t * ft + a) * Ho + i * fs + q) * Wo + j * fs + r] =
                    rep[((k * T + t) * H + i) * W + j];
              }
  for (int64_t o = 0; o < Co; o++)
    for (int64_t t = 0; t < To; t++)
      for (int64_t s = 0; s < Ho * Wo; s++) {
        const int64_t d = (o * To + t) * Ho * Wo + s;
        ref[d] = (double)y0[d] + full[(o * Tf + t + drop) * Ho * Wo + s];
      }
  memcpy(y, y0, (size_t)no * sizeof *y);
  sc_ctx ctx = {x, {T, H, W, C, Co, ft, fs, drop}};
  kern_cpu_vae22_dup_up_add(x, y, &ctx.s);
  CHECK(sp_test_guard_ok(y, no), "dup_up wrote past its output");
  /* one float addition per element: the float sum of y0 and x exactly */
  int same = 1;
  for (int64_t i = 0; i < no; i++) same &= y[i] == (float)ref[i];
  CHECK(same, "dup_up C %lld -> %lld, T %lld, %lldx%lld, ft %d fs %d drop %d differs",
        (long long)C, (long long)Co, (long long)T, (long long)H, (long long)W, ft, fs, drop);
  check_threads("dup_up", run_dup, &ctx, y0, no);
  free(x), free(y), free(y0), free(rep), free(full), free(ref);
}

int main(void) {
  sp_test_begin("test_vae22_kernels");
  check_patchify(3, 1, 2, 2);
  check_patchify(3, 5, 6, 10);
  check_patchify(5, 2, 14, 4);
  /* the published shortcuts' factors, and odd frame counts (front padding) */
  check_avg_down(8, 8, 4, 6, 10, 1, 2);
  check_avg_down(8, 16, 1, 6, 4, 2, 2);
  check_avg_down(8, 16, 4, 2, 6, 2, 2);
  check_avg_down(6, 12, 3, 4, 4, 2, 2);
  check_avg_down(16, 16, 5, 3, 5, 1, 1);
  check_avg_down(4, 2, 2, 4, 2, 2, 2); /* g = 16 */
  check_dup_up(16, 16, 1, 3, 5, 2, 2, 1);
  check_dup_up(16, 16, 2, 3, 2, 2, 2, 0);
  check_dup_up(16, 8, 4, 2, 3, 1, 2, 0);
  check_dup_up(6, 3, 3, 3, 3, 2, 2, 1);
  check_dup_up(8, 3, 2, 1, 2, 2, 2, 0); /* R = 3 */
  printf("patchify, AvgDown3D, DupUp3D: direct formulas, guards, 1-3 threads\n");
  return sp_test_end();
}
