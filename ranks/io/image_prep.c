/* Image preparation of the image-to-video pipelines (image_prep.h): the
 * two size rules in double, PyTorch's bicubic interpolation, Pillow's
 * LANCZOS resize and TI2V's centre crop, each written from the published
 * library code (I2V.md "Preparing the image"). */
#include "image_prep.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* ---- I2V-A14B ---------------------------------------------------------------- */

int rank_image_i2v_grid(const char *what, int64_t h, int64_t w, int64_t max_area,
                        int64_t *lat_h, int64_t *lat_w) {
  /* aspect_ratio = h / w; round(np.sqrt(max_area * aspect_ratio) // 8 // 2
   * * 2): floor divisions by powers of two are exact, so 2 floor(s / 16). */
  const double ar = (double)h / (double)w;
  const double sh = sqrt((double)max_area * ar), sw = sqrt((double)max_area / ar);
  const int64_t gh = (int64_t)floor(sh / 16.0) * 2, gw = (int64_t)floor(sw / 16.0) * 2;
  if (gh < 2 || gw < 2) {
    sp_log_error("%s: a %lldx%lld image within --max-area %lld gives a latent grid of %lldx%lld: "
                 "each side needs 2 at least (a larger --max-area, or a less elongated image)",
                 what, (long long)h, (long long)w, (long long)max_area, (long long)gh,
                 (long long)gw);
    return SP_ERR_INPUT;
  }
  *lat_h = gh;
  *lat_w = gw;
  return SP_OK;
}

/* Keys' cubic convolution kernel with A = -0.75 (upsample_bicubic2d's
 * cubic_convolution1 and 2), written as the reference writes it. */
#define CUBIC_A (-0.75)
static double cubic_near(double x) { /* |x| <= 1 */
  return ((CUBIC_A + 2) * x - (CUBIC_A + 3)) * x * x + 1;
}
static double cubic_far(double x) { /* 1 < |x| < 2 */
  return ((CUBIC_A * x - 5 * CUBIC_A) * x + 8 * CUBIC_A) * x - 4 * CUBIC_A;
}

/* The taps of output o along an axis of n_in -> n_out: up to 4 distinct
 * source indices in increasing order and their weights, the weights of a
 * clamped border index summed. Returns the count. */
static int cubic_taps(int64_t n_in, int64_t n_out, int64_t o, int64_t idx[4], double wt[4]) {
  const double scale = (double)n_in / (double)n_out;
  const double s = scale * ((double)o + 0.5) - 0.5;
  const double fi = floor(s), t = s - fi;
  const double k[4] = {cubic_far(t + 1), cubic_near(t), cubic_near(1 - t), cubic_far(2 - t)};
  int n = 0;
  for (int j = 0; j < 4; j++) {
    int64_t i = (int64_t)fi - 1 + j;
    i = i < 0 ? 0 : i > n_in - 1 ? n_in - 1 : i;
    if (n > 0 && idx[n - 1] == i) {
      wt[n - 1] += k[j];
    } else {
      idx[n] = i;
      wt[n++] = k[j];
    }
  }
  return n;
}

void rank_image_bicubic(const float *in, int64_t channels, int64_t h, int64_t w, float *out,
                        int64_t oh, int64_t ow) {
  double *rows = sp_xmalloc((size_t)(oh * w) * sizeof *rows); /* (oh, w) of one channel */
  int64_t idx[4];
  double wt[4];
  for (int64_t c = 0; c < channels; c++) {
    const float *x = in + c * h * w;
    for (int64_t o = 0; o < oh; o++) {
      const int n = cubic_taps(h, oh, o, idx, wt);
      for (int64_t j = 0; j < w; j++) {
        double acc = 0.0;
        for (int k = 0; k < n; k++) acc += wt[k] * (double)x[idx[k] * w + j];
        rows[o * w + j] = acc;
      }
    }
    for (int64_t o = 0; o < ow; o++) {
      const int n = cubic_taps(w, ow, o, idx, wt);
      for (int64_t r = 0; r < oh; r++) {
        double acc = 0.0;
        for (int k = 0; k < n; k++) acc += rows[r * w + idx[k]] * wt[k];
        out[(c * oh + r) * ow + o] = (float)acc;
      }
    }
  }
  free(rows);
}

/* ---- TI2V-5B ------------------------------------------------------------------- */

int rank_image_ti2v_size(const char *what, int64_t w, int64_t h, int64_t max_area, int64_t *ow,
                         int64_t *oh) {
  const double dw = 32.0, dh = 32.0, A = (double)max_area;
  const double ratio = (double)w / (double)h;
  const double fw = sqrt(A * ratio), fh = A / fw;
  const int64_t ow1 = (int64_t)(floor(fw / dw) * dw);
  const int64_t oh1 = ow1 >= 32 ? (int64_t)(floor(A / (double)ow1 / dh) * dh) : 0;
  const int64_t oh2 = (int64_t)(floor(fh / dh) * dh);
  const int64_t ow2 = oh2 >= 32 ? (int64_t)(floor(A / (double)oh2 / dw) * dw) : 0;
  if (ow1 < 32 || oh1 < 32 || oh2 < 32 || ow2 < 32) {
    sp_log_error("%s: a %lldx%lld image within --max-area %lld leaves no 32x32 block for the "
                 "TI2V size rule (a larger --max-area, or a less elongated image)",
                 what, (long long)h, (long long)w, (long long)max_area);
    return SP_ERR_INPUT;
  }
  const double r1 = (double)ow1 / (double)oh1, r2 = (double)ow2 / (double)oh2;
  const double d1 = fmax(ratio / r1, r1 / ratio), d2 = fmax(ratio / r2, r2 / ratio);
  *ow = d1 < d2 ? ow1 : ow2;
  *oh = d1 < d2 ? oh1 : oh2;
  return SP_OK;
}

#define PIL_PRECISION_BITS (32 - 8 - 2)

static double pil_sinc(double x) {
  if (x == 0.0) return 1.0;
  x = x * M_PI;
  return sin(x) / x;
}

static double pil_lanczos(double x) {
  return -3.0 <= x && x < 3.0 ? pil_sinc(x) * pil_sinc(x / 3) : 0.0;
}

/* Pillow's precompute_coeffs and normalize_coeffs_8bpc for LANCZOS along
 * an axis of n_in -> n_out: output o reads ksize taps from bounds[2 o]
 * (bounds[2 o + 1] of them), weights k[o ksize ..] in 22-bit fixed point.
 * Returns ksize, or -1 out of memory. */
static int pil_coeffs(int64_t n_in, int64_t n_out, int64_t **bounds, int32_t **kk) {
  const double scale = (double)n_in / (double)n_out;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = 3.0 * filterscale, ss = 1.0 / filterscale;
  const int ksize = (int)ceil(support) * 2 + 1;
  double *pre = malloc((size_t)(n_out * ksize) * sizeof *pre);
  *bounds = malloc((size_t)(2 * n_out) * sizeof **bounds);
  *kk = malloc((size_t)(n_out * ksize) * sizeof **kk);
  if (!pre || !*bounds || !*kk) {
    free(pre);
    free(*bounds);
    free(*kk);
    return -1;
  }
  for (int64_t xx = 0; xx < n_out; xx++) {
    const double center = ((double)xx + 0.5) * scale;
    int64_t xmin = (int64_t)(center - support + 0.5); /* C casts truncate */
    if (xmin < 0) xmin = 0;
    int64_t xmax = (int64_t)(center + support + 0.5);
    if (xmax > n_in) xmax = n_in;
    xmax -= xmin;
    double *k = pre + xx * ksize, ww = 0.0;
    for (int64_t x = 0; x < xmax; x++) {
      k[x] = pil_lanczos(((double)(x + xmin) - center + 0.5) * ss);
      ww += k[x];
    }
    for (int64_t x = 0; x < xmax; x++)
      if (ww != 0.0) k[x] /= ww;
    for (int64_t x = xmax; x < ksize; x++) k[x] = 0.0;
    (*bounds)[2 * xx] = xmin;
    (*bounds)[2 * xx + 1] = xmax;
  }
  for (int64_t i = 0; i < n_out * ksize; i++)
    (*kk)[i] = pre[i] < 0 ? (int32_t)(-0.5 + pre[i] * (1 << PIL_PRECISION_BITS))
                          : (int32_t)(0.5 + pre[i] * (1 << PIL_PRECISION_BITS));
  free(pre);
  return ksize;
}

static uint8_t pil_clip8(int32_t in) {
  if (in >= (1 << PIL_PRECISION_BITS << 8)) return 255;
  if (in <= 0) return 0;
  return (uint8_t)(in >> PIL_PRECISION_BITS);
}

/* One 8-bit pass of RGB src (h, w) into dst: along the columns (horizontal,
 * to (h, n_out)) or the rows (vertical, to (n_out, w)). */
static int pil_pass(const uint8_t *src, int64_t h, int64_t w, int horizontal, int64_t n_out,
                    uint8_t *dst) {
  int64_t *bounds = NULL;
  int32_t *kk = NULL;
  const int ksize = pil_coeffs(horizontal ? w : h, n_out, &bounds, &kk);
  if (ksize < 0) return SP_ERR_RUNTIME;
  const int64_t ow = horizontal ? n_out : w, oh = horizontal ? h : n_out;
  for (int64_t y = 0; y < oh; y++)
    for (int64_t x = 0; x < ow; x++) {
      const int64_t o = horizontal ? x : y, xmin = bounds[2 * o], n = bounds[2 * o + 1];
      const int32_t *k = kk + o * ksize;
      for (int ch = 0; ch < 3; ch++) {
        int32_t ss0 = 1 << (PIL_PRECISION_BITS - 1);
        for (int64_t t = 0; t < n; t++) {
          const int64_t sx = horizontal ? xmin + t : x, sy = horizontal ? y : xmin + t;
          ss0 += (int32_t)src[(sy * w + sx) * 3 + ch] * k[t];
        }
        dst[(y * ow + x) * 3 + ch] = pil_clip8(ss0);
      }
    }
  free(bounds);
  free(kk);
  return SP_OK;
}

int rank_image_lanczos(const rank_image *in, int64_t ow, int64_t oh, rank_image *out) {
  memset(out, 0, sizeof *out);
  uint8_t *cur = malloc((size_t)(in->w * in->h * 3));
  if (!cur) goto oom;
  memcpy(cur, in->rgb, (size_t)(in->w * in->h * 3));
  int64_t w = in->w, h = in->h;
  for (int horizontal = 1; horizontal >= 0; horizontal--) {
    if (horizontal ? ow == w : oh == h) continue;
    const int64_t nw = horizontal ? ow : w, nh = horizontal ? h : oh;
    uint8_t *next = malloc((size_t)(nw * nh * 3));
    if (!next || pil_pass(cur, h, w, horizontal, horizontal ? ow : oh, next) != SP_OK) {
      free(next);
      free(cur);
      goto oom;
    }
    free(cur);
    cur = next;
    w = nw;
    h = nh;
  }
  out->w = w;
  out->h = h;
  out->rgb = cur;
  return SP_OK;
oom:
  sp_log_error("image: out of memory resizing %lldx%lld to %lldx%lld", (long long)in->w,
               (long long)in->h, (long long)ow, (long long)oh);
  return SP_ERR_RUNTIME;
}

int rank_image_ti2v_prepare(const char *what, const rank_image *in, int64_t max_area,
                            rank_image *out) {
  memset(out, 0, sizeof *out);
  int64_t ow, oh;
  int rc = rank_image_ti2v_size(what, in->w, in->h, max_area, &ow, &oh);
  if (rc != SP_OK) return rc;
  return rank_image_ti2v_cover(what, in, ow, oh, out);
}

int rank_image_ti2v_cover(const char *what, const rank_image *in, int64_t ow, int64_t oh,
                          rank_image *out) {
  memset(out, 0, sizeof *out);
  int rc;
  const double scale = fmax((double)ow / (double)in->w, (double)oh / (double)in->h);
  /* Python's round: to the nearest, halves to even (the default mode) */
  const int64_t rw = (int64_t)nearbyint((double)in->w * scale);
  const int64_t rh = (int64_t)nearbyint((double)in->h * scale);
  if (rw < ow || rh < oh) {
    sp_log_error("internal: %s: the TI2V resize to %lldx%lld does not cover %lldx%lld", what,
                 (long long)rw, (long long)rh, (long long)ow, (long long)oh);
    return SP_ERR_RUNTIME;
  }
  rank_image r;
  if ((rc = rank_image_lanczos(in, rw, rh, &r)) != SP_OK) return rc;
  const int64_t x1 = (rw - ow) / 2, y1 = (rh - oh) / 2;
  out->rgb = malloc((size_t)(ow * oh * 3));
  if (!out->rgb) {
    rank_image_free(&r);
    sp_log_error("%s: out of memory for a %lldx%lld image", what, (long long)ow, (long long)oh);
    return SP_ERR_RUNTIME;
  }
  for (int64_t y = 0; y < oh; y++)
    memcpy(out->rgb + y * ow * 3, r.rgb + ((y + y1) * rw + x1) * 3, (size_t)(ow * 3));
  out->w = ow;
  out->h = oh;
  rank_image_free(&r);
  return SP_OK;
}
