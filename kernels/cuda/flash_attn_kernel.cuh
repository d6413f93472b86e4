/* The own flash attention kernel (kern_attn.h), as a template: exact softmax
 * attention without the L x L matrix, bf16 in, fp32 softmax and
 * accumulation, bf16 out. CUDA-only header: included by cuda_flash_attn.cu
 * (the kernel that ships) and by the benchmark variants of tests/gpu/dev/.
 *
 * One CTA owns a tile of BR query rows of one head (32 per warp) and streams
 * all keys of that head through shared memory in tiles of BC rows; each
 * tile is worked on in sub-tiles of SUB keys (SUB = BC, or BC / 2):
 *   S  = Q K_s^T              (mma.sync m16n8k16 bf16 -> fp32)
 *   m' = max(m, rowmax(S) * scale * log2 e)
 *   P  = exp2(S * scale * log2 e - m'), l = l * exp2(m - m') + rowsum(P)
 *   O  = O * exp2(m - m') + P V_s   (P rounded to bf16 for the mma)
 * and writes O / l at the end (FlashAttention-2's order of work). The
 * softmax scale is folded into the log2 domain so the exponential is one
 * ex2.approx per score (folding it into Q instead would save nothing: the
 * FFMA that applies it replaces the FADD that subtracts the max).
 *
 * Template parameters (the production instance, 4 warps, BC 64, SUB 64,
 * LAZY, "bc64-lazy", is launched by cuda_flash_attn.cu; the others are
 * benchmark variants in tests/gpu/dev/flash_variants.cu):
 * - BR 64/128/256 query rows per CTA (2/4/8 warps): more rows per CTA share
 *   each K/V tile loaded from L2; fewer keep two CTAs per SM;
 * - BC 32/64 keys per shared tile, so two barriers per BC keys;
 * - SUB: keys per register tile. S and P of a warp take MT * SUB / 2
 *   registers per thread, next to 128 for O; SUB 32 with BC 64 has the
 *   register footprint of 32-key tiles (no spill) and the barriers of 64;
 * - LAZY: O (64 registers per m-tile) is rescaled only when some row of the
 *   warp got a new max (a warp vote); after the first tiles a new max is
 *   rare. The correction is exactly 1 when the max did not change, so lazy
 *   and eager variants with the same SUB give bit-identical results.
 *
 * Data movement: K and V tiles are double-buffered with cp.async (16-byte
 * copies, zero-fill for rows past Lk); K_{j+1} loads during the softmax and
 * P V of tile j, V_j during S of tile j. Shared-memory rows are 256 bytes
 * (128 bf16); the 16-byte chunk c of row r sits at chunk c ^ (r & 7) so the
 * 8 row addresses of one ldmatrix hit 8 different bank groups.
 *
 * Tails: query rows past Lq are computed on zero-filled Q and not stored;
 * key columns past Lk get S = -inf before the row max, so they add 0 to the
 * sum and (V zero-filled) nothing to O; a sub-tile with no real key is
 * skipped. Every tile has at least one real key in its first sub-tile, so
 * the running max is always finite after it.
 *
 * Determinism: each output element is produced by one thread in a fixed
 * order of tiles and mma's; no atomics, so a rerun is bit-identical. */
#ifndef KERN_FLASH_ATTN_KERNEL_CUH
#define KERN_FLASH_ATTN_KERNEL_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "cuda_check.h"
#include "kern_attn.h"

/* ---- tile configuration ------------------------------------------------- */

/* MT m16 tiles per warp (2: each K/V fragment loaded from shared memory
 * feeds two mma's, halving shared-memory traffic per FLOP, as FA2 does; at
 * 1 the kernel would be bound by ldmatrix bandwidth), so 32 query rows per
 * warp and BR = 32 * warps. */
#define FA_HD 128
#define FA_MT 2
#define FA_ROWS_PER_WARP (16 * FA_MT)
#define FA_ROW_BYTES (FA_HD * 2)
#define FA_BR_MAX 256
#define FA_BC_MAX 64
/* Q tile, double-buffered K and V tiles */
#define FA_SMEM_BYTES(br, bc) ((br)*FA_ROW_BYTES + 4 * (bc)*FA_ROW_BYTES)

/* ---- device helpers ----------------------------------------------------- */

/* Byte offset of the 16-byte chunk `chunk` of shared row `row` (swizzled). */
__device__ __forceinline__ uint32_t fa_swz(int row, int chunk) {
  return (uint32_t)(row * FA_ROW_BYTES + ((chunk ^ (row & 7)) << 4));
}

__device__ __forceinline__ void fa_cp_async16(uint32_t dst, const void *src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes));
}
__device__ __forceinline__ void fa_cp_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void fa_cp_wait(void) {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void fa_ldsm_x4(uint32_t r[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void fa_ldsm_x4_t(uint32_t r[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/* d (16x8 fp32) += a (16x16 bf16, row) * b (16x8 bf16, col). */
__device__ __forceinline__ void fa_mma(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* 2^x with the hardware approximation (ex2.approx, 2 ulp, flushes
 * denormals): exp2f without fast-math is a slower library sequence.
 * 2^-inf = +0, which is what masked scores and the first tile need. */
__device__ __forceinline__ float fa_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/* Two fp32 -> one register of two bf16 (lo = first, round to nearest). */
__device__ __forceinline__ uint32_t fa_pack_bf16(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&h);
}

/* Copies `rows` rows of one head (global rows r0.., row stride `ld`
 * elements) into a swizzled shared tile; rows at or past `limit` are
 * zero-filled (src size 0, the source address clamped to row 0). */
template <int ROWS, int THREADS>
__device__ __forceinline__ void fa_load_tile(uint32_t smem, const __nv_bfloat16 *base, int ld,
                                             int r0, int limit, int tid) {
#pragma unroll
  for (int i = tid; i < ROWS * 16; i += THREADS) {
    int row = i >> 4, chunk = i & 15;
    int g = r0 + row;
    int ok = g < limit;
    const __nv_bfloat16 *src = base + (int64_t)(ok ? g : 0) * ld + chunk * 8;
    fa_cp_async16(smem + fa_swz(row, chunk), src, ok ? 16 : 0);
  }
}

/* ---- kernel ------------------------------------------------------------- */

/* grid (ceil(Lq / BR), heads): blockIdx.x fastest so the CTAs of one head
 * run together and share its K, V in L2. Launch bounds ask for 8 warps per
 * SM (two CTAs of 4 warps): with 255 registers that is what the register
 * file holds, so the bound only forbids the compiler from going above.
 * q (Lq, heads, 128), k, v (Lk, heads, 128), out (Lq, heads, 128), bf16.
 * One function on purpose (about 190 lines): the accumulators, row maxima
 * and sums live in registers across the whole key loop, and splitting the
 * loop body into calls would ask the compiler to keep them live across
 * call boundaries, which costs spills at 255 registers. */
template <int WARPS, int BC, int SUB, bool LAZY>
__global__ void __launch_bounds__(32 * WARPS, (8 / WARPS) > 0 ? 8 / WARPS : 1)
    fa_fwd_kernel(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
                  const __nv_bfloat16 *__restrict__ v, __nv_bfloat16 *__restrict__ out, int Lq,
                  int Lk, int heads, float scale_log2) {
  constexpr int THREADS = 32 * WARPS, BR = WARPS * FA_ROWS_PER_WARP, NSUB = BC / SUB;
  static_assert(BC % SUB == 0 && SUB % 16 == 0 && BC <= FA_BC_MAX && BR <= FA_BR_MAX,
                "tile shape");
  extern __shared__ __align__(128) unsigned char fa_smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3, mi = lane >> 3, lr = lane & 7;
  const int head = blockIdx.y, q0 = blockIdx.x * BR;
  const int ld = heads * FA_HD; /* < 2^31: checked by the launcher */
  const __nv_bfloat16 *qh = q + head * FA_HD, *kh = k + head * FA_HD, *vh = v + head * FA_HD;

  const uint32_t s_base = (uint32_t)__cvta_generic_to_shared(fa_smem);
  const uint32_t sQ = s_base;                     /* (BR, 128) */
  const uint32_t sK0 = sQ + BR * FA_ROW_BYTES;    /* 2 x (BC, 128) */
  const uint32_t sV0 = sK0 + 2 * BC * FA_ROW_BYTES; /* 2 x (BC, 128) */
  const uint32_t tileb = BC * FA_ROW_BYTES;

  const int ntiles = (int)((Lk + BC - 1) / BC);

  /* prologue: Q and K_0 in one group */
  fa_load_tile<BR, THREADS>(sQ, qh, ld, q0, Lq, tid);
  fa_load_tile<BC, THREADS>(sK0, kh, ld, 0, Lk, tid);
  fa_cp_commit();

  float o[FA_MT][FA_HD / 8][4]; /* (16 rows, 128) per m-tile, C fragments */
  float m[FA_MT][2], l[FA_MT][2]; /* rows g and g+8 of each m-tile */
#pragma unroll
  for (int a = 0; a < FA_MT; a++) {
#pragma unroll
    for (int d = 0; d < FA_HD / 8; d++) o[a][d][0] = o[a][d][1] = o[a][d][2] = o[a][d][3] = 0.f;
    m[a][0] = m[a][1] = -INFINITY;
    l[a][0] = l[a][1] = 0.f;
  }
  const int wrow = warp * FA_ROWS_PER_WARP; /* first Q row of this warp in the tile */

  for (int j = 0; j < ntiles; j++) {
    const uint32_t sK = sK0 + (j & 1) * tileb, sV = sV0 + (j & 1) * tileb;
    const int kb = j * BC;
    fa_load_tile<BC, THREADS>(sV, vh, ld, kb, Lk, tid);
    fa_cp_commit();
    fa_cp_wait<1>(); /* everything but V_j: Q (j = 0) and K_j are in */
    __syncthreads();
    /* K_{j+1} into the other buffer: its last reader (S_{j-1}) finished
     * before every warp passed the barrier above. Always commit a group so
     * the wait counts stay the same on the last tile. */
    if (j + 1 < ntiles) fa_load_tile<BC, THREADS>(sK0 + ((j + 1) & 1) * tileb, kh, ld, kb + BC, Lk, tid);
    fa_cp_commit();

    /* not unrolled: with two sub-tiles in one block the compiler overlaps
     * them and spills (28 bytes at SUB 32, BC 64) */
#pragma unroll 1
    for (int sb = 0; sb < NSUB; sb++) {
      const int k0 = sb * SUB; /* first key of the sub-tile within the tile */
      if (sb > 0 && kb + k0 >= Lk) break; /* no real key left: the last tile only */

      /* S = Q K_s^T, (32, SUB) per warp */
      float s[FA_MT][SUB / 8][4];
#pragma unroll
      for (int a = 0; a < FA_MT; a++)
#pragma unroll
        for (int n = 0; n < SUB / 8; n++) s[a][n][0] = s[a][n][1] = s[a][n][2] = s[a][n][3] = 0.f;
#pragma unroll
      for (int kc = 0; kc < FA_HD / 16; kc++) {
        uint32_t qa[FA_MT][4];
#pragma unroll
        for (int a = 0; a < FA_MT; a++)
          fa_ldsm_x4(qa[a], sQ + fa_swz(wrow + a * 16 + (mi & 1) * 8 + lr, kc * 2 + (mi >> 1)));
#pragma unroll
        for (int np = 0; np < SUB / 16; np++) {
          uint32_t kb4[4];
          fa_ldsm_x4(kb4, sK + fa_swz(k0 + np * 16 + (mi >> 1) * 8 + lr, kc * 2 + (mi & 1)));
#pragma unroll
          for (int a = 0; a < FA_MT; a++) {
            fa_mma(s[a][2 * np], qa[a], kb4[0], kb4[1]);
            fa_mma(s[a][2 * np + 1], qa[a], kb4[2], kb4[3]);
          }
        }
      }

      /* mask key columns past Lk (only the last tile can have them) */
      if (kb + k0 + SUB > Lk) {
#pragma unroll
        for (int n = 0; n < SUB / 8; n++) {
          int c = kb + k0 + n * 8 + 2 * t;
#pragma unroll
          for (int a = 0; a < FA_MT; a++) {
            if (c >= Lk) s[a][n][0] = s[a][n][2] = -INFINITY;
            if (c + 1 >= Lk) s[a][n][1] = s[a][n][3] = -INFINITY;
          }
        }
      }

      /* online softmax: P = exp2(...) goes to bf16 pairs as it is made, so
       * the fp32 scores die here and P V holds half their registers. corr
       * is exactly 1 when the max stays, so skipping the O rescale then
       * (LAZY) changes no bit of the result. */
      uint32_t pb[FA_MT][SUB / 8][2]; /* P of rows g, g+8: one A-fragment register each */
      float corr[FA_MT][2];
      int grew = 0;
#pragma unroll
      for (int a = 0; a < FA_MT; a++) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
          float mx = -INFINITY;
#pragma unroll
          for (int n = 0; n < SUB / 8; n++) mx = fmaxf(mx, fmaxf(s[a][n][2 * r], s[a][n][2 * r + 1]));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          const float mnew = fmaxf(m[a][r], mx * scale_log2); /* scale > 0 */
          grew |= mnew != m[a][r];
          corr[a][r] = mnew == m[a][r] ? 1.f : fa_exp2(m[a][r] - mnew); /* 0 on the first tile */
          m[a][r] = mnew;
          float sum = 0.f;
#pragma unroll
          for (int n = 0; n < SUB / 8; n++) {
            float p0 = fa_exp2(fmaf(s[a][n][2 * r], scale_log2, -mnew));
            float p1 = fa_exp2(fmaf(s[a][n][2 * r + 1], scale_log2, -mnew));
            pb[a][n][r] = fa_pack_bf16(p0, p1);
            sum += p0 + p1;
          }
          l[a][r] = l[a][r] * corr[a][r] + sum; /* this thread's columns; quad-reduced at the end */
        }
      }
      if (!LAZY || __any_sync(0xffffffffu, grew)) {
#pragma unroll
        for (int a = 0; a < FA_MT; a++)
#pragma unroll
          for (int d = 0; d < FA_HD / 8; d++) {
            o[a][d][0] *= corr[a][0];
            o[a][d][1] *= corr[a][0];
            o[a][d][2] *= corr[a][1];
            o[a][d][3] *= corr[a][1];
          }
      }

      if (sb == 0) {
        fa_cp_wait<1>(); /* V_j in; K_{j+1} may still be in flight */
        __syncthreads();
      }

      /* O += P V_s: P's C fragments of key tiles 2kk, 2kk+1 are the A
       * fragment of key chunk kk */
#pragma unroll
      for (int kk = 0; kk < SUB / 16; kk++) {
        uint32_t pa[FA_MT][4];
#pragma unroll
        for (int a = 0; a < FA_MT; a++) {
          pa[a][0] = pb[a][2 * kk][0];
          pa[a][1] = pb[a][2 * kk][1];
          pa[a][2] = pb[a][2 * kk + 1][0];
          pa[a][3] = pb[a][2 * kk + 1][1];
        }
#pragma unroll
        for (int dp = 0; dp < FA_HD / 16; dp++) {
          uint32_t vb[4];
          fa_ldsm_x4_t(vb, sV + fa_swz(k0 + kk * 16 + (mi & 1) * 8 + lr, dp * 2 + (mi >> 1)));
#pragma unroll
          for (int a = 0; a < FA_MT; a++) {
            fa_mma(o[a][2 * dp], pa[a], vb[0], vb[1]);
            fa_mma(o[a][2 * dp + 1], pa[a], vb[2], vb[3]);
          }
        }
      }
    }
    /* no barrier here: the next iteration writes V into the other buffer,
     * and its K/V buffers' readers are fenced by its first barrier */
  }
  fa_cp_wait<0>();

  /* O / l, bf16, rows past Lq dropped */
#pragma unroll
  for (int a = 0; a < FA_MT; a++) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
      float sum = l[a][r];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = 1.f / sum;
      const int row = q0 + wrow + a * 16 + g + 8 * r;
      if (row < Lq) {
        __nv_bfloat16 *dst = out + (int64_t)row * ld + head * FA_HD + 2 * t;
#pragma unroll
        for (int d = 0; d < FA_HD / 8; d++) {
          __nv_bfloat162 h = __floats2bfloat162_rn(o[a][d][2 * r] * inv, o[a][d][2 * r + 1] * inv);
          *reinterpret_cast<__nv_bfloat162 *>(dst + d * 8) = h;
        }
      }
    }
  }
}

/* ---- launch ------------------------------------------------------------- */

/* Launches one instance of the kernel on p (already checked by
 * kern_attn_flash_supported) on `stream`. */
template <int WARPS, int BC, int SUB, bool LAZY>
static void fa_launch(const kern_attn_params *p, cudaStream_t stream) {
  const float scale = p->scale > 0.f ? p->scale : 1.0f / sqrtf((float)p->hd);
  const float scale_log2 = scale * 1.4426950408889634f; /* log2(e) */
  const int br = WARPS * FA_ROWS_PER_WARP, threads = br / FA_ROWS_PER_WARP * 32;
  const int smem = FA_SMEM_BYTES(br, BC);
  dim3 grid((unsigned)((p->Lq + br - 1) / br), (unsigned)p->heads);
  const __nv_bfloat16 *q = reinterpret_cast<const __nv_bfloat16 *>(p->q);
  const __nv_bfloat16 *k = reinterpret_cast<const __nv_bfloat16 *>(p->k);
  const __nv_bfloat16 *v = reinterpret_cast<const __nv_bfloat16 *>(p->v);
  __nv_bfloat16 *o = reinterpret_cast<__nv_bfloat16 *>(p->out);
  /* above the 48 KiB default: opt in (per device, cheap, idempotent) */
  CUDA_CHECK(cudaFuncSetAttribute(fa_fwd_kernel<WARPS, BC, SUB, LAZY>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  fa_fwd_kernel<WARPS, BC, SUB, LAZY><<<grid, threads, smem, stream>>>(
      q, k, v, o, (int)p->Lq, (int)p->Lk, (int)p->heads, scale_log2);
  CUDA_LAUNCH_CHECK();
}

#endif
