/* The VAE decoder's CPU kernels (kernels/kern_cpu_vae.h) against direct
 * float64 formulas on fresh random data: causal 3-D convolution (every
 * history length, odd sizes), per-frame 2-D convolution, channel RMS norm
 * (with an all-zero position), nearest-exact 2x upsample, per-frame
 * attention, time unfold, clamp. Guard floats after every output; each
 * kernel bit-identical for 1, 2 and 3 threads. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kern_cpu_vae.h"
#include "sp_test.h"

#include <omp.h>

/* ---------------------------------------------------------------- conv */

typedef struct conv_case {
  int64_t ci, co, T, H, W;
  int kt, kh, kw, n_hist;
} conv_case;

/* The formula of kern_cpu_vae.h, in double, over the input with its
 * history frames in front. */
static void ref_conv(const conv_case *k, const float *x, const float *hist, const float *w,
                     const float *b, double *y) {
  const int past = k->kt - 1;
  for (int64_t o = 0; o < k->co; o++)
    for (int64_t t = 0; t < k->T; t++)
      for (int64_t h = 0; h < k->H; h++)
        for (int64_t xx = 0; xx < k->W; xx++) {
          double s = b ? b[o] : 0.0;
          for (int64_t i = 0; i < k->ci; i++)
            for (int a = 0; a < k->kt; a++)
              for (int c = 0; c < k->kh; c++)
                for (int d = 0; d < k->kw; d++) {
                  int64_t f = t + a - past, sy = h + c - k->kh / 2, sx = xx + d - k->kw / 2;
                  if (sy < 0 || sy >= k->H || sx < 0 || sx >= k->W) continue;
                  double v;
                  if (f >= 0)
                    v = x[((i * k->T + f) * k->H + sy) * k->W + sx];
                  else if (past + f >= past - k->n_hist)
                    v = hist[((i * past + past + f) * k->H + sy) * k->W + sx];
                  else
                    v = 0.0;
                  s += (double)w[(((o * k->ci + i) * k->kt + a) * k->kh + c) * k->kw + d] * v;
                }
          y[((o * k->T + t) * k->H + h) * k->W + xx] = s;
        }
}

static void check_conv(const conv_case *k, int with_bias, int threads_check) {
  const int64_t nx = k->ci * k->T * k->H * k->W, ny = k->co * k->T * k->H * k->W;
  const int64_t nh = k->ci * (k->kt - 1) * k->H * k->W;
  const int64_t nw = k->co * k->ci * k->kt * k->kh * k->kw;
  float *x = sp_test_alloc(nx), *hist = sp_test_alloc(nh > 0 ? nh : 1), *w = sp_test_alloc(nw);
  float *b = sp_test_alloc(k->co), *y = sp_test_alloc(ny), *y2 = sp_test_alloc(ny);
  double *ref = sp_test_dalloc(ny);
  sp_rand_fill(x, nx, -1.0, 1.0);
  sp_rand_fill(hist, nh, -1.0, 1.0);
  sp_rand_fill(w, nw, -0.5, 0.5);
  sp_rand_fill(b, k->co, -0.5, 0.5);
  /* Unused history slots hold NaN: reading one would poison the result. */
  for (int64_t i = 0; i < k->ci; i++)
    for (int s = 0; s < k->kt - 1 - k->n_hist; s++)
      for (int64_t p = 0; p < k->H * k->W; p++)
        hist[(i * (k->kt - 1) + s) * k->H * k->W + p] = sp_test_sentinel();
  const float *bb = with_bias ? b : NULL;

  kern_cpu_causal_conv3d(x, hist, k->n_hist, w, bb, y, k->ci, k->co, k->T, k->H, k->W, k->kt,
                         k->kh, k->kw);
  ref_conv(k, x, hist, w, bb, ref);
  double err = sp_test_rel_l2(y, ref, ny);
  CHECK(err <= SP_TEST_TOL_F32, "conv3d ci=%lld co=%lld T=%lld %lldx%lld k=(%d,%d,%d) hist %d: rel L2 %.3g",
        (long long)k->ci, (long long)k->co, (long long)k->T, (long long)k->H, (long long)k->W,
        k->kt, k->kh, k->kw, k->n_hist, err);
  CHECK(sp_test_guard_ok(y, ny), "conv3d: wrote past y");
  printf("conv3d ci=%lld co=%lld T=%lld %lldx%lld k=(%d,%d,%d) hist %d bias %d: rel L2 %.2e\n",
         (long long)k->ci, (long long)k->co, (long long)k->T, (long long)k->H, (long long)k->W,
         k->kt, k->kh, k->kw, k->n_hist, with_bias, err);

  if (k->kt == 1) {
    /* The 2-D convolution per frame is the same computation. */
    kern_cpu_conv2d_frames(x, w, bb, y2, k->ci, k->co, k->T, k->H, k->W, k->kh, k->kw);
    CHECK(memcmp(y, y2, (size_t)ny * sizeof *y) == 0, "conv2d_frames differs from conv3d kt=1");
    CHECK(sp_test_rel_l2(y2, ref, ny) <= SP_TEST_TOL_F32, "conv2d_frames against the formula");
  }
  if (threads_check) {
    int nthreads = omp_get_max_threads();
    for (int t = 1; t <= 3; t++) {
      omp_set_num_threads(t);
      kern_cpu_causal_conv3d(x, hist, k->n_hist, w, bb, y2, k->ci, k->co, k->T, k->H, k->W,
                             k->kt, k->kh, k->kw);
      CHECK(memcmp(y, y2, (size_t)ny * sizeof *y) == 0, "conv3d: %d threads differ", t);
    }
    omp_set_num_threads(nthreads);
  }
  free(x), free(hist), free(w), free(b), free(y), free(y2), free(ref);
}

/* ---------------------------------------------------------------- norm */

static void check_norm(int64_t C, int64_t N) {
  float *x = sp_test_alloc(C * N), *g = sp_test_alloc(C), *y = sp_test_alloc(C * N), *y2 = sp_test_alloc(C * N);
  double *ref = sp_test_dalloc(C * N);
  sp_rand_fill(x, C * N, -3.0, 3.0);
  sp_rand_fill(g, C, 0.5, 1.5);
  for (int64_t c = 0; c < C; c++) x[c * N + N / 2] = 0.0f; /* norm 0: clamped, output 0 */
  kern_cpu_channel_rmsnorm(x, g, y, C, N);
  for (int64_t n = 0; n < N; n++) {
    double ss = 0.0;
    for (int64_t c = 0; c < C; c++) ss += (double)x[c * N + n] * x[c * N + n];
    double den = fmax(sqrt(ss), 1e-12);
    for (int64_t c = 0; c < C; c++) ref[c * N + n] = x[c * N + n] / den * sqrt((double)C) * g[c];
  }
  double err = sp_test_rel_l2(y, ref, C * N);
  CHECK(err <= SP_TEST_TOL_F32, "channel rmsnorm C=%lld N=%lld: rel L2 %.3g", (long long)C, (long long)N,
        err);
  CHECK(sp_test_guard_ok(y, C * N), "channel rmsnorm: wrote past y");
  int zero = 1;
  for (int64_t c = 0; c < C; c++) zero &= y[c * N + N / 2] == 0.0f;
  CHECK(zero, "channel rmsnorm: an all-zero position must give 0");
  memcpy(y2, x, (size_t)(C * N) * sizeof *x);
  kern_cpu_channel_rmsnorm(y2, g, y2, C, N);
  CHECK(memcmp(y, y2, (size_t)(C * N) * sizeof *y) == 0, "channel rmsnorm: in place differs");
  int nthreads = omp_get_max_threads();
  for (int t = 1; t <= 3; t++) {
    omp_set_num_threads(t);
    kern_cpu_channel_rmsnorm(x, g, y2, C, N);
    CHECK(memcmp(y, y2, (size_t)(C * N) * sizeof *y) == 0, "channel rmsnorm: %d threads", t);
  }
  omp_set_num_threads(nthreads);
  printf("channel rmsnorm C=%lld N=%lld: rel L2 %.2e\n", (long long)C, (long long)N, err);
  free(x), free(g), free(y), free(y2), free(ref);
}

/* ---------------------------------------------------------------- upsample */

static void check_upsample(int64_t P, int64_t H, int64_t W) {
  float *x = sp_test_alloc(P * H * W), *y = sp_test_alloc(P * 4 * H * W);
  sp_rand_fill(x, P * H * W, -1.0, 1.0);
  kern_cpu_upsample2x_nearest(x, y, P, H, W);
  int ok = 1;
  for (int64_t p = 0; p < P; p++)
    for (int64_t oy = 0; oy < 2 * H; oy++)
      for (int64_t ox = 0; ox < 2 * W; ox++) {
        /* nearest-exact: src = min(floor((o + 0.5) * in / out), in - 1) */
        int64_t sy = (int64_t)fmin(floor((oy + 0.5) * (double)H / (2.0 * H)), (double)(H - 1));
        int64_t sx = (int64_t)fmin(floor((ox + 0.5) * (double)W / (2.0 * W)), (double)(W - 1));
        ok &= y[(p * 2 * H + oy) * 2 * W + ox] == x[(p * H + sy) * W + sx];
      }
  CHECK(ok, "upsample P=%lld %lldx%lld: not nearest-exact", (long long)P, (long long)H,
        (long long)W);
  CHECK(sp_test_guard_ok(y, P * 4 * H * W), "upsample: wrote past y");
  printf("upsample2x P=%lld %lldx%lld: %s\n", (long long)P, (long long)H, (long long)W,
         ok ? "exact" : "WRONG");
  free(x), free(y);
}

/* ---------------------------------------------------------------- attention */

static void check_attention(int64_t C, int64_t T, int64_t HW, double spread) {
  const int64_t n = C * T * HW;
  float *qkv = sp_test_alloc(3 * n), *out = sp_test_alloc(n), *out2 = sp_test_alloc(n);
  float *scratch = sp_test_alloc(kern_cpu_frame_attention_scratch(C, T, HW));
  double *ref = sp_test_dalloc(n);
  sp_rand_fill(qkv, 3 * n, -spread, spread);
  kern_cpu_frame_attention(qkv, scratch, out, C, T, HW);
  const float *q = qkv, *k = qkv + n, *v = qkv + 2 * n; /* each (C, T, HW) */
  for (int64_t t = 0; t < T; t++) /* frame t: HW tokens, C channels T * HW apart */
    sp_test_attention_ref(q + t * HW, k + t * HW, v + t * HW, ref + t * HW, HW, HW, C, 1, 1,
                          T * HW);
  double err = sp_test_rel_l2(out, ref, n);
  CHECK(err <= SP_TEST_TOL_F32, "frame attention C=%lld T=%lld HW=%lld: rel L2 %.3g", (long long)C,
        (long long)T, (long long)HW, err);
  CHECK(sp_test_guard_ok(out, n), "frame attention: wrote past out");
  CHECK(sp_test_guard_ok(scratch, kern_cpu_frame_attention_scratch(C, T, HW)),
        "frame attention: wrote past its scratch");
  int nthreads = omp_get_max_threads();
  for (int th = 1; th <= 3; th++) {
    omp_set_num_threads(th);
    kern_cpu_frame_attention(qkv, scratch, out2, C, T, HW);
    CHECK(memcmp(out, out2, (size_t)n * sizeof *out) == 0, "frame attention: %d threads", th);
  }
  omp_set_num_threads(nthreads);
  printf("frame attention C=%lld T=%lld HW=%lld spread %g: rel L2 %.2e\n", (long long)C,
         (long long)T, (long long)HW, spread, err);
  free(qkv), free(out), free(out2), free(scratch), free(ref);
}

/* ---------------------------------------------------------------- copies */

static void check_unfold_clamp(int64_t C, int64_t T, int64_t HW) {
  float *x = sp_test_alloc(2 * C * T * HW), *y = sp_test_alloc(2 * C * T * HW);
  sp_rand_fill(x, 2 * C * T * HW, -2.0, 2.0);
  kern_cpu_time_unfold2(x, y, C, T, HW);
  int ok = 1;
  for (int64_t c = 0; c < C; c++)
    for (int64_t f = 0; f < 2 * T; f++)
      for (int64_t p = 0; p < HW; p++)
        ok &= y[(c * 2 * T + f) * HW + p] == x[((f % 2 * C + c) * T + f / 2) * HW + p];
  CHECK(ok && sp_test_guard_ok(y, 2 * C * T * HW), "time unfold C=%lld T=%lld HW=%lld", (long long)C,
        (long long)T, (long long)HW);

  const int64_t n = 2 * C * T * HW;
  memcpy(y, x, (size_t)n * sizeof *x);
  kern_cpu_clamp(y, n, -1.0f, 1.0f);
  int ok2 = 1, clamped = 0;
  for (int64_t i = 0; i < n; i++) {
    float want = x[i] < -1.0f ? -1.0f : (x[i] > 1.0f ? 1.0f : x[i]);
    ok2 &= y[i] == want;
    clamped += want != x[i];
  }
  CHECK(ok2 && clamped > 0 && clamped < n, "clamp to [-1, 1] (%d of %lld clamped)", clamped,
        (long long)n);
  printf("time unfold and clamp C=%lld T=%lld HW=%lld: %s\n", (long long)C, (long long)T,
         (long long)HW, ok && ok2 ? "exact" : "WRONG");
  free(x), free(y);
}

int main(void) {
  sp_test_begin("test_vae_kernels");
  static const conv_case convs[] = {
      /* ci co  T  H  W kt kh kw hist */
      {3, 4, 1, 5, 7, 3, 3, 3, 0},    {3, 4, 1, 5, 7, 3, 3, 3, 1},
      {3, 4, 2, 5, 7, 3, 3, 3, 2},    {5, 2, 4, 3, 3, 3, 3, 3, 1},
      {4, 8, 2, 1, 1, 3, 3, 3, 2},    {6, 12, 1, 4, 5, 3, 1, 1, 0},
      {6, 12, 2, 4, 5, 3, 1, 1, 2},   {7, 3, 3, 6, 5, 1, 1, 1, 0},
      {8, 5, 4, 7, 9, 1, 3, 3, 0},    {2, 3, 1, 9, 2, 2, 1, 3, 1},
      {16, 24, 4, 9, 11, 3, 3, 3, 2},
  };
  const size_t nconv = sizeof convs / sizeof convs[0];
  for (size_t i = 0; i < nconv; i++) check_conv(&convs[i], (int)(i % 3 != 2), i == nconv - 1);
  check_norm(1, 1);
  check_norm(3, 5);
  check_norm(48, 200);
  check_norm(384, 129);
  check_upsample(1, 1, 1);
  check_upsample(6, 3, 5);
  check_upsample(2, 8, 7);
  check_attention(1, 1, 1, 1.0);
  check_attention(8, 2, 15, 2.0);
  check_attention(24, 3, 70, 4.0); /* more keys than one tile */
  check_unfold_clamp(3, 1, 5);
  check_unfold_clamp(5, 2, 12);
  return sp_test_end();
}
