/* CPU layout ops: patchify before the patch embedding, unpatchify after the
 * head, and the sinusoidal time embedding. Pure index maps (and one
 * transcendental vector), so every element is written by one thread. */
#include "kern_cpu.h"

#include <math.h>

void kern_cpu_patchify(const float *x, float *tokens, int64_t C, int64_t F, int64_t H, int64_t W) {
  int64_t gh = H / 2, gw = W / 2, L = F * gh * gw;
#pragma omp parallel for schedule(static) if (L * C > ((int64_t)1 << 15))
  for (int64_t t = 0; t < L; t++) {
    int64_t f = t / (gh * gw), h = (t / gw) % gh, w = t % gw;
    float *tok = tokens + t * C * 4; /* (C*4): index c*4 + kh*2 + kw */
    for (int64_t c = 0; c < C; c++) {
      const float *src = x + ((c * F + f) * H + 2 * h) * W + 2 * w; /* x[c, f, 2h, 2w] */
      tok[c * 4 + 0] = src[0];
      tok[c * 4 + 1] = src[1];
      tok[c * 4 + 2] = src[W];
      tok[c * 4 + 3] = src[W + 1];
    }
  }
}

void kern_cpu_unpatchify(const float *tokens, float *x, int64_t C, int64_t F, int64_t H,
                         int64_t W) {
  int64_t gh = H / 2, gw = W / 2, L = F * gh * gw;
#pragma omp parallel for schedule(static) if (L * C > ((int64_t)1 << 15))
  for (int64_t t = 0; t < L; t++) {
    int64_t f = t / (gh * gw), h = (t / gw) % gh, w = t % gw;
    const float *tok = tokens + t * 4 * C; /* (4*C): index (q*2 + r)*C + c, p = 0 */
    for (int64_t q = 0; q < 2; q++)
      for (int64_t r = 0; r < 2; r++)
        for (int64_t c = 0; c < C; c++)
          x[((c * F + f) * H + 2 * h + q) * W + 2 * w + r] = tok[(q * 2 + r) * C + c];
  }
}

void kern_cpu_time_sinusoid(double t, int64_t n, float *out) {
  int64_t half = n / 2;
  for (int64_t j = 0; j < half; j++) {
    double arg = t * pow(10000.0, -(double)j / (double)half);
    out[j] = (float)cos(arg); /* cos first, as published */
    out[half + j] = (float)sin(arg);
  }
}
