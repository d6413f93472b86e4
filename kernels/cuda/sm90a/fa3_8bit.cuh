/* The context of the 8-bit attentions on the Hopper kernel (kern_attn.h:
 * kern_attn_fa3_int8, which fa3-int8 and fa3-fp8 share): the quantised
 * copies and their scales, grown when a larger shape comes. fa3_int8.cu
 * makes and frees it and fills the int8 Q and K; fa3_fp8.cu fills V^T. */
#ifndef KERN_FA3_8BIT_CUH
#define KERN_FA3_8BIT_CUH

#include <stddef.h>
#include <stdint.h>

#define FA3_8BIT_NBUF 9

struct kern_attn_fa3_int8 {
  int8_t *q8, *k8;          /* (Lq, heads, hd), (Lk, heads, hd) */
  float *qscale, *kscale;   /* (heads, q tiles), (heads, k tiles) */
  float *part, *kmean;      /* (chunks, heads, hd), (heads, hd) */
  uint8_t *vt;              /* fa3-fp8: V^T (heads, hd, Lk rounded up to 16) e4m3 */
  float *vpart;             /* fa3-fp8: (chunks, heads, hd) partial amax of |v| */
  float *vscale;            /* fa3-fp8: (2, heads, hd): the scales amax / 448, then amax */
  size_t cap[FA3_8BIT_NBUF]; /* bytes of each buffer above, in that order */
};

/* *buf holds at least `bytes` (grown with cudaMalloc, contents dropped). */
void fa3_grow(void **buf, size_t *cap, size_t bytes);

#endif
