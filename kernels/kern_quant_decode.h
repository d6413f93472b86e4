/* The block layouts of the quantized weight formats (kern_quant.h) and their
 * decoders, shared by the CPU (cpu_quant.c) and the GPU (cuda/cuda_quant.cu)
 * so both read the same bytes the same way: the one place these layouts are
 * written down. Internal to kernels/: callers use kern_quant.h.
 *
 * Every format stores a weight (rows, cols) row by row; a row is cols /
 * block blocks of block_bytes bytes each, little-endian. The ggml layouts
 * (GGUF's tensor types; element e of a block, its sub-block and the bits it
 * is made of):
 *
 * Q8_0 (32 values, 34 bytes): f16 d, int8 q[32]. x = q * d.
 * Q4_0 (32, 18): f16 d, u8 qs[16]; element e < 16 is the low nibble of
 *   qs[e], e >= 16 the high nibble of qs[e - 16]; x = d * (nibble - 8).
 * Q4_1 (32, 20): f16 d, f16 m, qs[16] as Q4_0; x = d * nibble + m.
 * Q5_0 (32, 22): f16 d, u32 qh, qs[16]: the low 4 bits as Q4_0, bit 4 is
 *   bit e of qh; x = d * (q - 16).
 * Q5_1 (32, 24): f16 d, f16 m, u32 qh, qs[16]; x = d * q + m.
 * Q2_K (256, 84): u8 scales[16], u8 qs[64], f16 d, f16 dmin. Sub-block
 *   e / 16 has scale nibble lo = scales[] & 15 and min nibble hi = scales[]
 *   >> 4; q = bits 2s..2s+1 of qs[32 h + l] with h = e / 128, s = (e % 128)
 *   / 32, l = e % 32; x = (d * lo) * q - dmin * hi.
 * Q3_K (256, 110): u8 hmask[32], u8 qs[64], u8 scales[12], f16 d. The 16
 *   six-bit scales: j < 8 takes the low nibble of scales[j], j >= 8 the high
 *   nibble of scales[j - 8], plus bits 2(j / 4) and up of scales[8 + j % 4]
 *   as bits 4-5; minus 32. q = the 2-bit value of Q2_K's qs rule, minus 4
 *   when bit e / 32 of hmask[e % 32] is clear; x = (d * scale) * q.
 * Q4_K (256, 144): f16 d, f16 dmin, u8 scales[12], u8 qs[128]. Eight
 *   sub-blocks of 32 with six-bit scale and min: j < 4: sc = scales[j] & 63,
 *   m = scales[j + 4] & 63; j >= 4: sc = (scales[j + 4] & 15) | (scales[j -
 *   4] >> 6) << 4, m = (scales[j + 4] >> 4) | (scales[j] >> 6) << 4. q is
 *   the nibble (e / 32) % 2 (low first) of qs[32 (e / 64) + e % 32];
 *   x = (d * sc) * q - dmin * m.
 * Q5_K (256, 176): f16 d, f16 dmin, scales[12] as Q4_K, u8 qh[32], qs[128]
 *   as Q4_K; bit 4 of q is bit e / 32 of qh[e % 32].
 * Q6_K (256, 210): u8 ql[128], u8 qh[64], int8 scales[16], f16 d. With h =
 *   e / 128, r = e % 128: the low 4 bits are nibble r / 64 of ql[64 h + r %
 *   64], bits 4-5 are bits 2(r / 32).. of qh[32 h + r % 32]; q - 32;
 *   x = (d * scales[e / 16]) * (q - 32).
 * F32, F16, BF16: one value per block.
 * Ours: E4M3_ROW (one e4m3 byte per value, kern_dtype.h) and I8_ROW (one
 * int8 per value), each with a float32 scale per row beside the codes:
 * x = code * scale[row] (kern_quant.h).
 *
 * Arithmetic: every product above is exact in fp32 (an f16 significand of 11
 * bits times integers of at most 8 and 6 bits), so a value is rounded once,
 * at the final + m or - dmin * m (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K) or not at
 * all; a fused multiply-add gives the same bits, which is what lets the GPU
 * match the CPU bit for bit. This is also gguf-py's numpy order. */
#ifndef KERN_QUANT_DECODE_H
#define KERN_QUANT_DECODE_H

#include <stdint.h>

#include "kern_dtype.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

/* Format codes (kern_quant.h's kern_qfmt, the same numbers). */
#define KQ_F32 0
#define KQ_F16 1
#define KQ_BF16 2
#define KQ_E4M3_ROW 3
#define KQ_I8_ROW 4
#define KQ_Q8_0 5
#define KQ_Q6_K 6
#define KQ_Q5_K 7
#define KQ_Q5_0 8
#define KQ_Q5_1 9
#define KQ_Q4_K 10
#define KQ_Q4_0 11
#define KQ_Q4_1 12
#define KQ_Q3_K 13
#define KQ_Q2_K 14
#define KQ_COUNT 15

/* Values per block and bytes per block of each format. */
#define KQ_QK 32    /* ggml's small blocks */
#define KQ_QK_K 256 /* ggml's k-quant super-blocks */
#define KQ_Q8_0_BYTES 34
#define KQ_Q4_0_BYTES 18
#define KQ_Q4_1_BYTES 20
#define KQ_Q5_0_BYTES 22
#define KQ_Q5_1_BYTES 24
#define KQ_Q2_K_BYTES 84
#define KQ_Q3_K_BYTES 110
#define KQ_Q4_K_BYTES 144
#define KQ_Q5_K_BYTES 176
#define KQ_Q6_K_BYTES 210

/* Values a decoder call yields: every block size is a multiple of it. */
#define KQ_GROUP 8

static inline KERN_HD float kq_f16(const uint8_t *p) {
  const uint16_t h = (uint16_t)(p[0] | (p[1] << 8));
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  return kern_f16_to_f32(h);
#endif
}

static inline KERN_HD float kq_bf16(const uint8_t *p) {
  const uint32_t u = (uint32_t)(p[0] | (p[1] << 8)) << 16;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

static inline KERN_HD float kq_f32(const uint8_t *p) {
  const uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

static inline KERN_HD uint32_t kq_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline KERN_HD float kq_e4m3(uint8_t b) {
#if defined(__CUDA_ARCH__)
  if ((b & 0x7f) == 0x7f) /* the NaN code: kern_fp8_e4m3_to_f32's NaN, sign kept */
    return __uint_as_float((b & 0x80) ? 0xffc00000u : 0x7fc00000u);
  __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)b, __NV_E4M3);
  return __half2float(__half(h));
#else
  return kern_fp8_e4m3_to_f32(b);
#endif
}

/* fp32 -> bf16 bits, kern_f32_to_bf16's rule (nearest even, NaN kept a
 * quiet NaN) on either side. */
static inline KERN_HD uint16_t kq_to_bf16(float f) {
#if defined(__CUDA_ARCH__)
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))
    return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
#else
  return kern_f32_to_bf16(f);
#endif
}

/* v times a row's scale s, one rounding; a NaN v is kept as it is (its sign
 * and payload), which x86 does by itself and the GPU, whose arithmetic
 * makes one canonical NaN, does not. */
static inline KERN_HD float kq_scale(float v, float s) { return v != v ? v : v * s; }

/* Six-bit scale and min j (0..7) of a Q4_K / Q5_K block's scales[12]. */
static inline KERN_HD void kq_k4_scale_min(const uint8_t *s, int j, int *sc, int *m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

/* The 2-bit value of element e of a Q2_K / Q3_K block's qs[64]. */
static inline KERN_HD int kq_k2_bits(const uint8_t *qs, int e) {
  return (qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

/* The legacy 32-element block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0):
 * n values from element col of a row at row (col a multiple of KQ_GROUP). */
static inline KERN_HD void kq_decode_q32(int fmt, const uint8_t *row, int64_t col, int n,
                                         float *out) {
  const int bytes = fmt == KQ_Q8_0   ? KQ_Q8_0_BYTES
                    : fmt == KQ_Q4_0 ? KQ_Q4_0_BYTES
                    : fmt == KQ_Q4_1 ? KQ_Q4_1_BYTES
                    : fmt == KQ_Q5_0 ? KQ_Q5_0_BYTES
                                     : KQ_Q5_1_BYTES;
  const uint8_t *b = row + (col / KQ_QK) * bytes;
  const int e0 = (int)(col % KQ_QK);
  const float d = kq_f16(b);
  if (fmt == KQ_Q8_0) {
    for (int i = 0; i < n; i++) out[i] = (float)(int8_t)b[2 + e0 + i] * d;
    return;
  }
  /* _0: d and the codes, centred; _1: d, a min m and the codes. Q5 adds a
   * 32-bit word of fifth bits before the nibbles. */
  const int has_min = fmt == KQ_Q4_1 || fmt == KQ_Q5_1;
  const int five = fmt == KQ_Q5_0 || fmt == KQ_Q5_1;
  const uint8_t *hb = b + (has_min ? 4 : 2);
  const uint32_t qh = five ? kq_u32(hb) : 0u;
  const uint8_t *qs = five ? hb + 4 : hb;
  const int centre = five ? 16 : 8;
  for (int i = 0; i < n; i++) {
    const int e = e0 + i;
    const int q = (e < 16 ? qs[e] & 15 : qs[e - 16] >> 4) | (int)((qh >> e) & 1u) << 4;
    out[i] = has_min ? d * (float)q + kq_f16(b + 2) : d * (float)(q - centre);
  }
}

/* The 256-element K formats (Q2_K to Q6_K), as kq_decode_q32 for them. */
static inline KERN_HD void kq_decode_k(int fmt, const uint8_t *row, int64_t col, int n,
                                       float *out) {
  const int e0 = (int)(col % KQ_QK_K);
  const int64_t blk = col / KQ_QK_K;
  if (fmt == KQ_Q2_K) {
    const uint8_t *b = row + blk * KQ_Q2_K_BYTES;
    const uint8_t sc = b[e0 / 16];
    const float dl = kq_f16(b + 80) * (float)(sc & 15);
    const float ml = kq_f16(b + 82) * (float)(sc >> 4);
    for (int i = 0; i < n; i++) out[i] = dl * (float)kq_k2_bits(b + 16, e0 + i) - ml;
  } else if (fmt == KQ_Q3_K) {
    const uint8_t *b = row + blk * KQ_Q3_K_BYTES;
    const int j = e0 / 16;
    const uint8_t *s = b + 96;
    const int lo = (s[j % 8] >> (4 * (j / 8))) & 15;
    const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    const float dl = kq_f16(b + 108) * (float)((lo | hi << 4) - 32);
    for (int i = 0; i < n; i++) {
      const int e = e0 + i;
      const int q = kq_k2_bits(b + 32, e) - (((b[e % 32] >> (e / 32)) & 1) ? 0 : 4);
      out[i] = dl * (float)q;
    }
  } else if (fmt == KQ_Q4_K || fmt == KQ_Q5_K) {
    const uint8_t *b = row + blk * (fmt == KQ_Q4_K ? KQ_Q4_K_BYTES : KQ_Q5_K_BYTES);
    const int j = e0 / 32;
    int sc, m;
    kq_k4_scale_min(b + 4, j, &sc, &m);
    const float dl = kq_f16(b) * (float)sc, ml = kq_f16(b + 2) * (float)m;
    const uint8_t *qh = b + 16, *qs = b + (fmt == KQ_Q4_K ? 16 : 48);
    for (int i = 0; i < n; i++) {
      const int e = e0 + i;
      int q = (qs[(e / 64) * 32 + e % 32] >> (4 * (j % 2))) & 15;
      if (fmt == KQ_Q5_K) q |= ((qh[e % 32] >> j) & 1) << 4;
      out[i] = dl * (float)q - ml;
    }
  } else { /* KQ_Q6_K */
    const uint8_t *b = row + blk * KQ_Q6_K_BYTES;
    const float dl = kq_f16(b + 208) * (float)(int8_t)b[192 + e0 / 16];
    for (int i = 0; i < n; i++) {
      const int e = e0 + i, h = e / 128, r = e % 128;
      const int lo = (b[64 * h + r % 64] >> (4 * (r / 64))) & 15;
      const int hi = (b[128 + 32 * h + r % 32] >> (2 * (r / 32))) & 3;
      out[i] = dl * (float)((lo | hi << 4) - 32);
    }
  }
}

/* Values col .. col + n - 1 (n <= KQ_GROUP) of a row of format fmt, its
 * bytes at row, as fp32 into out[0..n) before any per-row scale. For the
 * block formats col is a multiple of KQ_GROUP and n = KQ_GROUP (a group
 * never straddles two blocks). */
static inline KERN_HD void kq_decode(int fmt, const uint8_t *row, int64_t col, int n,
                                     float *out) {
  switch (fmt) {
  case KQ_F32:
    for (int i = 0; i < n; i++) out[i] = kq_f32(row + 4 * (col + i));
    return;
  case KQ_F16:
    for (int i = 0; i < n; i++) out[i] = kq_f16(row + 2 * (col + i));
    return;
  case KQ_BF16:
    for (int i = 0; i < n; i++) out[i] = kq_bf16(row + 2 * (col + i));
    return;
  case KQ_E4M3_ROW:
    for (int i = 0; i < n; i++) out[i] = kq_e4m3(row[col + i]);
    return;
  case KQ_I8_ROW:
    for (int i = 0; i < n; i++) out[i] = (float)(int8_t)row[col + i];
    return;
  case KQ_Q8_0:
  case KQ_Q4_0:
  case KQ_Q4_1:
  case KQ_Q5_0:
  case KQ_Q5_1:
    kq_decode_q32(fmt, row, col, n, out);
    return;
  case KQ_Q2_K:
  case KQ_Q3_K:
  case KQ_Q4_K:
  case KQ_Q5_K:
  case KQ_Q6_K:
    kq_decode_k(fmt, row, col, n, out);
    return;
  default:
    for (int i = 0; i < n; i++) out[i] = 0.0f; /* unreachable: formats are checked first */
    return;
  }
}

#endif
