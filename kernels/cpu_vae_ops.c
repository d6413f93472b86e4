/* CPU channel RMS norm, nearest 2x upsample, per-frame attention, time
 * unfold and clamp of the VAE decoder (kern_cpu_vae.h). */
#include "kern_cpu.h"
#include "kern_cpu_vae.h"

#include <math.h>
#include <string.h>

/* Elements below which a parallel region costs more than it saves. */
#define VAE_PAR_MIN_ELEMS ((int64_t)1 << 15)
/* Positions one thread normalises together: the channel loop is outer, so
 * reads are contiguous runs of this many floats. */
enum { NORM_BLOCK = 64 };

void kern_cpu_channel_rmsnorm(const float *x, const float *gamma, float *y, int64_t C,
                              int64_t N) {
  if (C <= 0 || N <= 0) return;
  const int64_t blocks = (N + NORM_BLOCK - 1) / NORM_BLOCK;
  const float scale = (float)sqrt((double)C);
#pragma omp parallel for schedule(static) if (blocks > 1 && C * N > VAE_PAR_MIN_ELEMS)
  for (int64_t blk = 0; blk < blocks; blk++) {
    const int64_t n0 = blk * NORM_BLOCK;
    const int64_t nb = N - n0 < NORM_BLOCK ? N - n0 : NORM_BLOCK;
    double ss[NORM_BLOCK] = {0}; /* per position, summed over c in order */
    for (int64_t c = 0; c < C; c++) {
      const float *xc = x + c * N + n0;
      for (int64_t j = 0; j < nb; j++) ss[j] += (double)xc[j] * (double)xc[j];
    }
    double inv[NORM_BLOCK];
    for (int64_t j = 0; j < nb; j++) {
      double norm = sqrt(ss[j]);
      inv[j] = 1.0 / (norm > 1e-12 ? norm : 1e-12); /* F.normalize's clamp_min(eps) */
    }
    for (int64_t c = 0; c < C; c++) {
      const float *xc = x + c * N + n0;
      float *yc = y + c * N + n0;
      const float g = gamma[c];
      /* normalise (one rounding), then * sqrt(C), then * gamma, as the
       * published expression evaluates left to right. */
      for (int64_t j = 0; j < nb; j++) yc[j] = (float)((double)xc[j] * inv[j]) * scale * g;
    }
  }
}

void kern_cpu_upsample2x_nearest(const float *x, float *y, int64_t P, int64_t H, int64_t W) {
  if (P <= 0 || H <= 0 || W <= 0) return;
  const int64_t rows = P * 2 * H; /* output rows */
#pragma omp parallel for schedule(static) if (rows > 1 && rows * W > VAE_PAR_MIN_ELEMS)
  for (int64_t r = 0; r < rows; r++) {
    const int64_t p = r / (2 * H), oy = r % (2 * H);
    const float *src = x + (p * H + oy / 2) * W; /* (W) */
    float *dst = y + r * 2 * W;                  /* (2W) */
    for (int64_t ox = 0; ox < 2 * W; ox++) dst[ox] = src[ox / 2];
  }
}

int64_t kern_cpu_frame_attention_scratch(int64_t C, int64_t T, int64_t HW) {
  return 4 * T * HW * C;
}

/* dst (T, HW, C) token-major from src (C, T, HW) channel-first. */
static void to_tokens(const float *src, float *dst, int64_t C, int64_t T, int64_t HW) {
  const int64_t rows = T * HW;
#pragma omp parallel for schedule(static) if (rows * C > VAE_PAR_MIN_ELEMS)
  for (int64_t r = 0; r < rows; r++) {
    float *d = dst + r * C;
    for (int64_t c = 0; c < C; c++) d[c] = src[c * rows + r];
  }
}

void kern_cpu_frame_attention(const float *qkv, float *scratch, float *out, int64_t C, int64_t T,
                              int64_t HW) {
  if (C <= 0 || T <= 0 || HW <= 0) return;
  const int64_t n = T * HW * C;
  float *q = scratch, *k = scratch + n, *v = scratch + 2 * n, *o = scratch + 3 * n;
  to_tokens(qkv, q, C, T, HW);
  to_tokens(qkv + n, k, C, T, HW);
  to_tokens(qkv + 2 * n, v, C, T, HW);
  for (int64_t t = 0; t < T; t++) {
    const int64_t off = t * HW * C;
    kern_cpu_attention(q + off, k + off, v + off, o + off, HW, HW, 1, C);
  }
  /* out (C, T*HW) back from o (T*HW, C). */
  const int64_t rows = T * HW;
#pragma omp parallel for schedule(static) if (n > VAE_PAR_MIN_ELEMS)
  for (int64_t c = 0; c < C; c++) {
    float *dc = out + c * rows;
    for (int64_t r = 0; r < rows; r++) dc[r] = o[r * C + c];
  }
}

void kern_cpu_time_unfold2(const float *x, float *y, int64_t C, int64_t T, int64_t HW) {
  const int64_t planes = C * 2 * T; /* output frames of all channels */
#pragma omp parallel for schedule(static) if (planes * HW > VAE_PAR_MIN_ELEMS)
  for (int64_t p = 0; p < planes; p++) {
    const int64_t c = p / (2 * T), f = p % (2 * T);
    const int64_t t = f / 2, k = f % 2;
    memcpy(y + p * HW, x + ((k * C + c) * T + t) * HW, (size_t)HW * sizeof *y);
  }
}

void kern_cpu_clamp(float *x, int64_t n, float lo, float hi) {
#pragma omp parallel for schedule(static) if (n > VAE_PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++) x[i] = x[i] < lo ? lo : (x[i] > hi ? hi : x[i]);
}
