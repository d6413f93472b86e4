/* CPU exact softmax attention, any Lq and Lk: scale 1/sqrt(hd) without a
 * bias (the DiT's), or a given scale plus a relative-position bias (T5's).
 *
 * One (query row, head) is one unit of work, owned by one thread, so the
 * result cannot depend on the thread count. Keys are visited in tiles of
 * ATT_TILE in increasing order; the tile's scores live on the stack and the
 * softmax is the online form: running max m and running sum l, and the
 * output row itself (the caller's out) is the accumulator, rescaled by
 * exp(m_old - m_new) whenever a tile raises the max. That needs no scratch
 * from the caller and is exact (not an approximation of softmax): the
 * final division by l gives sum_j exp(s_j - m) v_j / sum_j exp(s_j - m).
 *
 * out must not alias q, k or v: q is reread for every tile. */
#include "kern_cpu.h"

#include <math.h>
#include <string.h>

enum { ATT_TILE = 64 }; /* scores per tile, 256 bytes of stack */

/* q . k in a fixed pattern: 8 interleaved partial sums (vectorisable),
 * combined pairwise, then the tail hd % 8 in order. q, k (hd). */
static float att_dot(const float *q, const float *k, int64_t hd) {
  float a[8] = {0};
  int64_t d = 0;
  for (; d + 8 <= hd; d += 8) {
#pragma GCC unroll 8
    for (int l = 0; l < 8; l++) a[l] += q[d + l] * k[d + l];
  }
  float s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  for (; d < hd; d++) s += q[d] * k[d];
  return s;
}

/* o[d] += sum_j p[j] * v[j, d], j in increasing order for every d.
 * o (hd); p (nt); v (nt rows, stride ld, hd used). The d loop runs in
 * chunks of 8 held in a local array (vectorised, and o is loaded and
 * stored once per tile); every element still sums over j in order, so the
 * chunking changes no bits. */
static void att_accumulate(float *o, const float *p, const float *v, int64_t ld, int64_t nt,
                           int64_t hd) {
  int64_t d = 0;
  for (; d + 8 <= hd; d += 8) {
    float a[8];
    memcpy(a, o + d, sizeof a);
    for (int64_t j = 0; j < nt; j++) {
      const float *vj = v + j * ld + d;
      float pj = p[j];
#pragma GCC unroll 8
      for (int l = 0; l < 8; l++) a[l] += pj * vj[l];
    }
    memcpy(o + d, a, sizeof a);
  }
  for (; d < hd; d++) {
    float a = o[d];
    for (int64_t j = 0; j < nt; j++) a += p[j] * v[j * ld + d];
    o[d] = a;
  }
}

/* The positional bias of kern_cpu_attention_relbias, or none. */
typedef struct att_bias {
  const float *table;    /* (n_buckets, heads), or NULL: no bias */
  const int32_t *bucket; /* (Lq + Lk - 1) bucket of key j for query i at j - i + Lq - 1 */
} att_bias;

/* Both entry points: scores q.k * scale (+ bias), keys 0 .. Lk - 1. The
 * bias is added after the scaling, so a NULL table leaves the arithmetic of
 * the unbiased attention unchanged. */
/* Flat list: kern_cpu_attention's pointers and shapes (an SDPA call's) plus scale and bias. */
static void att_run(const float *q, const float *k, const float *v, float *out, int64_t Lq,
                    int64_t Lk, int64_t heads, int64_t hd, float scale, att_bias b) {
  if (Lq <= 0 || heads <= 0 || hd <= 0) return;
  const int64_t ld = heads * hd; /* row stride of q, k, v, out */
  const int64_t units = Lq * heads;

#pragma omp parallel for schedule(static) if (units > 1 && units * Lk * hd > ((int64_t)1 << 16))
  for (int64_t u = 0; u < units; u++) {
    int64_t i = u / heads, h = u % heads;
    const float *qi = q + i * ld + h * hd; /* (hd) */
    float *o = out + i * ld + h * hd;      /* (hd), the accumulator */
    float s[ATT_TILE];                     /* scores of one key tile */
    float m = -INFINITY;                   /* running max of the scores */
    double l = 0.0;                        /* running sum of exp(s - m) */

    for (int64_t d = 0; d < hd; d++) o[d] = 0.0f;
    for (int64_t j0 = 0; j0 < Lk; j0 += ATT_TILE) {
      int64_t nt = Lk - j0 < ATT_TILE ? Lk - j0 : ATT_TILE;
      float tmax = -INFINITY;
      for (int64_t j = 0; j < nt; j++) {
        s[j] = att_dot(qi, k + (j0 + j) * ld + h * hd, hd) * scale;
        if (b.table) s[j] += b.table[(int64_t)b.bucket[j0 + j - i + Lq - 1] * heads + h];
        if (s[j] > tmax) tmax = s[j];
      }
      if (tmax > m) {
        /* exp(-inf) = 0 on the first tile: the zero accumulator stays 0. */
        float corr = expf(m - tmax);
        for (int64_t d = 0; d < hd; d++) o[d] *= corr;
        l *= (double)corr;
        m = tmax;
      }
      for (int64_t j = 0; j < nt; j++) {
        s[j] = expf(s[j] - m); /* the score becomes its softmax weight */
        l += (double)s[j];
      }
      att_accumulate(o, s, v + j0 * ld + h * hd, ld, nt, hd);
    }
    /* Lk = 0: softmax over nothing; define the output as zeros. */
    float inv = l > 0.0 ? (float)(1.0 / l) : 0.0f;
    for (int64_t d = 0; d < hd; d++) o[d] *= inv;
  }
}

void kern_cpu_attention(const float *q, const float *k, const float *v, float *out, int64_t Lq,
                        int64_t Lk, int64_t heads, int64_t hd) {
  att_run(q, k, v, out, Lq, Lk, heads, hd, (float)(1.0 / sqrt((double)hd)),
          (att_bias){NULL, NULL});
}

/* Flat list: an attention call's pointers and shapes (kern_cpu_attention's) plus bias and scale. */
void kern_cpu_attention_relbias(const float *q, const float *k, const float *v,
                                const float *table, const int32_t *bucket, float scale, float *out,
                                int64_t Lq, int64_t Lk, int64_t heads, int64_t hd) {
  att_run(q, k, v, out, Lq, Lk, heads, hd, scale, (att_bias){table, bucket});
}
