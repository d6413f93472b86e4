/* CPU stride-2 convolutions of the VAE encoder's downsamples
 * (kern_cpu_vae_enc.h). As kern_cpu_causal_conv3d: one output row is one
 * unit of work, owned by one thread, starting at the bias, every tap added
 * in order; taps on the zero padding are skipped (the same value). */
#include "kern_cpu_vae_enc.h"

#include <stddef.h>

/* Multiply-adds below which a parallel region costs more than it saves. */
#define CONV_PAR_MIN_MACS ((int64_t)1 << 16)

/* Flat list: a convolution's pointers and shape, as cuDNN and the CUDA VAE kernels take them. */
void kern_cpu_conv2d_s2_frames(const float *x, const float *w, const float *b, float *y,
                               int64_t ci, int64_t co, int64_t T, int64_t H, int64_t W) {
  const int64_t Ho = H / 2, Wo = W / 2;
  if (co <= 0 || T <= 0 || Ho <= 0 || Wo <= 0) return;
  const int64_t units = co * T * Ho;
  const int64_t macs = units * Wo * ci * 9;
#pragma omp parallel for schedule(static) if (units > 1 && macs > CONV_PAR_MIN_MACS)
  for (int64_t u = 0; u < units; u++) {
    const int64_t o = u / (T * Ho), t = (u / Ho) % T, i = u % Ho;
    float *yr = y + ((o * T + t) * Ho + i) * Wo; /* (Wo) */
    const float bias = b ? b[o] : 0.0f;
    for (int64_t j = 0; j < Wo; j++) yr[j] = bias;
    for (int64_t c = 0; c < ci; c++) {
      const float *plane = x + (c * T + t) * H * W; /* (H, W) */
      const float *wc = w + (o * ci + c) * 9;       /* (3, 3) */
      for (int a = 0; a < 3; a++) {
        const int64_t sy = 2 * i + a;
        if (sy >= H) continue; /* the padded bottom row */
        const float *row = plane + sy * W;
        for (int d = 0; d < 3; d++) {
          const float wv = wc[a * 3 + d];
          /* column 2j + d exists for j < (W - d + 1) / 2; past it, the
           * padded right column */
          int64_t jn = (W - d + 1) / 2;
          if (jn > Wo) jn = Wo;
          for (int64_t j = 0; j < jn; j++) yr[j] += wv * row[2 * j + d];
        }
      }
    }
  }
}

/* Flat list: a convolution's pointers and shape, as cuDNN and the CUDA VAE kernels take them. */
int64_t kern_cpu_time_conv_s2(const float *x, const float *prev, const float *w, const float *b,
                              float *y, int64_t ci, int64_t co, int64_t T, int64_t HW) {
  const int64_t pre = prev ? 1 : 0, len = pre + T;
  if (len < 3 || co <= 0 || HW <= 0) return 0;
  const int64_t n = (len - 3) / 2 + 1;
  const int64_t units = co * n;
  const int64_t macs = units * HW * ci * 3;
#pragma omp parallel for schedule(static) if (units > 1 && macs > CONV_PAR_MIN_MACS)
  for (int64_t u = 0; u < units; u++) {
    const int64_t o = u / n, j = u % n;
    float *yr = y + (o * n + j) * HW; /* (HW) */
    const float bias = b ? b[o] : 0.0f;
    for (int64_t p = 0; p < HW; p++) yr[p] = bias;
    for (int64_t i = 0; i < ci; i++) {
      for (int a = 0; a < 3; a++) {
        const int64_t f = 2 * j + a - pre; /* frame of x; -1 is prev */
        const float *src = f < 0 ? prev + i * HW : x + (i * T + f) * HW;
        const float wv = w[(o * ci + i) * 3 + a];
        for (int64_t p = 0; p < HW; p++) yr[p] += wv * src[p];
      }
    }
  }
  return n;
}
