/* The fa3-int8 and fa3-fp8 schemes on the CPU (sp_test_attn8.h). */
#include "sp_test_attn8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kern_attn_backend.h"
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

/* K minus its mean (per head and channel, summed in double) quantised per
 * tile of bn keys and head: k8 (Lk, heads, hd), ksc (heads, nkt). */
static void quant_k(const float *k, int64_t Lk, int64_t heads, int64_t hd, int bn, int8_t *k8,
                    float *ksc) {
  const int64_t nkt = (Lk + bn - 1) / bn, row = heads * hd;
  float *mean = xmalloc((size_t)row * sizeof *mean);
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
  free(mean);
}

/* K quantised (quant_k): k8 (Lk, heads, hd), ksc (heads, nkt). */
typedef struct k_int8 {
  int8_t *k8;
  float *ksc;
} k_int8;

/* The integer scores of query row r, head h against every key, times the
 * two tiles' scales (Q's tile of bm rows) and `mul`, into x (Lk). */
static void row_scores(const sp_test_attn8_in *a, const k_int8 *kq, int64_t r, int64_t h,
                       double mul, double *x) {
  const float *q = a->q;
  const int8_t *k8 = kq->k8;
  const float *ksc = kq->ksc;
  const int64_t Lq = a->Lq, Lk = a->Lk, heads = a->heads, hd = a->hd;
  const int bm = a->bm, bn = a->bn;
  const int64_t nkt = (Lk + bn - 1) / bn, row = heads * hd;
  int8_t *q8 = xmalloc((size_t)hd);
  const float qamax = tile_amax(q, Lq, heads, hd, h, r / bm * bm, bm, NULL), sq = qamax / 127.f;
  for (int64_t d = 0; d < hd; d++) q8[d] = quant(q[r * row + h * hd + d], qamax);
  for (int64_t t = 0; t < Lk; t++) {
    long dot = 0;
    for (int64_t d = 0; d < hd; d++) dot += (long)q8[d] * k8[t * row + h * hd + d];
    x[t] = (double)dot * sq * ksc[h * nkt + t / bn] * mul;
  }
  free(q8);
}

/* Q K's int8 form of a: K quantised per tile (free with k_int8_free). */
static k_int8 k_int8_make(const sp_test_attn8_in *a) {
  const int64_t nkt = (a->Lk + a->bn - 1) / a->bn;
  k_int8 kq = {xmalloc((size_t)(a->Lk * a->heads * a->hd)),
               xmalloc((size_t)(a->heads * nkt) * sizeof(float))};
  quant_k(a->k, a->Lk, a->heads, a->hd, a->bn, kq.k8, kq.ksc);
  return kq;
}

static void k_int8_free(k_int8 *kq) { free(kq->k8), free(kq->ksc); }

void sp_test_attn_int8(const sp_test_attn8_in *a, float *out) {
  const float *v = a->v;
  const int64_t Lk = a->Lk, heads = a->heads, hd = a->hd, nrows = a->nrows, row = heads * hd;
  k_int8 kq = k_int8_make(a);
#pragma omp parallel for schedule(dynamic)
  for (int64_t ih = 0; ih < nrows * heads; ih++) {
    const int64_t i = ih / heads, h = ih % heads;
    double *p = xmalloc((size_t)Lk * sizeof *p);
    float *pb = xmalloc((size_t)Lk * sizeof *pb);
    row_scores(a, &kq, a->rows[i], h, a->scale, p);
    double m = -INFINITY, l = 0;
    for (int64_t t = 0; t < Lk; t++)
      if (p[t] > m) m = p[t];
    for (int64_t t = 0; t < Lk; t++) {
      l += p[t] = exp(p[t] - m);
      pb[t] = kern_bf16_to_f32(kern_f32_to_bf16((float)p[t]));
    }
    for (int64_t d = 0; d < hd; d++) {
      double o = 0;
      for (int64_t t = 0; t < Lk; t++) o += (double)pb[t] * v[t * row + h * hd + d];
      out[(i * heads + h) * hd + d] = kern_bf16_to_f32(kern_f32_to_bf16((float)(o / l)));
    }
    free(p), free(pb);
  }
  k_int8_free(&kq);
}

void sp_test_attn_fp8(const sp_test_attn8_in *a, float *out) {
  const float *v = a->v;
  const int64_t Lk = a->Lk, heads = a->heads, hd = a->hd, nrows = a->nrows, row = heads * hd;
  const int bn = a->bn;
  const int64_t nkt = (Lk + bn - 1) / bn;
  k_int8 kq = k_int8_make(a);
  float *vc = xmalloc((size_t)(Lk * row) * sizeof *vc), *sv = xmalloc((size_t)row * sizeof *sv);
  /* V per head and channel: amax over the keys, codes e4m3(v 448 / amax) */
  for (int64_t c = 0; c < row; c++) {
    float amax = 0.f;
    for (int64_t t = 0; t < Lk; t++) amax = fmaxf(amax, fabsf(v[t * row + c]));
    const float inv = amax > 0.f ? 448.f / amax : 0.f;
    sv[c] = amax > 0.f ? amax / 448.f : 1.f;
    for (int64_t t = 0; t < Lk; t++)
      vc[t * row + c] = kern_fp8_e4m3_to_f32(kern_f32_to_fp8_e4m3(v[t * row + c] * inv));
  }
  const double l2e = 1.4426950408889634;
#pragma omp parallel for schedule(dynamic)
  for (int64_t ih = 0; ih < nrows * heads; ih++) {
    const int64_t i = ih / heads, h = ih % heads;
    double *x = xmalloc((size_t)Lk * sizeof *x), *o = xmalloc((size_t)hd * sizeof *o);
    row_scores(a, &kq, a->rows[i], h, a->scale * l2e, x);
    for (int64_t d = 0; d < hd; d++) o[d] = 0;
    double m = -INFINITY, l = 0;
    for (int64_t j = nkt - 1; j >= 0; j--) { /* the kernel's order: the last tile first */
      const int64_t t0 = j * bn, t1 = (j + 1) * bn < Lk ? (j + 1) * bn : Lk;
      double mt = m;
      for (int64_t t = t0; t < t1; t++) mt = x[t] > mt ? x[t] : mt;
      const double corr = m == -INFINITY ? 0 : exp2(m - mt);
      m = mt;
      l *= corr;
      for (int64_t d = 0; d < hd; d++) o[d] *= corr;
      for (int64_t t = t0; t < t1; t++) {
        const double pt = exp2(x[t] - m + KERN_ATTN_FP8_PLOG2);
        const double p8 = kern_fp8_e4m3_to_f32(kern_f32_to_fp8_e4m3((float)pt));
        l += a->l_e4m3 ? p8 : pt;
        for (int64_t d = 0; d < hd; d++) o[d] += p8 * vc[t * row + h * hd + d];
      }
    }
    for (int64_t d = 0; d < hd; d++)
      out[(i * heads + h) * hd + d] =
          kern_bf16_to_f32(kern_f32_to_bf16((float)(o[d] / l * sv[h * hd + d])));
    free(x), free(o);
  }
  k_int8_free(&kq);
  free(vc), free(sv);
}
