/* The context of the 8-bit attentions on the Hopper kernel (kern_attn.h:
 * kern_attn_fa3_int8, which fa3-int8 and fa3-fp8 share): the quantised
 * copies and their scales, grown when a larger shape comes. fa3_int8.cu
 * makes and frees it and fills the int8 Q and K; fa3_fp8.cu fills V^T. */
#ifndef KERN_FA3_8BIT_CUH
#define KERN_FA3_8BIT_CUH

#include <cuda_bf16.h>
#include <stddef.h>
#include <stdint.h>

#define FA3_8BIT_NBUF 8

struct kern_attn_fa3_int8 {
  int8_t *q8, *k8;          /* (Lq, heads, hd), (Lk, heads, hd) */
  float *qscale, *kscale;   /* (heads, q tiles), (heads, k tiles) */
  float *part;              /* (chunks, heads, hd): fa3_col_partial's, K's, then V's */
  float *kmean;             /* (heads, hd) */
  uint8_t *vt;              /* fa3-fp8: V^T (heads, hd, Lk rounded up to 16) e4m3 */
  float *vscale;            /* fa3-fp8: (2, heads, hd): the scales amax / 448, then amax */
  size_t cap[FA3_8BIT_NBUF]; /* bytes of each buffer above, in that order */
};

/* *buf holds at least `bytes` (grown with cudaMalloc, contents dropped). */
void fa3_grow(void **buf, size_t *cap, size_t bytes);

/* Tokens per partial reduction of fa3_col_partial. */
#define FA3_COL_CHUNK 256

/* The chunks of fa3_col_partial over Lk tokens. */
static inline int fa3_col_chunks(int64_t Lk) {
  return (int)((Lk + FA3_COL_CHUNK - 1) / FA3_COL_CHUNK);
}

/* part (nchunks, heads, hd) = a reduction of each (head, channel) column of
 * x (Lk, heads, hd) over tokens [c CHUNK, (c+1) CHUNK), in token order: the
 * sum of x (K's mean, fa3_int8.cu), or with ABS_MAX the max of |x| (V's
 * amax, fa3_fp8.cu). Block (chunk, head), thread d: grid (fa3_col_chunks,
 * heads), hd threads. */
template <bool ABS_MAX>
__global__ void fa3_col_partial(const __nv_bfloat16 *__restrict__ x, int Lk, int heads, int hd,
                                float *__restrict__ part) {
  const int c = blockIdx.x, h = blockIdx.y, d = threadIdx.x;
  const int t0 = c * FA3_COL_CHUNK, t1 = min(Lk, t0 + FA3_COL_CHUNK);
  float acc = 0.f;
  for (int t = t0; t < t1; t++) {
    const float v = __bfloat162float(x[((int64_t)t * heads + h) * hd + d]);
    acc = ABS_MAX ? fmaxf(acc, fabsf(v)) : acc + v;
  }
  part[((int64_t)c * heads + h) * hd + d] = acc;
}

#endif
