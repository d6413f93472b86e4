/* What a consumer thread of the Hopper attention kernel (fa3_kernel.cuh)
 * does with its accumulator fragments: the mask of the tile past Lk, the
 * online softmax step (fp32 scores, and int8 scores with their tiles'
 * scales), P to bf16 or e4m3 A fragments, O's rescale, the release of a
 * ring slot,
 * and the output (direct stores, or through shared memory and a TMA store).
 * A thread holds rows lane / 4 and lane / 4 + 8 of its warp's 16; register
 * 4i + 2h + e of a 64 x N accumulator is row lane / 4 + 8h, column
 * 8i + 2 (lane % 4) + e (PTX ISA, wgmma D fragment). CUDA-only header,
 * sm_90a (fa3_ptx.cuh). */
#ifndef KERN_FA3_FRAGMENT_CUH
#define KERN_FA3_FRAGMENT_CUH

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "fa3_ptx.cuh"
#include "kern_attn_backend.h"

/* Columns of S at or past Lk to -inf; k0 is the tile's first key. This
 * thread's column for register 4i + 2h + e is 8i + 2 (lane % 4) + e. */
template <int BN>
__device__ __forceinline__ void fa3_mask_cols(float (&s)[BN / 2], int k0, int Lk, int t) {
#pragma unroll
  for (int i = 0; i < BN / 8; i++) {
    const int c = k0 + 8 * i + 2 * t;
    if (c >= Lk) s[4 * i] = s[4 * i + 2] = -INFINITY;
    if (c + 1 >= Lk) s[4 * i + 1] = s[4 * i + 3] = -INFINITY;
  }
}

/* The online softmax step on S (rows h = 0, 1 of this thread: lane / 4 and
 * lane / 4 + 8 of its warp's 16): updates m, l, sets corr, and leaves
 * P = 2^(S sl2 - m) in s (fp32). A row's max and sum over the quad's four
 * threads by xor shuffles; the sum's order is fixed (this thread's columns
 * in order, then the quad reduction at the end of the tile). corr is
 * exactly 1 when the max did not change. */
template <int BN>
__device__ __forceinline__ void fa3_softmax(float (&s)[BN / 2], float (&m)[2], float (&l)[2],
                                            float (&corr)[2], float sl2) {
#pragma unroll
  for (int h = 0; h < 2; h++) {
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < BN / 8; i++) mx = fmaxf(mx, fmaxf(s[4 * i + 2 * h], s[4 * i + 2 * h + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mnew = fmaxf(m[h], mx * sl2); /* sl2 > 0 */
    corr[h] = mnew == m[h] ? 1.f : fa3_exp2(m[h] - mnew); /* 0 on the first tile */
    m[h] = mnew;
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < BN / 8; i++) {
      const float p0 = fa3_exp2(fmaf(s[4 * i + 2 * h], sl2, -mnew));
      const float p1 = fa3_exp2(fmaf(s[4 * i + 2 * h + 1], sl2, -mnew));
      s[4 * i + 2 * h] = p0;
      s[4 * i + 2 * h + 1] = p1;
      sum += p0 + p1;
    }
    l[h] = l[h] * corr[h] + sum;
  }
}

/* The online softmax step on int8 scores: S = c acc, c = (Q tile scale)
 * (K tile scale) sl2, acc the s32 accumulator (|acc| <= 128 127^2 < 2^22).
 * The row max is taken on acc (integers), converted once; each score goes
 * to fp32 with the magic-number trick: the float with the bits of
 * 0x4B400000 + acc is F + acc exactly (F = 1.5 2^23), an integer add where
 * a conversion instruction would share the exponential's unit. F is not
 * subtracted per score: the exponent's FMA takes (F + acc) c - (F c + mb),
 * whose bias, rounded once per row and tile, is off from acc c - mb by at
 * most half an ulp of F c (2^-24 F c < c: under one step of the int8
 * scores, far under the int8 rounding of Q and K). MASK (the tile past
 * Lk): columns at or past `valid` get P = 0 and stay out of the max. P
 * (fp32) is left in s as its bits.
 * PLOG2: P is 2^PLOG2 times the weights (the exponent's bias moved by
 * PLOG2; l sums the scaled P, so O / l is unchanged): fa3-fp8's P in
 * e4m3's normal range. SUM false: l is left alone (fa3-fp8 with
 * fa3_cfg::PVT sums P on the tensor core). */
template <int BN, bool MASK, int PLOG2, bool SUM>
__device__ __forceinline__ void fa3_softmax_s8(int (&s)[BN / 2], float (&m)[2], float (&l)[2],
                                               float (&corr)[2], float c, int valid, int t) {
  constexpr int MAGIC = 0x4B400000;
  constexpr float MAGIC_F = 12582912.f; /* 1.5 2^23 */
#pragma unroll
  for (int h = 0; h < 2; h++) {
    int mx = INT_MIN;
#pragma unroll
    for (int i = 0; i < BN / 8; i++)
#pragma unroll
      for (int e = 0; e < 2; e++)
        if (!MASK || 8 * i + 2 * t + e < valid) mx = max(mx, s[4 * i + 2 * h + e]);
    mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mnew = fmaxf(m[h], (float)mx * c); /* c >= 0 */
    corr[h] = mnew == m[h] ? 1.f : fa3_exp2(m[h] - mnew); /* 0 on the first tile */
    m[h] = mnew;
    const float mb = PLOG2 ? mnew - (float)PLOG2 : mnew; /* the exponent's bias */
    const float bias = fmaf(MAGIC_F, c, mb);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < BN / 8; i++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        int &x = s[4 * i + 2 * h + e];
        float pv = fa3_exp2(fmaf(__int_as_float(x + MAGIC), c, -bias));
        if (MASK && 8 * i + 2 * t + e >= valid) pv = 0.f;
        x = __float_as_int(pv);
        if (SUM) sum += pv;
      }
    if (SUM) l[h] = l[h] * corr[h] + sum;
  }
}

/* P (fp32 in s) to bf16 pairs: register j holds columns 2j, 2j + 1 of the
 * accumulator, which for K step kk = j / 4 is A-fragment register j % 4.
 * P8 (int accumulators holding P's fp32 bits only): P to e4m3 (round to
 * nearest even, saturating), four keys a register, BN / 8 registers:
 * register 4kk + r, byte b is accumulator register 16kk +
 * KERN_ATTN_FP8_P_SRC(r, b), the 8-bit A fragment of 32-key step kk when
 * V^T's keys are in the order KERN_ATTN_FP8_SLOT (kern_attn_backend.h;
 * tests/kernels/test_fa3_fp8_layout.c checks it against the PTX tables).
 * One cvt.rn.satfinite.e4m3x2.f32 per pair, the first value in the low
 * byte. */
template <int BN, bool P8>
__device__ __forceinline__ void fa3_convert_p(const float (&s)[BN / 2], uint32_t (&p)[BN / 4]) {
  static_assert(!P8, "e4m3 P: int8 scores only (fa3_cfg::PV8)");
#pragma unroll
  for (int j = 0; j < BN / 4; j++) p[j] = fa3_pack_bf16(s[2 * j], s[2 * j + 1]);
}
__device__ __forceinline__ uint32_t fa3_pack_e4m3x2(int lo, int hi) {
  return (uint32_t)__nv_cvt_float2_to_fp8x2(make_float2(__int_as_float(lo), __int_as_float(hi)),
                                            __NV_SATFINITE, __NV_E4M3);
}
template <int BN, bool P8>
__device__ __forceinline__ void fa3_convert_p(const int (&s)[BN / 2],
                                              uint32_t (&p)[P8 ? BN / 8 : BN / 4]) {
  if constexpr (P8) {
#pragma unroll
    for (int kk = 0; kk < BN / 32; kk++)
#pragma unroll
      for (int r = 0; r < 4; r++) {
        const int *x = s + 16 * kk;
        const uint32_t lo =
            fa3_pack_e4m3x2(x[KERN_ATTN_FP8_P_SRC(r, 0)], x[KERN_ATTN_FP8_P_SRC(r, 1)]);
        const uint32_t hi =
            fa3_pack_e4m3x2(x[KERN_ATTN_FP8_P_SRC(r, 2)], x[KERN_ATTN_FP8_P_SRC(r, 3)]);
        p[4 * kk + r] = lo | hi << 16;
      }
  } else {
#pragma unroll
    for (int j = 0; j < BN / 4; j++)
      p[j] = fa3_pack_bf16(__int_as_float(s[2 * j]), __int_as_float(s[2 * j + 1]));
  }
}

/* The softmax step of a tile whose first key is k0, scores scaled by c.
 * FIRST: the tile a query tile starts with, the only one that can reach
 * past Lk (masked there); the others are whole. */
template <int BN, bool FIRST, int PLOG2, bool SUM>
__device__ __forceinline__ void fa3_tile_softmax(float (&s)[BN / 2], float (&m)[2],
                                                 float (&l)[2], float (&corr)[2], float c, int k0,
                                                 int Lk, int t) {
  static_assert(PLOG2 == 0 && SUM, "a scaled P, l on the tensor core: int8 scores only (PV8)");
  if (FIRST && k0 + BN > Lk) fa3_mask_cols<BN>(s, k0, Lk, t);
  fa3_softmax<BN>(s, m, l, corr, c);
}
template <int BN, bool FIRST, int PLOG2, bool SUM>
__device__ __forceinline__ void fa3_tile_softmax(int (&s)[BN / 2], float (&m)[2], float (&l)[2],
                                                 float (&corr)[2], float c, int k0, int Lk,
                                                 int t) {
  if (FIRST && k0 + BN > Lk)
    fa3_softmax_s8<BN, true, PLOG2, SUM>(s, m, l, corr, c, Lk - k0, t);
  else
    fa3_softmax_s8<BN, false, PLOG2, SUM>(s, m, l, corr, c, BN, t);
}

/* O *= corr per row. Skipped when every row of the warp kept its max
 * (corr exactly 1, so the product would be O itself): after the first few
 * key tiles most steps change no row's max, and the warp-uniform test
 * spares their 64 multiplies a thread. */
template <int N>
__device__ __forceinline__ void fa3_rescale_o(float (&o)[N / 2], const float (&corr)[2]) {
  if (__all_sync(0xffffffffu, corr[0] == 1.f && corr[1] == 1.f)) return;
#pragma unroll
  for (int i = 0; i < N / 8; i++) {
    o[4 * i] *= corr[0];
    o[4 * i + 1] *= corr[0];
    o[4 * i + 2] *= corr[1];
    o[4 * i + 3] *= corr[1];
  }
}

/* O = O corr + T per row (N / 2 registers each): fa3-fp8's two-level
 * accumulation. The e4m3 wgmma adds into its accumulator with about 13
 * mantissa bits, not fp32's 23 (SageAttention2 measured a 22-bit float
 * accumulator in Ada's and Hopper's fp8 MMA; DeepSeek-V3 about 14 bits on
 * H800), which over tens of thousands of keys shows in O and l; so each key
 * tile's P V starts from zero and its 128 keys are added to O here, in
 * fp32 (fa3_cfg::PVT). One FMA per register, the rescale's multiply
 * folded in. */
template <int N>
__device__ __forceinline__ void fa3_merge_o(float (&o)[N / 2], const float (&tile)[N / 2],
                                            const float (&corr)[2]) {
#pragma unroll
  for (int i = 0; i < N / 8; i++) {
    o[4 * i] = fmaf(o[4 * i], corr[0], tile[4 * i]);
    o[4 * i + 1] = fmaf(o[4 * i + 1], corr[0], tile[4 * i + 1]);
    o[4 * i + 2] = fmaf(o[4 * i + 2], corr[1], tile[4 * i + 2]);
    o[4 * i + 3] = fmaf(o[4 * i + 3], corr[1], tile[4 * i + 3]);
  }
}

/* Warp-level release of a ring slot: every lane has passed the wgmma wait
 * that covers the slot's reads; lane 0 arrives (empty barriers count one
 * arrival per consumer warp). */
__device__ __forceinline__ void fa3_release(uint32_t bar, int lane) {
  __syncwarp();
  if (lane == 0) fa3_mbar_arrive(bar);
}

/* O / l to bf16 for rows below Lq (O's first HD of its N columns). row0:
 * the tile row of this thread's first row (lane / 4 of its warp); out row
 * r, column c is out[(r heads + head) HD + c]. l: this thread's part of
 * the row sums, added over the quad here. VS (fa3-fp8): O was computed on
 * V's e4m3 codes; column c is (O / l) vs[c] (vs: this head's HD channel
 * scales). */
template <int HD, int N, bool VS>
__device__ __forceinline__ void fa3_store_o(const float (&o)[N / 2], const float (&l)[2],
                                            __nv_bfloat16 *out, int row0, int Lq, int heads,
                                            int head, int t, const float *vs) {
#pragma unroll
  for (int h = 0; h < 2; h++) {
    float sum = l[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = 1.f / sum;
    const int row = row0 + 8 * h;
    if (row < Lq) {
      __nv_bfloat16 *dst = out + ((int64_t)row * heads + head) * HD + 2 * t;
#pragma unroll
      for (int i = 0; i < HD / 8; i++) {
        float2 sc = make_float2(1.f, 1.f);
        if (VS) sc = __ldg(reinterpret_cast<const float2 *>(vs + 8 * i + 2 * t));
        *reinterpret_cast<uint32_t *>(dst + 8 * i) =
            VS ? fa3_pack_bf16(o[4 * i + 2 * h] * inv * sc.x, o[4 * i + 2 * h + 1] * inv * sc.y)
               : fa3_pack_bf16(o[4 * i + 2 * h] * inv, o[4 * i + 2 * h + 1] * inv);
      }
    }
  }
}

/* O / l through the warpgroup's staging buffer `buf` (HD/64 column blocks
 * of 64 rows x 128 bytes, 128B-swizzled as the tensor map reads them) and
 * one TMA store per column block, issued by the warpgroup's thread 0 after
 * a named barrier (id bar_id, the warpgroup's 128 threads); rows past Lq
 * are left out by the copy engine. The buffer's previous store must have
 * read it: thread 0 waits for that first, then the barrier. wq, g, t: this
 * thread's warp in the warpgroup, lane / 4, lane % 4; c1: the tile's first
 * output row of this warpgroup. Each thread's 4-byte stores of one column
 * chunk land in 32 different banks (the swizzle spreads the 8 rows). */
template <int HD>
__device__ __forceinline__ void fa3_store_o_tma(const float (&o)[HD / 2], const float (&l)[2],
                                                const CUtensorMap *map, uint32_t buf, int bar_id,
                                                int wq, int g, int t, int c0, int c1) {
  const int tw = wq * 32 + g * 4 + t;
  if (tw == 0) fa3_bulk_wait_read();
  fa3_bar_sync(bar_id, 128);
#pragma unroll
  for (int h = 0; h < 2; h++) {
    float sum = l[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = 1.f / sum;
    const int r = wq * 16 + g + 8 * h; /* row in the warpgroup's 64 */
#pragma unroll
    for (int i = 0; i < HD / 8; i++) {
      const uint32_t a = buf + (uint32_t)(i / 8) * (64 * 128) + (uint32_t)r * 128 +
                         (uint32_t)(((i % 8) ^ (r % 8)) * 16) + 4 * t;
      fa3_st_shared_u32(a, fa3_pack_bf16(o[4 * i + 2 * h] * inv, o[4 * i + 2 * h + 1] * inv));
    }
  }
  fa3_fence_proxy_async();
  fa3_bar_sync(bar_id, 128);
  if (tw == 0) {
#pragma unroll
    for (int cb = 0; cb < HD / 64; cb++)
      fa3_tma_store_2d(map, buf + cb * (64 * 128), c0 + cb * 64, c1);
    fa3_bulk_commit();
  }
}

#endif
