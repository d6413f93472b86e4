/* kern_cpu_rope_table and kern_cpu_rope_apply against the published Wan 2.1
 * construction, written independently here: per axis a frequency vector
 * 1 / 10000^(arange(0, d_axis, 2) / d_axis) with d_f = hd - 4*(hd/6) and
 * d_h = d_w = 2*(hd/6) (44/42/42 dims for hd = 128), concatenated f, h, w;
 * the rotation is the complex product (x0 + i x1) * exp(i a) in double. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_cpu.h"
#include "sp_test.h"

#include <complex.h>

static void check(int64_t F, int64_t H, int64_t W, int64_t heads, int64_t hd) {
  int64_t half = hd / 2, L = F * H * W;
  int64_t dims[3] = {hd - 4 * (hd / 6), 2 * (hd / 6), 2 * (hd / 6)};
  double *ct = sp_test_dalloc(L * half), *st = sp_test_dalloc(L * half);
  double *ang = sp_test_dalloc(L * half);
  float *x = sp_test_alloc(L * heads * hd);
  double *ref = sp_test_dalloc(L * heads * hd);

  /* Reference angles, tokens visited in (f, h, w) row-major order. */
  int64_t t = 0;
  for (int64_t f = 0; f < F; f++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t w = 0; w < W; w++, t++) {
        int64_t pos[3] = {f, h, w}, j = 0;
        for (int a = 0; a < 3; a++)
          for (int64_t i = 0; i < dims[a]; i += 2, j++)
            ang[t * half + j] = (double)pos[a] * (1.0 / pow(10000.0, (double)i / (double)dims[a]));
        CHECK(j == half, "rope hd=%lld: axis dims %lld+%lld+%lld do not give %lld pairs",
                 (long long)hd, (long long)dims[0], (long long)dims[1], (long long)dims[2],
                 (long long)half);
      }

  kern_cpu_rope_table(F, H, W, hd, ct, st);
  double tab_err = 0.0;
  for (int64_t i = 0; i < L * half; i++) {
    tab_err = fmax(tab_err, fabs(ct[i] - cos(ang[i])));
    tab_err = fmax(tab_err, fabs(st[i] - sin(ang[i])));
  }
  /* Both sides are double; positions < 100 keep angles small. */
  CHECK(tab_err <= 1e-12, "rope table F=%lld H=%lld W=%lld hd=%lld: max error %.3g",
           (long long)F, (long long)H, (long long)W, (long long)hd, tab_err);

  sp_rand_fill(x, L * heads * hd, -2.0, 2.0);
  for (int64_t tok = 0; tok < L; tok++)
    for (int64_t h = 0; h < heads; h++)
      for (int64_t j = 0; j < half; j++) {
        const float *p = x + (tok * heads + h) * hd + 2 * j;
        double complex z = ((double)p[0] + I * (double)p[1]) * cexp(I * ang[tok * half + j]);
        ref[(tok * heads + h) * hd + 2 * j] = creal(z);
        ref[(tok * heads + h) * hd + 2 * j + 1] = cimag(z);
      }
  kern_cpu_rope_apply(x, ct, st, L, heads, hd);
  double err = sp_test_rel_l2(x, ref, L * heads * hd);
  CHECK(err <= SP_TEST_TOL_F32, "rope apply F=%lld H=%lld W=%lld heads=%lld hd=%lld: rel L2 %.3g",
           (long long)F, (long long)H, (long long)W, (long long)heads, (long long)hd, err);
  CHECK(sp_test_guard_ok(x, L * heads * hd), "rope apply: wrote past x");
  printf("rope F=%lld H=%lld W=%lld heads=%lld hd=%lld: table max err %.2e, rel L2 %.2e\n",
         (long long)F, (long long)H, (long long)W, (long long)heads, (long long)hd, tab_err, err);
  free(ct), free(st), free(ang), free(x), free(ref);
}

int main(void) {
  sp_test_begin("test_rope");
  /* 128: the 22/21/21 split of the published model. Published facts: the
   * first pair of every axis has frequency 1, and the last pair of the
   * frame section has 10000^(-42/44). */
  {
    double ct[2 * 64], st[2 * 64]; /* 2 tokens x 64 pairs */
    kern_cpu_rope_table(2, 1, 1, 128, ct, st); /* token 1 = (f=1, h=0, w=0) */
    double a21 = pow(10000.0, -42.0 / 44.0);
    CHECK(fabs(ct[64 + 0] - cos(1.0)) < 1e-15 && fabs(st[64 + 0] - sin(1.0)) < 1e-15,
             "rope: pair 0 at f=1 is not angle 1");
    CHECK(fabs(st[64 + 21] - sin(a21)) < 1e-15, "rope: pair 21 at f=1 is not 10000^(-42/44)");
    CHECK(st[64 + 22] == 0.0 && ct[64 + 22] == 1.0, "rope: pair 22 (h section) moves with f");
  }
  check(1, 1, 1, 1, 128);
  check(2, 3, 5, 2, 128);
  check(3, 4, 7, 3, 128);
  check(21, 30, 52, 1, 128); /* the 480p grid, all positions */
  check(2, 5, 3, 2, 64);
  check(3, 2, 2, 1, 12);
  return sp_test_end();
}
