/* CPU causal 3-D convolution and the per-frame 2-D convolution of the VAE
 * decoder (kern_cpu_vae.h).
 *
 * One output row y[o, t, h, 0..W) is one unit of work, owned by one thread.
 * The row lives in the output itself: it starts at the bias and every tap
 * (i, a, c, d) adds w * (a shifted input row) to it, taps in that order, so
 * each element sums in the same order whatever the thread count; the inner
 * loop runs along the row and vectorises. Taps that fall on padding (zero
 * history frames, rows above or below the frame, columns off either side)
 * are skipped rather than added as zeros: the same value, fewer operations. */
#include "kern_cpu_vae.h"

#include <stddef.h>

/* Multiply-adds below which a parallel region costs more than it saves. */
#define CONV_PAR_MIN_MACS ((int64_t)1 << 16)

/* yr[x] += wv * row[x + d - pw] for the columns x whose source is inside
 * 0..W-1. */
static void conv_tap_row(float *yr, const float *row, float wv, int64_t W, int d, int pw) {
  int64_t off = (int64_t)d - pw;
  int64_t x0 = off < 0 ? -off : 0;
  int64_t x1 = off > 0 ? W - off : W;
  const float *src = row + off;
  for (int64_t x = x0; x < x1; x++) yr[x] += wv * src[x];
}

/* Flat list: a convolution's pointers and shape, as cuDNN and kern_cuda_vae_conv take them. */
void kern_cpu_causal_conv3d(const float *x, const float *hist, int n_hist, const float *w,
                            const float *b, float *y, int64_t ci, int64_t co, int64_t T,
                            int64_t H, int64_t W, int kt, int kh, int kw) {
  if (co <= 0 || T <= 0 || H <= 0 || W <= 0) return;
  const int64_t hw = H * W;
  const int past = kt - 1; /* history frames the kernel reaches back */
  const int ph = kh / 2, pw = kw / 2;
  const int64_t units = co * T * H;
  const int64_t macs = units * W * ci * kt * kh * kw;

#pragma omp parallel for schedule(static) if (units > 1 && macs > CONV_PAR_MIN_MACS)
  for (int64_t u = 0; u < units; u++) {
    const int64_t o = u / (T * H), t = (u / H) % T, h = u % H;
    float *yr = y + (o * T + t) * hw + h * W; /* (W) */
    const float bias = b ? b[o] : 0.0f;
    for (int64_t xi = 0; xi < W; xi++) yr[xi] = bias;
    const float *wo = w + o * ci * kt * kh * kw; /* (ci, kt, kh, kw) */
    for (int64_t i = 0; i < ci; i++) {
      for (int a = 0; a < kt; a++) {
        /* Frame t + a - past of the input; below 0 it is history slot
         * past + f, valid only among the last n_hist slots. */
        int64_t f = t + a - past;
        const float *plane; /* (H, W) */
        if (f >= 0) {
          plane = x + (i * T + f) * hw;
        } else {
          int64_t slot = past + f;
          if (slot < past - n_hist) continue;
          plane = hist + (i * past + slot) * hw;
        }
        const float *wa = wo + (i * kt + a) * kh * kw; /* (kh, kw) */
        for (int c = 0; c < kh; c++) {
          int64_t sy = h + c - ph;
          if (sy < 0 || sy >= H) continue;
          for (int d = 0; d < kw; d++) conv_tap_row(yr, plane + sy * W, wa[c * kw + d], W, d, pw);
        }
      }
    }
  }
}

/* Flat list: a convolution's pointers and shape, as cuDNN and kern_cuda_vae_conv take them. */
void kern_cpu_conv2d_frames(const float *x, const float *w, const float *b, float *y,
                            int64_t ci, int64_t co, int64_t T, int64_t H, int64_t W, int kh,
                            int kw) {
  /* (co, ci, kh, kw) is (co, ci, 1, kh, kw): no history with kt = 1. */
  kern_cpu_causal_conv3d(x, NULL, 0, w, b, y, ci, co, T, H, W, 1, kh, kw);
}
