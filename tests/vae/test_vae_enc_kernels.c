/* The VAE encoder's CPU kernels (kernels/kern_cpu_vae_enc.h) against direct
 * float64 formulas on fresh random data: the downsamples' stride-2 3x3
 * convolution after the one-sided pad (odd and even sizes, down to 2x2),
 * and downsample3d's stride-2 (3, 1, 1) time convolution with and without
 * the previous chunk's frame in front, with and without a bias. Both VAEs'
 * encoders run these (the Wan 2.2 VAE has the same downsamples). Guard floats after every output;
 * each kernel bit-identical for 1, 2 and 3 threads. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_cpu_vae_enc.h"
#include "sp_test.h"

#define TOL 1e-6

/* ---------------------------------------------------------------- spatial */

typedef struct s2_case {
  int64_t ci, co, T, H, W;
} s2_case;

/* ZeroPad2d((0, 1, 0, 1)) then Conv2d(3, stride 2), in double: the padded
 * frame x' has H + 1 rows and W + 1 columns, the last of each zero. */
static void ref_s2(const s2_case *k, const float *x, const float *w, const float *b, double *y) {
  const int64_t Ho = (k->H + 1 - 3) / 2 + 1, Wo = (k->W + 1 - 3) / 2 + 1;
  for (int64_t o = 0; o < k->co; o++)
    for (int64_t t = 0; t < k->T; t++)
      for (int64_t i = 0; i < Ho; i++)
        for (int64_t j = 0; j < Wo; j++) {
          double s = b ? b[o] : 0.0;
          for (int64_t c = 0; c < k->ci; c++)
            for (int a = 0; a < 3; a++)
              for (int d = 0; d < 3; d++) {
                const int64_t r = 2 * i + a, q = 2 * j + d;
                const double v = r < k->H && q < k->W ? x[((c * k->T + t) * k->H + r) * k->W + q]
                                                      : 0.0;
                s += (double)w[((o * k->ci + c) * 3 + a) * 3 + d] * v;
              }
          y[((o * k->T + t) * Ho + i) * Wo + j] = s;
        }
}

static void check_s2(const s2_case *k, int with_bias) {
  const int64_t Ho = k->H / 2, Wo = k->W / 2;
  const int64_t nx = k->ci * k->T * k->H * k->W, ny = k->co * k->T * Ho * Wo;
  const int64_t nw = k->co * k->ci * 9;
  float *x = sp_test_alloc(nx), *w = sp_test_alloc(nw), *b = sp_test_alloc(k->co);
  float *y = sp_test_alloc(ny), *y2 = sp_test_alloc(ny);
  double *ref = sp_test_dalloc(ny);
  sp_rand_fill(x, nx, -1.0, 1.0);
  sp_rand_fill(w, nw, -0.5, 0.5);
  sp_rand_fill(b, k->co, -0.2, 0.2);
  const float *bb = with_bias ? b : NULL;
  kern_cpu_conv2d_s2_frames(x, w, bb, y, k->ci, k->co, k->T, k->H, k->W);
  ref_s2(k, x, w, bb, ref);
  const double err = sp_test_rel_l2(y, ref, ny);
  CHECK(err < TOL && sp_test_guard_ok(y, ny),
        "conv2d_s2 ci %lld co %lld T %lld %lldx%lld -> %lldx%lld%s: rel L2 %.2e",
        (long long)k->ci, (long long)k->co, (long long)k->T, (long long)k->H, (long long)k->W,
        (long long)Ho, (long long)Wo, with_bias ? "" : " (no bias)", err);
  const int nthreads = omp_get_max_threads();
  for (int th = 1; th <= 3; th++) {
    omp_set_num_threads(th);
    kern_cpu_conv2d_s2_frames(x, w, bb, y2, k->ci, k->co, k->T, k->H, k->W);
    CHECK(memcmp(y, y2, (size_t)ny * sizeof *y) == 0, "conv2d_s2: %d threads differ", th);
  }
  omp_set_num_threads(nthreads);
  free(x), free(w), free(b), free(y), free(y2), free(ref);
}

/* ---------------------------------------------------------------- time */

typedef struct t2_case {
  int64_t ci, co, T, HW;
  int prev, no_bias;
} t2_case;

/* Conv3d((3, 1, 1), stride (2, 1, 1)) over [prev; x], in double. */
static int64_t ref_t2(const t2_case *k, const float *x, const float *prev, const float *w,
                      const float *b, double *y) {
  const int64_t len = k->T + (k->prev ? 1 : 0), n = (len - 3) / 2 + 1;
  for (int64_t o = 0; o < k->co; o++)
    for (int64_t j = 0; j < n; j++)
      for (int64_t p = 0; p < k->HW; p++) {
        double s = b ? b[o] : 0.0;
        for (int64_t i = 0; i < k->ci; i++)
          for (int a = 0; a < 3; a++) {
            const int64_t f = 2 * j + a; /* frame of [prev; x] */
            const double v = k->prev ? (f == 0 ? prev[i * k->HW + p]
                                               : x[(i * k->T + f - 1) * k->HW + p])
                                     : x[(i * k->T + f) * k->HW + p];
            s += (double)w[(o * k->ci + i) * 3 + a] * v;
          }
        y[(o * n + j) * k->HW + p] = s;
      }
  return n;
}

static void check_t2(const t2_case *k) {
  const int64_t len = k->T + (k->prev ? 1 : 0), n = (len - 3) / 2 + 1;
  const int64_t nx = k->ci * k->T * k->HW, ny = k->co * n * k->HW, nw = k->co * k->ci * 3;
  float *x = sp_test_alloc(nx), *prev = sp_test_alloc(k->ci * k->HW), *w = sp_test_alloc(nw);
  float *b = sp_test_alloc(k->co), *y = sp_test_alloc(ny), *y2 = sp_test_alloc(ny);
  double *ref = sp_test_dalloc(ny);
  sp_rand_fill(x, nx, -1.0, 1.0);
  sp_rand_fill(prev, k->ci * k->HW, -1.0, 1.0);
  sp_rand_fill(w, nw, -0.5, 0.5);
  sp_rand_fill(b, k->co, -0.2, 0.2);
  const float *pv = k->prev ? prev : NULL, *bb = k->no_bias ? NULL : b;
  const int64_t got = kern_cpu_time_conv_s2(x, pv, w, bb, y, k->ci, k->co, k->T, k->HW);
  const int64_t want = ref_t2(k, x, prev, w, bb, ref);
  const double err = sp_test_rel_l2(y, ref, ny);
  CHECK(got == want && err < TOL && sp_test_guard_ok(y, ny),
        "time_conv_s2 ci %lld co %lld %s%lld frames of %lld -> %lld (%lld): rel L2 %.2e",
        (long long)k->ci, (long long)k->co, k->prev ? "1 + " : "", (long long)k->T,
        (long long)k->HW, (long long)got, (long long)want, err);
  const int nthreads = omp_get_max_threads();
  for (int th = 1; th <= 3; th++) {
    omp_set_num_threads(th);
    kern_cpu_time_conv_s2(x, pv, w, bb, y2, k->ci, k->co, k->T, k->HW);
    CHECK(memcmp(y, y2, (size_t)ny * sizeof *y) == 0, "time_conv_s2: %d threads differ", th);
  }
  omp_set_num_threads(nthreads);
  free(x), free(prev), free(w), free(b), free(y), free(y2), free(ref);
}

int main(void) {
  sp_test_begin("test_vae_enc_kernels");
  static const s2_case s2[] = {
      {3, 5, 1, 2, 2},   {4, 4, 2, 5, 7},  {2, 3, 3, 8, 6},
      {8, 8, 4, 17, 13}, {5, 7, 1, 3, 2},  {16, 16, 2, 32, 40},
      /* as the Wan 2.2 encoder calls it (kern_cpu_vae22.h has no own) */
      {3, 5, 2, 6, 10},  {4, 3, 3, 7, 5},
  };
  for (size_t i = 0; i < sizeof s2 / sizeof s2[0]; i++) check_s2(&s2[i], (int)(i % 3 != 2));
  static const t2_case t2[] = {
      {4, 4, 4, 7, 1, 0}, {3, 5, 2, 10, 1, 0}, {6, 6, 3, 5, 0, 0}, {8, 8, 4, 64, 1, 0},
      {2, 3, 5, 9, 0, 0},
      /* the Wan 2.2 encoder's use: a kept frame, an even chunk; no bias */
      {5, 2, 2, 12, 1, 1}, {2, 3, 6, 1, 1, 0}, {3, 3, 5, 4, 0, 1},
  };
  for (size_t i = 0; i < sizeof t2 / sizeof t2[0]; i++) check_t2(&t2[i]);
  printf("stride-2 spatial and time convolutions agree with their formulas; 1-3 threads "
         "bit-identical\n");
  return sp_test_end();
}
