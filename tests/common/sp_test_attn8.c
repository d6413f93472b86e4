/* The fa3-int8 scheme on the CPU (sp_test_attn8.h). */
#include "sp_test_attn8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kern_dtype.h"

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) {
    fprintf(stderr, "FAIL: out of host memory (int8 emulation, %zu bytes)\n", n);
    exit(1);
  }
  return p;
}

/* max |x - mean| over the tile rows [r0, r0 + R) of head h (mean NULL: 0). */
static float tile_amax(const float *x, int64_t L, int64_t heads, int64_t hd, int64_t h, int64_t r0,
                       int64_t R, const float *mean) {
  float amax = 0.f;
  for (int64_t r = r0; r < r0 + R && r < L; r++)
    for (int64_t d = 0; d < hd; d++) {
      const float a = fabsf(x[(r * heads + h) * hd + d] - (mean ? mean[h * hd + d] : 0.f));
      amax = a > amax ? a : amax;
    }
  return amax;
}

/* x at 127 / amax, rounded to nearest even, clamped to +-127. */
static int8_t quant(float x, float amax) {
  if (!(amax > 0.f)) return 0;
  const long v = lrintf(x * (127.f / amax));
  return (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
}

void sp_test_attn_int8(const float *q, const float *k, const float *v, int64_t Lq, int64_t Lk,
                       int64_t heads, int64_t hd, double scale, int bm, int bn,
                       const int64_t *rows, int64_t nrows, float *out) {
  const int64_t nkt = (Lk + bn - 1) / bn, row = heads * hd;
  float *mean = xmalloc((size_t)row * sizeof *mean);
  float *ksc = xmalloc((size_t)(heads * nkt) * sizeof *ksc);
  int8_t *k8 = xmalloc((size_t)(Lk * row));
  for (int64_t c = 0; c < row; c++) {
    double acc = 0;
    for (int64_t t = 0; t < Lk; t++) acc += k[t * row + c];
    mean[c] = (float)(acc / (double)Lk);
  }
  for (int64_t h = 0; h < heads; h++)
    for (int64_t j = 0; j < nkt; j++) {
      const float amax = tile_amax(k, Lk, heads, hd, h, j * bn, bn, mean);
      ksc[h * nkt + j] = amax / 127.f;
      for (int64_t t = j * bn; t < (j + 1) * bn && t < Lk; t++)
        for (int64_t d = 0; d < hd; d++)
          k8[t * row + h * hd + d] = quant(k[t * row + h * hd + d] - mean[h * hd + d], amax);
    }
#pragma omp parallel for schedule(dynamic)
  for (int64_t ih = 0; ih < nrows * heads; ih++) {
    const int64_t i = ih / heads, h = ih % heads, r = rows[i], qt = r / bm;
    int8_t *q8 = xmalloc((size_t)hd);
    double *p = xmalloc((size_t)Lk * sizeof *p);
    float *pb = xmalloc((size_t)Lk * sizeof *pb);
    const float qamax = tile_amax(q, Lq, heads, hd, h, qt * bm, bm, NULL), sq = qamax / 127.f;
    for (int64_t d = 0; d < hd; d++) q8[d] = quant(q[r * row + h * hd + d], qamax);
    double m = -INFINITY, l = 0;
    for (int64_t t = 0; t < Lk; t++) {
      long dot = 0;
      for (int64_t d = 0; d < hd; d++) dot += (long)q8[d] * k8[t * row + h * hd + d];
      p[t] = (double)dot * sq * ksc[h * nkt + t / bn] * scale;
      if (p[t] > m) m = p[t];
    }
    for (int64_t t = 0; t < Lk; t++) {
      l += p[t] = exp(p[t] - m);
      pb[t] = kern_bf16_to_f32(kern_f32_to_bf16((float)p[t]));
    }
    for (int64_t d = 0; d < hd; d++) {
      double o = 0;
      for (int64_t t = 0; t < Lk; t++) o += (double)pb[t] * v[t * row + h * hd + d];
      out[(i * heads + h) * hd + d] = kern_bf16_to_f32(kern_f32_to_bf16((float)(o / l)));
    }
    free(q8), free(p), free(pb);
  }
  free(mean), free(ksc), free(k8);
}
