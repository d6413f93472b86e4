/* CPU kernels of the Wan 2.2 VAE (kern_cpu_vae22.h): patchify,
 * unpatchify, AvgDown3D and DupUp3D.
 * One output row or plane per unit of work, owned by one thread. */
#include "kern_cpu_vae22.h"

#include <stddef.h>
#include <string.h>

/* Elements (or multiply-adds) below which a parallel region costs more
 * than it saves. */
#define VAE22_PAR_MIN ((int64_t)1 << 15)

void kern_cpu_vae22_patchify(const float *x, float *y, int64_t C, int64_t T, int64_t H,
                             int64_t W) {
  const int64_t h = H / 2, w = W / 2;
  const int64_t rows = 4 * C * T * h; /* output rows (o, t, i) */
#pragma omp parallel for schedule(static) if (rows * w > VAE22_PAR_MIN)
  for (int64_t u = 0; u < rows; u++) {
    const int64_t i = u % h, t = (u / h) % T, o = u / (h * T);
    const int64_t c = o / 4, r = (o / 2) % 2, q = o % 2;
    const float *src = x + ((c * T + t) * H + 2 * i + q) * W + r; /* every 2nd column */
    float *dst = y + u * w;
    for (int64_t j = 0; j < w; j++) dst[j] = src[2 * j];
  }
}

void kern_cpu_vae22_unpatchify(const float *x, float *y, int64_t C, int64_t T, int64_t h,
                               int64_t w) {
  const int64_t rows = C * T * 2 * h; /* output rows (c, t, oy) */
#pragma omp parallel for schedule(static) if (rows * 2 * w > VAE22_PAR_MIN)
  for (int64_t u = 0; u < rows; u++) {
    const int64_t oy = u % (2 * h), t = (u / (2 * h)) % T, c = u / (2 * h * T);
    const int64_t i = oy / 2, q = oy % 2;
    float *dst = y + u * 2 * w;
    for (int64_t r = 0; r < 2; r++) {
      const float *src = x + (((c * 4 + r * 2 + q) * T + t) * h + i) * w;
      for (int64_t j = 0; j < w; j++) dst[2 * j + r] = src[j];
    }
  }
}

void kern_cpu_vae22_avg_down_add(const float *x, float *y, const kern_vae22_shortcut *s) {
  const int64_t C = s->ci, Co = s->co, T = s->T, H = s->H, W = s->W;
  const int ft = s->ft, fs = s->fs;
  const int64_t pad = (ft - T % ft) % ft, To = (T + pad) / ft, Ho = H / fs, Wo = W / fs;
  const int64_t g = C * ft * fs * fs / Co;
  const float inv_g = 1.0f / (float)g;
  const int64_t rows = Co * To * Ho; /* output rows (o, j, i) */
#pragma omp parallel for schedule(static) if (rows * Wo * g > VAE22_PAR_MIN)
  for (int64_t u = 0; u < rows; u++) {
    const int64_t i = u % Ho, j = (u / Ho) % To, o = u / (Ho * To);
    float *yr = y + u * Wo;
    for (int64_t k = 0; k < Wo; k++) {
      float s = 0.0f;
      for (int64_t m = o * g; m < (o + 1) * g; m++) {
        const int64_t r = m % fs, q = (m / fs) % fs, a = (m / (fs * fs)) % ft;
        const int64_t c = m / (fs * fs * ft), f = j * ft + a - pad;
        if (f < 0) continue; /* a front padding frame: zero */
        s += x[((c * T + f) * H + i * fs + q) * W + k * fs + r];
      }
      yr[k] += s * inv_g;
    }
  }
}

void kern_cpu_vae22_dup_up_add(const float *x, float *y, const kern_vae22_shortcut *s) {
  const int64_t C = s->ci, Co = s->co, T = s->T, H = s->H, W = s->W;
  const int ft = s->ft, fs = s->fs, drop = s->drop;
  const int64_t R = Co * ft * fs * fs / C, To = T * ft - drop, Ho = H * fs, Wo = W * fs;
  const int64_t rows = Co * To * Ho; /* output rows (o, f, oy) */
#pragma omp parallel for schedule(static) if (rows * Wo > VAE22_PAR_MIN)
  for (int64_t u = 0; u < rows; u++) {
    const int64_t oy = u % Ho, f = (u / Ho) % To + drop, o = u / (Ho * To);
    const int64_t t = f / ft, a = f % ft, i = oy / fs, q = oy % fs;
    float *yr = y + u * Wo;
    for (int64_t ox = 0; ox < Wo; ox++) {
      const int64_t j = ox / fs, r = ox % fs;
      const int64_t k = ((o * ft + a) * fs + q) * fs + r;
      yr[ox] += x[((k / R * T + t) * H + i) * W + j];
    }
  }
}
