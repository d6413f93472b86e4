/* CPU 3-D rotary position embedding (Wan 2.1: frame, row, column).
 *
 * The published model builds its frequency tables in float64 and rotates
 * q and k as complex128 numbers, rounding back to fp32 at the end; we do
 * the same: tables in double, the 2x2 rotation in double, one rounding. */
#include "kern_cpu.h"

#include <math.h>

/* Angle of pair j of a section of p pairs at position n: n * 10000^(-2j/(2p)). */
static double rope_angle(int64_t n, int64_t j, int64_t p) {
  return (double)n * pow(10000.0, -(double)(2 * j) / (double)(2 * p));
}

void kern_cpu_rope_table(int64_t F, int64_t H, int64_t W, int64_t hd, double *cos_t,
                         double *sin_t) {
  int64_t half = hd / 2;
  int64_t p1 = hd / 6, p2 = hd / 6, p0 = half - p1 - p2; /* 22/21/21 for 128 */
  int64_t L = F * H * W;
#pragma omp parallel for schedule(static) if (L > 256)
  for (int64_t t = 0; t < L; t++) {
    int64_t f = t / (H * W), h = (t / W) % H, w = t % W;
    double *c = cos_t + t * half; /* (hd/2) */
    double *s = sin_t + t * half; /* (hd/2) */
    for (int64_t j = 0; j < half; j++) {
      double a;
      if (j < p0)
        a = rope_angle(f, j, p0);
      else if (j < p0 + p1)
        a = rope_angle(h, j - p0, p1);
      else
        a = rope_angle(w, j - p0 - p1, p2);
      c[j] = cos(a);
      s[j] = sin(a);
    }
  }
}

void kern_cpu_rope_apply(float *x, const double *cos_t, const double *sin_t, int64_t L,
                         int64_t heads, int64_t hd) {
  int64_t half = hd / 2;
#pragma omp parallel for schedule(static) if (L * heads * hd > ((int64_t)1 << 15))
  for (int64_t t = 0; t < L; t++) {
    const double *c = cos_t + t * half; /* (hd/2) */
    const double *s = sin_t + t * half; /* (hd/2) */
    for (int64_t h = 0; h < heads; h++) {
      float *xh = x + (t * heads + h) * hd; /* (hd), pairs interleaved */
      for (int64_t j = 0; j < half; j++) {
        double x0 = (double)xh[2 * j], x1 = (double)xh[2 * j + 1];
        xh[2 * j] = (float)(x0 * c[j] - x1 * s[j]);
        xh[2 * j + 1] = (float)(x0 * s[j] + x1 * c[j]);
      }
    }
  }
}
