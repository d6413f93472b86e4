/* The Hopper attention kernel (kern_attn.h, backend fa3), as a template:
 * exact softmax attention, bf16 q, k, v, fp32 scores and accumulation, bf16
 * out, in the FlashAttention-3 organisation (Shah et al. 2024):
 *
 * - warp specialisation: warpgroup 0 is the producer (one thread issues
 *   every bulk tensor copy, its registers lowered by setmaxnreg), the NCWG
 *   consumer warpgroups compute (registers raised); each consumer owns 64
 *   query rows of the CTA's BM = 64 NCWG row tile;
 * - TMA: Q (BM x HD) once per tile, K and V tiles (BN x HD) through a ring
 *   of STAGES shared-memory slots, each slot with a "full" mbarrier (the
 *   copy's bytes landed) and an "empty" one (every consumer warp is done
 *   with it); K and V have separate slots and barriers, so S = Q K^T starts
 *   before V arrives;
 * - wgmma for both GEMMs: S (64 x BN per warpgroup) = Q K^T with both
 *   operands in shared memory (K-major), O (64 x HD) += P V with P in
 *   registers (the S accumulator rounded to bf16 is already the A fragment)
 *   and V in shared memory read MN-major (transpose bit), so nothing is
 *   transposed or copied;
 * - OVERLAP (intra-warpgroup pipelining): each step issues S_j = Q K_j^T
 *   and O += P_{j-1} V_{j-1} together, waits for S_j only, does the
 *   softmax of S_j while P_{j-1} V_{j-1} runs, then waits for it;
 * - PINGPONG (two consumers): the issue of each step's GEMMs alternates
 *   between the two warpgroups through two named barriers, so one
 *   warpgroup's softmax runs while the other's GEMMs hold the tensor cores
 *   (for bf16, on top of OVERLAP, it measured 1-2% slower on an H100, so
 *   fa3_attn.cu leaves it out; fa3-int8 and fa3-fp8 at head dim 128, whose
 *   8-bit S GEMM and shorter softmax leave the two warpgroups' GEMMs
 *   colliding, ship it: fa3_int8.cu, fa3_fp8.cu);
 * - persistent CTAs (the launcher's choice, not a template parameter): the
 *   grid is at most one CTA per SM, and CTA b takes tiles b, b + grid, ...;
 *   the producer prefetches the next tile's Q, K, V while the consumers
 *   finish the current one.
 *
 * Online softmax (per query row, in the log2 domain, sl2 = scale log2 e):
 *   m' = max(m, rowmax(S) sl2), corr = 2^(m - m'), P = 2^(S sl2 - m'),
 *   l = l corr + rowsum(P), O = O corr + bf16(P) V,  out = O / l.
 * O corr is skipped when corr is 1 in every row of a warp (the max held:
 * the same bits, 64 multiplies a thread fewer; most steps after the first
 * few key tiles). PVT (fa3-fp8, two consumers): O = O corr + (P V)_tile in
 * fp32, the tile's P V from a fresh accumulator with l as its column HD.
 * Key tiles are taken from the last to the first, so the only partial tile
 * (Lk not a multiple of BN) is the first one a tile meets: its columns past
 * Lk are set to -inf there and nowhere else, and every row's running max is
 * finite after it (each tile has at least one real key). Rows past Lq are
 * computed on the copy engine's zero fill and not stored.
 *
 * Determinism: every output element is produced by one thread, over the
 * key tiles in a fixed order, with a fixed wgmma sequence; no atomics.
 * Every variant with the same (HD, BN) performs the same arithmetic in the
 * same order, so they give the same bits (tests/gpu/test_attention checks
 * it): the warpgroup count, the overlap, the ping-pong and the grid change
 * only when things happen, not what is computed.
 *
 * Shared memory (from a 1024-byte aligned base; every region a multiple of
 * 1024 bytes so each swizzle atom is aligned, fa3_ptx.cuh):
 *   Q  HD/64 column blocks of (BM rows x 128 bytes)       BM HD 2 bytes
 *   K  STAGES x HD/64 column blocks of (BN x 128 bytes)   STAGES BN HD 2
 *   V  the same                                            STAGES BN HD 2
 *      (PV8: STAGES BN HD, V^T in e4m3; PVT: each slot followed by a
 *      1024-byte sum block)
 *   O  NCWG x HD/64 column blocks of (64 x 128 bytes)     NCWG 64 HD 2
 *      (TMA_STORE only: the output leaves through it)
 *   mbarriers: q_full, q_empty, k_full[S], k_empty[S], v_full[S], v_empty[S]
 * A column block holds 64 head-dim elements of every row; the tensor map's
 * box is (64 elements, rows), swizzled 128B. With QK8 a Q or K row is one
 * block of HD bytes (128B swizzle for HD 128, 64B for HD 64). With PV8 a V
 * slot is V^T in e4m3: HD rows (head-dim channels) of BN = 128 key bytes,
 * one 128B swizzle span each (fa3_fp8.cu writes V^T with the keys of each
 * 16-group in the order KERN_ATTN_FP8_SLOT, so P's accumulator is the A
 * fragment as it stands). With PVT each V slot's 1024 bytes after V^T are
 * 8 more rows of the B operand, written once at the start: row 0 e4m3
 * ones, rows 1-7 zero. P V runs N = HD + 8 wide, so O's column HD is the
 * row sum of the e4m3 P that P V used (the softmax's l, added on the
 * tensor core instead of one fp32 add per score) and columns HD + 1 ..
 * HD + 7 are zero. */
#ifndef KERN_FA3_KERNEL_CUH
#define KERN_FA3_KERNEL_CUH

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "cuda_check.h"
#include "fa3_fragment.cuh"
#include "fa3_ptx.cuh"
#include "fa3_wgmma.cuh"
#include "kern_attn.h"

/* ---- configuration -------------------------------------------------------- */

template <int HD_, int BN_, int NCWG_, int STAGES_, bool OVERLAP_, bool PINGPONG_,
          bool QK8_ = false, bool TMA_STORE_ = false, bool PV8_ = false>
struct fa3_cfg {
  static constexpr int HD = HD_;         /* head dim: 64 or 128 */
  static constexpr int BN = BN_;         /* keys per K/V tile */
  static constexpr int NCWG = NCWG_;     /* consumer warpgroups */
  static constexpr int STAGES = STAGES_; /* K/V ring slots */
  static constexpr bool OVERLAP = OVERLAP_;
  static constexpr bool PINGPONG = PINGPONG_;
  /* Q and K in int8 (fa3_int8.cu): S = Q K^T in s32 on the s8 wgmma, each
   * Q and K tile with its own scale; V and P V stay bf16 */
  static constexpr bool QK8 = QK8_;
  typedef typename std::conditional<QK8, int, float>::type acc_t; /* S accumulator */
  /* P V in e4m3 too (fa3_fp8.cu): V read as V^T in e4m3 with a scale per
   * (head, channel) applied at the store, P = 2^PLOG2 softmax weights in
   * e4m3 (the A fragment of m64nHDk32, four keys a register) */
  static constexpr bool PV8 = PV8_;
  /* P's power-of-two scale: P in [0, 1] times 2^8 puts the weights down to
   * 2^-14 in e4m3's normal range; it is exact, and l carries it too, so
   * O / l needs no correction */
  static constexpr int PLOG2 = PV8 ? KERN_ATTN_FP8_PLOG2 : 0;
  static constexpr int PR = PV8 ? BN / 8 : BN / 4; /* 32-bit registers of P */
  /* PVT, PV8 where two consumers (240 registers each) leave room for a
   * second accumulator: each key tile's P V goes into a fresh one, added
   * to O in fp32 (fa3_merge_o), and l is 8 more columns of it (the slot's
   * sum block). Three consumers (160 registers) keep P V in O and l in
   * fp32 adds. */
  static constexpr bool PVT = PV8 && NCWG <= 2;
  static constexpr int ON = PVT ? HD + 8 : HD; /* columns of the O accumulator */
  static constexpr int BM = 64 * NCWG; /* query rows per tile */
  static constexpr int THREADS = 128 * (NCWG + 1);
  static constexpr int CB = HD / 64; /* 64-element column blocks of V (and bf16 Q, K) */
  /* Q and K: column blocks of QK_ROWB bytes per row (the swizzle span) */
  static constexpr int QK_ROWB = QK8 ? HD : 128;
  static constexpr int QK_CB = QK8 ? 1 : CB;
  static constexpr uint32_t Q_BYTES = BM * HD * (QK8 ? 1 : 2);
  static constexpr uint32_t K_BYTES = BN * HD * (QK8 ? 1 : 2), V_BYTES = BN * HD * (PV8 ? 1 : 2);
  /* a V slot: the tile, and with PVT the row-sum block after it */
  static constexpr uint32_t V_SLOT = V_BYTES + (PVT ? 1024 : 0);
  static constexpr uint32_t OFF_K = Q_BYTES, OFF_V = OFF_K + STAGES * K_BYTES;
  static constexpr uint32_t OFF_O = OFF_V + STAGES * V_SLOT;
  static constexpr int NBAR = 2 + 4 * STAGES;
  /* TMA_STORE: the output leaves through a staging buffer (64 rows x HD
   * bf16 per consumer, swizzled as the TMA store reads it) and one bulk
   * store per warpgroup; else each thread stores its fragment itself */
  static constexpr bool TMA_STORE = TMA_STORE_;
  static constexpr uint32_t O_BYTES = NCWG * 64 * HD * 2;
  static constexpr uint32_t OFF_BAR = OFF_O + (TMA_STORE ? O_BYTES : 0);
  /* + 1024: the dynamic shared memory base is aligned up by the kernel */
  static constexpr uint32_t SMEM_BYTES = OFF_BAR + NBAR * 8 + 1024;
  /* setmaxnreg: the producer keeps 24, consumers take what is left of the
   * 64 Ki registers (multiple of 8, at most 256); one consumer warpgroup
   * (256 threads) needs no change. */
  static constexpr int REG_PRODUCER = 24;
  static constexpr int REG_CONSUMER_RAW = (65536 / 128 - REG_PRODUCER) / NCWG / 8 * 8;
  static constexpr int REG_CONSUMER = REG_CONSUMER_RAW > 256 ? 256 : REG_CONSUMER_RAW;
  static constexpr bool SETMAXNREG = NCWG > 1;

  static_assert(HD == 64 || HD == 128, "head dim 64 or 128");
  static_assert(BN % 16 == 0 && BN >= 16 && BN <= 256, "BN: multiple of 16 up to 256 (TMA box)");
  static_assert(NCWG >= 1 && NCWG <= 3, "1 to 3 consumer warpgroups");
  static_assert(!PINGPONG || (NCWG == 2 && OVERLAP), "ping-pong: two overlapped consumers");
  static_assert(K_BYTES % 1024 == 0 && Q_BYTES % 1024 == 0, "1024-byte aligned regions");
  static_assert(!PV8 || (QK8 && BN == 128 && !TMA_STORE),
                "PV8: with QK8 (the accumulator holds P as int bits), V^T rows of one 128-byte "
                "swizzle span, direct output stores (the per-channel V scale is applied there)");
  static_assert(SMEM_BYTES <= 227 * 1024, "shared memory per CTA");
};

/* The kernel's parameters, passed by value as one __grid_constant__ struct
 * (the tensor maps must live in parameter space for the copy engine). */
struct fa3_params {
  CUtensorMap tq; /* q (Lq, heads, HD) bf16 as 2D (heads HD, Lq), box (64, BM);
                     int8: box (HD, BM) */
  CUtensorMap tk; /* k (Lk, heads, HD) as 2D (heads HD, Lk), box (64, BN); int8: (HD, BN) */
  CUtensorMap tv; /* v (Lk, heads, HD) bf16, box (64, BN) */
  CUtensorMap to; /* out (Lq, heads, HD) bf16, box (64, 64): TMA_STORE */
  __nv_bfloat16 *out; /* (Lq, heads, HD) */
  const float *qscale; /* QK8: (heads, nqb) the int8 Q tiles' scales */
  const float *kscale; /* QK8: (heads, nkb) the int8 K tiles' scales */
  const float *vscale; /* PV8: (heads, HD) V's scale per channel */
  int Lq, Lk, heads;
  int nqb;    /* query tiles per head: ceil(Lq / BM) */
  int ntiles; /* nqb * heads */
  int nkb;    /* key tiles: ceil(Lk / BN) */
  float sl2;  /* softmax scale * log2(e) */
};

/* ---- the two GEMMs of a consumer warpgroup (64 query rows) ---------------- */

/* S (64 x BN) = Q_w K^T: q, k are the shared addresses of the warpgroup's
 * Q rows (column block 0) and of the K slot. Every K step reads 32 bytes of
 * each row: bf16, 16 elements per step, step kk in column block kk / 4 at
 * byte offset (kk % 4) 32; int8, 32 elements per step, one column block of
 * HD bytes per row (128- or 64-byte swizzle), step kk at offset 32 kk. */
template <class C>
__device__ __forceinline__ void fa3_gemm_qk(typename C::acc_t (&s)[C::BN / 2], uint32_t q,
                                            uint32_t k) {
  constexpr int RB = C::QK_ROWB, STEPS = C::QK8 ? C::HD / 32 : C::HD / 16, PER_CB = RB / 32;
  fa3_wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < STEPS; kk++) {
    const uint32_t off = (uint32_t)(kk % PER_CB) * 32;
    const uint64_t da = fa3_desc(q + (uint32_t)(kk / PER_CB) * (C::BM * RB) + off, 16, 8 * RB, RB);
    const uint64_t db = fa3_desc(k + (uint32_t)(kk / PER_CB) * (C::BN * RB) + off, 16, 8 * RB, RB);
    if constexpr (C::QK8)
      fa3_mma_ss<fa3_s8_tag, C::BN>::run(s, da, db, kk > 0);
    else
      fa3_mma_ss<fa3_bf16_tag, C::BN>::run(s, da, db, kk > 0);
  }
  fa3_wgmma_commit();
}

/* O (64 x HD) += P V over the BN/16 K steps (16 keys each): P's registers
 * 4kk..4kk+3 are the A fragment of keys 16kk..16kk+15 (the S accumulator
 * of those columns, packed in order). V is read MN-major: step kk starts at
 * key row 16kk (2048 bytes per step), SBO 1024 (8 keys), LBO the distance
 * between the head dim's 64-element column blocks.
 * PV8: BN/32 steps of 32 keys on the e4m3 wgmma; P's registers 4kk..4kk+3
 * are the 8-bit A fragment of step kk (fa3_convert_p), V^T K-major (rows
 * of 128 key bytes, 128B swizzle), step kk at byte offset 32 kk, SBO 1024
 * (8 channels), as the int8 Q K^T addresses its K tile. PVT: N = HD + 8
 * (the last 8 rows the slot's row-sum block), into a fresh accumulator. */
template <class C>
__device__ __forceinline__ void fa3_gemm_pv(float (&o)[C::ON / 2], const uint32_t (&p)[C::PR],
                                            uint32_t v) {
  fa3_wgmma_fence();
  if constexpr (C::PV8) {
#pragma unroll
    for (int kk = 0; kk < C::BN / 32; kk++) {
      const uint32_t a[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
      const uint64_t db = fa3_desc(v + (uint32_t)kk * 32, 16, 1024, 128);
      fa3_mma_rs<fa3_e4m3_tag, C::ON>::run(o, a, db, !C::PVT || kk > 0);
    }
  } else {
#pragma unroll
    for (int kk = 0; kk < C::BN / 16; kk++) {
      const uint32_t a[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
      const uint64_t db = fa3_desc(v + (uint32_t)kk * 2048, C::BN * 128, 1024);
      fa3_mma_rs<fa3_bf16_tag, C::HD>::run(o, a, db, 1);
    }
  }
  fa3_wgmma_commit();
}

/* ---- the shared-memory map --------------------------------------------------- */

template <class C> struct fa3_smem {
  uint32_t q, k, v, o, bar; /* region bases (shared addresses); o: TMA_STORE only */
  __device__ __forceinline__ uint32_t kslot(int s) const { return k + (uint32_t)s * C::K_BYTES; }
  __device__ __forceinline__ uint32_t vslot(int s) const { return v + (uint32_t)s * C::V_SLOT; }
  __device__ __forceinline__ uint32_t q_full() const { return bar; }
  __device__ __forceinline__ uint32_t q_empty() const { return bar + 8; }
  __device__ __forceinline__ uint32_t k_full(int s) const { return bar + 16 + 8 * s; }
  __device__ __forceinline__ uint32_t k_empty(int s) const {
    return bar + 16 + 8 * (C::STAGES + s);
  }
  __device__ __forceinline__ uint32_t v_full(int s) const {
    return bar + 16 + 8 * (2 * C::STAGES + s);
  }
  __device__ __forceinline__ uint32_t v_empty(int s) const {
    return bar + 16 + 8 * (3 * C::STAGES + s);
  }
};

/* ---- producer -------------------------------------------------------------------- */

/* One thread: for each tile of this CTA, Q once (after the consumers released
 * the previous tile's Q), then K and V of every key tile, last first, each
 * into the next ring slot once its consumers released it. it counts slot uses
 * over the whole run: slot it % STAGES, round it / STAGES, whose parity the
 * waits use (empty: the previous round's, so round 0 passes at once). */
template <class C>
__device__ __forceinline__ void fa3_producer(const fa3_params &p, const fa3_smem<C> &sm) {
  fa3_tma_prefetch_map(&p.tq);
  fa3_tma_prefetch_map(&p.tk);
  fa3_tma_prefetch_map(&p.tv);
  uint32_t it = 0, ti = 0;
  for (int tile = blockIdx.x; tile < p.ntiles; tile += gridDim.x, ti++) {
    const int head = tile / p.nqb, qb = tile % p.nqb;
    fa3_mbar_wait(sm.q_empty(), (ti & 1) ^ 1);
    fa3_mbar_arrive_tx(sm.q_full(), C::Q_BYTES);
    /* the coordinates count elements; a Q/K column block holds QK_ROWB
     * bytes of each row, 64 bf16 or all HD int8 */
#pragma unroll
    for (int cb = 0; cb < C::QK_CB; cb++)
      fa3_tma_load_2d(sm.q + cb * (C::BM * C::QK_ROWB), &p.tq, sm.q_full(),
                      head * C::HD + cb * 64, qb * C::BM);
    for (int j = p.nkb - 1; j >= 0; j--, it++) {
      const int s = (int)(it % C::STAGES);
      const uint32_t par = ((it / C::STAGES) & 1) ^ 1;
      fa3_mbar_wait(sm.k_empty(s), par);
      fa3_mbar_arrive_tx(sm.k_full(s), C::K_BYTES);
#pragma unroll
      for (int cb = 0; cb < C::QK_CB; cb++)
        fa3_tma_load_2d(sm.kslot(s) + cb * (C::BN * C::QK_ROWB), &p.tk, sm.k_full(s),
                        head * C::HD + cb * 64, j * C::BN);
      fa3_mbar_wait(sm.v_empty(s), par);
      fa3_mbar_arrive_tx(sm.v_full(s), C::V_BYTES);
      if constexpr (C::PV8) { /* V^T: HD channel rows of this tile's BN key bytes */
        fa3_tma_load_2d(sm.vslot(s), &p.tv, sm.v_full(s), j * C::BN, head * C::HD);
      } else {
#pragma unroll
        for (int cb = 0; cb < C::CB; cb++)
          fa3_tma_load_2d(sm.vslot(s) + cb * (C::BN * 128), &p.tv, sm.v_full(s),
                          head * C::HD + cb * 64, j * C::BN);
      }
    }
  }
}

/* ---- consumer ----------------------------------------------------------------------- */

/* Ping-pong turns: warpgroup w waits on barrier 1 + w (its own turn) and,
 * once its GEMMs are issued, arrives on the other's; each barrier counts
 * the two warpgroups' 256 threads. */
template <class C> __device__ __forceinline__ void fa3_turn_begin(int wg) {
  if (C::PINGPONG) fa3_bar_sync(1 + wg, 256);
}
template <class C> __device__ __forceinline__ void fa3_turn_end(int wg) {
  if (C::PINGPONG) fa3_bar_arrive(1 + (wg ^ 1), 256);
}

/* One consumer warpgroup over all tiles of this CTA (see the file head for
 * the step order). One function on purpose: O, S, P, m and l stay in
 * registers across the key loop. */
template <class C>
__device__ __forceinline__ void fa3_consumer(const fa3_params &p, const fa3_smem<C> &sm, int wg) {
  const int tw = threadIdx.x % 128, lane = tw % 32, wq = tw / 32, t = lane % 4;
  const uint32_t qw = sm.q + (uint32_t)wg * 64 * C::QK_ROWB; /* this warpgroup's 64 Q rows */
  float o[C::ON / 2];
  typename C::acc_t s[C::BN / 2];
  uint32_t pr[C::PR];
  float m[2], l[2], corr[2] = {0.f, 0.f}; /* corr: set by each softmax step */
  /* PVT: each key tile's P V, added to O by fa3_merge_o with cp, the corr
   * of its tile (the others accumulate P V in O itself) */
  float ot[C::ON / 2], cp[2];
  /* O += P V for the P in pr (corr: its tile's), V in slot v: the issue
   * (O rescaled first; PVT keeps corr for the merge instead) and the
   * finish after the wait (PVT: the merge) */
  auto pv_issue = [&](uint32_t v) {
    if constexpr (C::PVT) {
      cp[0] = corr[0], cp[1] = corr[1];
      fa3_gemm_pv<C>(ot, pr, v);
    } else {
      fa3_rescale_o<C::ON>(o, corr);
      fa3_gemm_pv<C>(o, pr, v);
    }
  };
  auto pv_finish = [&]() {
    if constexpr (C::PVT) {
      fa3_reg_fence(ot);
      fa3_merge_o<C::ON>(o, ot, cp);
    } else {
      fa3_reg_fence(o);
    }
  };
  uint32_t it = 0, ti = 0;
  if (C::PINGPONG && wg == 1) fa3_bar_arrive(1, 256); /* warpgroup 0 takes the first turn */

  for (int tile = blockIdx.x; tile < p.ntiles; tile += gridDim.x, ti++) {
    const int head = tile / p.nqb, qb = tile % p.nqb;
#pragma unroll
    for (int i = 0; i < C::ON / 2; i++) o[i] = 0.f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
    /* the scores' scale for key tile j: sl2, times the two tiles' int8
     * scales with QK8 */
    const float sq = C::QK8 ? __ldg(p.qscale + (int64_t)head * p.nqb + qb) * p.sl2 : p.sl2;
    const float *ksc = C::QK8 ? p.kscale + (int64_t)head * p.nkb : nullptr;
    auto tile_scale = [&](int j) { return C::QK8 ? sq * __ldg(ksc + j) : sq; };
    fa3_mbar_wait(sm.q_full(), ti & 1);

    /* the first key tile (the last one, the only partial one) */
    int sp = (int)(it % C::STAGES); /* slot of the tile whose P V is pending */
    {
      const float c = tile_scale(p.nkb - 1);
      fa3_mbar_wait(sm.k_full(sp), (it / C::STAGES) & 1);
      fa3_gemm_qk<C>(s, qw, sm.kslot(sp));
      fa3_wgmma_wait<0>();
      fa3_reg_fence(s);
      fa3_release(sm.k_empty(sp), lane);
      if (p.nkb == 1) fa3_release(sm.q_empty(), lane);
      fa3_tile_softmax<C::BN, true, C::PLOG2, !C::PVT>(s, m, l, corr, c, (p.nkb - 1) * C::BN,
                                                       p.Lk, t);
      fa3_convert_p<C::BN, C::PV8>(s, pr);
      if (!C::OVERLAP) {
        fa3_mbar_wait(sm.v_full(sp), (it / C::STAGES) & 1);
        pv_issue(sm.vslot(sp));
        fa3_wgmma_wait<0>();
        pv_finish();
        fa3_release(sm.v_empty(sp), lane);
      }
      it++;
    }

    for (int jj = 1; jj < p.nkb; jj++, it++) {
      const int sc = (int)(it % C::STAGES);
      const uint32_t par = (it / C::STAGES) & 1;
      const float c = tile_scale(p.nkb - 1 - jj); /* loaded early, used after S */
      fa3_mbar_wait(sm.k_full(sc), par);
      if (C::OVERLAP) {
        /* S_j and the pending O += P V issued together, then the softmax
         * of S_j while P V runs */
        const uint32_t parp = ((it - 1) / C::STAGES) & 1;
        fa3_turn_begin<C>(wg);
        fa3_gemm_qk<C>(s, qw, sm.kslot(sc));
        fa3_mbar_wait(sm.v_full(sp), parp);
        pv_issue(sm.vslot(sp));
        fa3_turn_end<C>(wg);
        fa3_wgmma_wait<1>();
        fa3_reg_fence(s);
        fa3_release(sm.k_empty(sc), lane);
        fa3_tile_softmax<C::BN, false, C::PLOG2, !C::PVT>(s, m, l, corr, c, 0, p.Lk, t);
        /* Q's release sits between the softmax and the wait on purpose: its
         * branch ends the softmax's basic block, and without that boundary
         * ptxas hoists the wait above the softmax (its scheduler moves the
         * wait up to the first instructions after the S wait), which
         * undoes the overlap. Checked in the SASS:
         * launch/bench/dev/fa3_sass_check.sh. */
        if (jj == p.nkb - 1) fa3_release(sm.q_empty(), lane);
        fa3_wgmma_wait<0>();
        fa3_reg_fence(pr);
        pv_finish();
        fa3_release(sm.v_empty(sp), lane);
        fa3_convert_p<C::BN, C::PV8>(s, pr);
        sp = sc;
      } else {
        fa3_gemm_qk<C>(s, qw, sm.kslot(sc));
        fa3_wgmma_wait<0>();
        fa3_reg_fence(s);
        fa3_release(sm.k_empty(sc), lane);
        if (jj == p.nkb - 1) fa3_release(sm.q_empty(), lane);
        fa3_tile_softmax<C::BN, false, C::PLOG2, !C::PVT>(s, m, l, corr, c, 0, p.Lk, t);
        fa3_convert_p<C::BN, C::PV8>(s, pr);
        fa3_mbar_wait(sm.v_full(sc), par);
        pv_issue(sm.vslot(sc));
        fa3_wgmma_wait<0>();
        pv_finish();
        fa3_release(sm.v_empty(sc), lane);
      }
    }

    if (C::OVERLAP) { /* the last P V */
      fa3_mbar_wait(sm.v_full(sp), ((it - 1) / C::STAGES) & 1);
      pv_issue(sm.vslot(sp));
      fa3_wgmma_wait<0>();
      pv_finish();
      fa3_release(sm.v_empty(sp), lane);
    }
    if constexpr (C::PVT) /* l: O's column HD (lane % 4 == 0; the others hold zeros) */
      for (int h = 0; h < 2; h++) l[h] = o[C::HD / 2 + 2 * h];
    if constexpr (C::TMA_STORE) {
      fa3_store_o_tma<C::HD>(o, l, &p.to, sm.o + (uint32_t)wg * (64 * C::HD * 2), 3 + wg, wq,
                             lane / 4, t, head * C::HD, qb * C::BM + wg * 64);
    } else {
      const int row0 = qb * C::BM + wg * 64 + wq * 16 + lane / 4;
      fa3_store_o<C::HD, C::ON, C::PV8>(o, l, p.out, row0, p.Lq, p.heads, head, t,
                                        C::PV8 ? p.vscale + (int64_t)head * C::HD : nullptr);
    }
  }
  /* the last output stores done before the CTA's shared memory goes */
  if (C::TMA_STORE && tw == 0) fa3_bulk_wait();
  /* the turn warpgroup 1 passed on after its last step has no taker */
  if (C::PINGPONG && wg == 0) fa3_bar_sync(1, 256);
}

/* ---- kernel ---------------------------------------------------------------------------- */

template <class C>
__global__ void __launch_bounds__(C::THREADS, 1)
    fa3_fwd_kernel(const __grid_constant__ fa3_params p) {
  extern __shared__ unsigned char fa3_smem_raw[];
  const uint32_t base = (fa3_smem_addr(fa3_smem_raw) + 1023u) & ~1023u;
  fa3_smem<C> sm;
  sm.q = base;
  sm.k = base + C::OFF_K;
  sm.v = base + C::OFF_V;
  sm.o = base + C::OFF_O;
  sm.bar = base + C::OFF_BAR;
  if (threadIdx.x == 0) {
    fa3_mbar_init(sm.q_full(), 1);
    fa3_mbar_init(sm.q_empty(), 4 * C::NCWG);
    for (int s = 0; s < C::STAGES; s++) {
      fa3_mbar_init(sm.k_full(s), 1);
      fa3_mbar_init(sm.v_full(s), 1);
      fa3_mbar_init(sm.k_empty(s), 4 * C::NCWG);
      fa3_mbar_init(sm.v_empty(s), 4 * C::NCWG);
    }
    fa3_mbar_init_fence();
  }
  if constexpr (C::PVT) { /* the row-sum blocks: row 0 e4m3 1.0 (0x38), rows 1-7 zero */
    constexpr int WORDS = (C::V_SLOT - C::V_BYTES) / 4, ROW = 128 / 4; /* a block's, its row's */
    for (int i = threadIdx.x; i < C::STAGES * WORDS; i += C::THREADS)
      fa3_st_shared_u32(sm.vslot(i / WORDS) + C::V_BYTES + 4 * (i % WORDS),
                        i % WORDS < ROW ? 0x38383838u : 0u);
    fa3_fence_proxy_async(); /* visible to the wgmma's reads (the async proxy) */
  }
  __syncthreads();

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    if (C::SETMAXNREG) fa3_setmaxnreg_dec<C::REG_PRODUCER>();
    if (threadIdx.x == 0) fa3_producer<C>(p, sm);
  } else {
    if (C::SETMAXNREG) fa3_setmaxnreg_inc<C::REG_CONSUMER>();
    fa3_consumer<C>(p, sm, wg - 1);
  }
}

/* ---- launch (host) ----------------------------------------------------------------------- */

/* Fills *map with a 2D (cols, rows) row-major tensor of bf16 (elem_bytes
 * 2) or 8-bit values (1), rows cols elem_bytes bytes apart, box (box_cols,
 * box_rows), swizzled by the box's row bytes (128 or 64), zero fill
 * outside; through the driver's cuTensorMapEncodeTiled, found with
 * cudaGetDriverEntryPointByVersion (libcuda is not linked). fa3_attn.cu; a
 * failure is fatal (the caller checked the shape). */
void fa3_encode_2d(CUtensorMap *map, const void *ptr, int64_t cols, int64_t rows, int elem_bytes,
                   int box_cols, int box_rows, const char *what);
/* fa3_encode_2d on the 2D view (heads hd, rows) of a (rows, heads, hd)
 * tensor. */
void fa3_encode_map(CUtensorMap *map, const void *ptr, int64_t rows, int64_t heads, int hd,
                    int elem_bytes, int box_cols, int box_rows, const char *what);

/* CTAs of a persistent grid: the device's SM count (fa3_attn.cu). */
int fa3_sm_count(void);

/* The 8-bit inputs of a QK8 configuration (fa3_int8.cu makes them; vt and
 * vscale, PV8 only, fa3_fp8.cu). */
struct fa3_qk8_inputs {
  const void *q, *k;          /* (Lq, heads, HD), (Lk, heads, HD) int8 */
  const float *qscale;        /* (heads, ceil(Lq / BM)) */
  const float *kscale;        /* (heads, ceil(Lk / BN)) */
  const void *vt;             /* (heads, HD, lk16) e4m3, keys in KERN_ATTN_FP8_SLOT order */
  const float *vscale;        /* (heads, HD) */
  int64_t lk16;               /* Lk rounded up to 16 */
};

/* The int8 inputs of p for tiles of bm query rows and bn keys (fa3_int8.cu:
 * K smoothed, Q and K quantised per tile), into c's buffers, on `stream`. */
struct kern_attn_fa3_int8;
void fa3_int8_quantize(kern_attn_fa3_int8 *c, const kern_attn_params *p, int bm, int bn,
                       fa3_qk8_inputs *in, cudaStream_t stream);
/* V^T in e4m3 and its per-channel scales of p (fa3_fp8.cu) into c's
 * buffers, their addresses into in->vt, in->vscale, in->lk16, on `stream`. */
void fa3_fp8_quantize_v(kern_attn_fa3_int8 *c, const kern_attn_params *p, fa3_qk8_inputs *in,
                        cudaStream_t stream);

/* Launches configuration C on p (checked by kern_attn_fa3_supported, hd ==
 * C::HD) on `stream`; persistent: grid min(tiles, SMs), else one CTA per
 * tile. A QK8 configuration reads q and k from *q8 (p->q and p->k unused),
 * a PV8 one v too. */
template <class C>
static void fa3_launch(const kern_attn_params *p, int persistent, cudaStream_t stream,
                       const fa3_qk8_inputs *q8 = nullptr) {
  fa3_params k;
  const float scale = p->scale > 0.f ? p->scale : 1.0f / sqrtf((float)p->hd);
  if (C::QK8) {
    if (!q8) sp_fatal("attention (fa3): an int8 configuration launched without its int8 inputs");
    fa3_encode_map(&k.tq, q8->q, p->Lq, p->heads, C::HD, 1, C::HD, C::BM, "q (int8)");
    fa3_encode_map(&k.tk, q8->k, p->Lk, p->heads, C::HD, 1, C::HD, C::BN, "k (int8)");
    k.qscale = q8->qscale;
    k.kscale = q8->kscale;
  } else {
    fa3_encode_map(&k.tq, p->q, p->Lq, p->heads, C::HD, 2, 64, C::BM, "q");
    fa3_encode_map(&k.tk, p->k, p->Lk, p->heads, C::HD, 2, 64, C::BN, "k");
    k.qscale = k.kscale = nullptr;
  }
  if (C::PV8) {
    if (!q8->vt || !q8->vscale || q8->lk16 < p->Lk || q8->lk16 % 16)
      sp_fatal("attention (fa3): an e4m3 P V configuration launched without its V^T inputs");
    fa3_encode_2d(&k.tv, q8->vt, q8->lk16, p->heads * C::HD, 1, C::BN, C::HD, "v^T (e4m3)");
    k.vscale = q8->vscale;
  } else {
    fa3_encode_map(&k.tv, p->v, p->Lk, p->heads, C::HD, 2, 64, C::BN, "v");
    k.vscale = nullptr;
  }
  if (C::TMA_STORE) fa3_encode_map(&k.to, p->out, p->Lq, p->heads, C::HD, 2, 64, 64, "out");
  k.out = reinterpret_cast<__nv_bfloat16 *>(p->out);
  k.Lq = (int)p->Lq;
  k.Lk = (int)p->Lk;
  k.heads = (int)p->heads;
  k.nqb = (int)((p->Lq + C::BM - 1) / C::BM);
  k.ntiles = k.nqb * k.heads; /* < 2^31: kern_attn_fa3_supported */
  k.nkb = (int)((p->Lk + C::BN - 1) / C::BN);
  k.sl2 = scale * 1.4426950408889634f; /* log2(e) */
  int grid = k.ntiles;
  if (persistent) {
    const int sms = fa3_sm_count();
    grid = grid < sms ? grid : sms;
  }
  /* above the 48 KiB default: opt in (per device, cheap, idempotent) */
  CUDA_CHECK(cudaFuncSetAttribute(fa3_fwd_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)C::SMEM_BYTES));
  fa3_fwd_kernel<C><<<grid, C::THREADS, C::SMEM_BYTES, stream>>>(k);
  CUDA_LAUNCH_CHECK();
}

/* An 8-bit configuration C (QK8, and PV8 for fa3-fp8) on p: its
 * quantisation passes into the context c, then the persistent kernel. */
template <class C>
static void fa3_8bit_launch(kern_attn_fa3_int8 *c, const kern_attn_params *p,
                            cudaStream_t stream) {
  static_assert(C::QK8, "an 8-bit configuration");
  fa3_qk8_inputs in;
  fa3_int8_quantize(c, p, C::BM, C::BN, &in, stream);
  if constexpr (C::PV8) fa3_fp8_quantize_v(c, p, &in, stream);
  fa3_launch<C>(p, 1, stream, &in);
}

#endif
