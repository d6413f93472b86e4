/* Own flash attention (kern_attn.h): exact softmax attention without the
 * L x L matrix, bf16 in, fp32 softmax and accumulation, bf16 out.
 *
 * One CTA owns a tile of BR = 128 query rows of one head and streams all
 * keys of that head through shared memory in tiles of BC rows:
 *   S  = Q K_j^T              (mma.sync m16n8k16 bf16 -> fp32)
 *   m' = max(m, rowmax(S) * scale * log2 e)
 *   P  = exp2(S * scale * log2 e - m'), l = l * exp2(m - m') + rowsum(P)
 *   O  = O * exp2(m - m') + P V_j   (P rounded to bf16 for the mma)
 * and writes O / l at the end (FlashAttention-2's order of work). The
 * softmax scale is folded into the log2 domain so the exponential is one
 * ex2.approx per score.
 *
 * Data movement: K and V tiles are double-buffered with cp.async (16-byte
 * copies, zero-fill for rows past Lk), the next K tile loads while the
 * current tile's softmax and P V run. Shared-memory rows are 256 bytes
 * (128 bf16); the 16-byte chunk c of row r sits at chunk c ^ (r & 7) so the
 * 8 row addresses of one ldmatrix hit 8 different bank groups.
 *
 * Tails: query rows past Lq are computed on zero-filled Q and not stored;
 * key columns past Lk get S = -inf before the row max, so they add 0 to the
 * sum and (V zero-filled) nothing to O. Every tile has at least one real
 * key, so the running max is always finite.
 *
 * Determinism: each output element is produced by one thread in a fixed
 * order of tiles and mma's; no atomics, so a rerun is bit-identical. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_check.h"
#include "kern_attn.h"

/* ---- tile configuration ------------------------------------------------- */

/* MT m16 tiles per warp (2: each K/V fragment loaded from shared memory
 * feeds two mma's, halving shared-memory traffic per FLOP, as FA2 does);
 * BR = 128 query rows per CTA, so 128 / (16 * MT) warps; FA_BC keys per
 * tile, a template parameter: 64 (the default; 255 registers, a few bytes
 * spilled) or 32 (228 registers, no spill, twice the barriers), chosen at
 * run time by STATICPIPE_FLASH_BC=32|64 so both can be timed on a GPU. */
#define FA_HD 128
#define FA_BR 128
#define FA_MT 2
#define FA_WARPS (FA_BR / (16 * FA_MT))
#define FA_THREADS (32 * FA_WARPS)
#define FA_ROW_BYTES (FA_HD * 2)
/* Q tile, double-buffered K and V tiles */
#define FA_SMEM_BYTES(bc) (FA_BR * FA_ROW_BYTES + 4 * (bc)*FA_ROW_BYTES)

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
template <int ROWS>
__device__ __forceinline__ void fa_load_tile(uint32_t smem, const __nv_bfloat16 *base, int ld,
                                             int r0, int limit, int tid) {
#pragma unroll
  for (int i = tid; i < ROWS * 16; i += FA_THREADS) {
    int row = i >> 4, chunk = i & 15;
    int g = r0 + row;
    int ok = g < limit;
    const __nv_bfloat16 *src = base + (int64_t)(ok ? g : 0) * ld + chunk * 8;
    fa_cp_async16(smem + fa_swz(row, chunk), src, ok ? 16 : 0);
  }
}

/* ---- kernel ------------------------------------------------------------- */

/* grid (ceil(Lq / BR), heads): blockIdx.x fastest so the CTAs of one head
 * run together and share its K, V in L2.
 * q (Lq, heads, 128), k, v (Lk, heads, 128), out (Lq, heads, 128), bf16. */
template <int FA_BC>
__global__ void __launch_bounds__(FA_THREADS)
    fa_fwd_kernel(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
                  const __nv_bfloat16 *__restrict__ v, __nv_bfloat16 *__restrict__ out, int Lq,
                  int Lk, int heads, float scale_log2) {
  extern __shared__ __align__(128) unsigned char fa_smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3, mi = lane >> 3, lr = lane & 7;
  const int head = blockIdx.y, q0 = blockIdx.x * FA_BR;
  const int ld = heads * FA_HD; /* < 2^31: checked by the launcher */
  const __nv_bfloat16 *qh = q + head * FA_HD, *kh = k + head * FA_HD, *vh = v + head * FA_HD;

  const uint32_t s_base = (uint32_t)__cvta_generic_to_shared(fa_smem);
  const uint32_t sQ = s_base;                            /* (BR, 128) */
  const uint32_t sK0 = sQ + FA_BR * FA_ROW_BYTES;        /* 2 x (BC, 128) */
  const uint32_t sV0 = sK0 + 2 * FA_BC * FA_ROW_BYTES;   /* 2 x (BC, 128) */
  const uint32_t tileb = FA_BC * FA_ROW_BYTES;

  const int ntiles = (int)((Lk + FA_BC - 1) / FA_BC);

  /* prologue: Q and K_0 in one group */
  fa_load_tile<FA_BR>(sQ, qh, ld, q0, Lq, tid);
  fa_load_tile<FA_BC>(sK0, kh, ld, 0, Lk, tid);
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
  const int wrow = warp * 16 * FA_MT; /* first Q row of this warp in the tile */

  for (int j = 0; j < ntiles; j++) {
    const uint32_t sK = sK0 + (j & 1) * tileb, sV = sV0 + (j & 1) * tileb;
    const int kb = j * FA_BC;
    fa_load_tile<FA_BC>(sV, vh, ld, kb, Lk, tid);
    fa_cp_commit();
    fa_cp_wait<1>(); /* everything but V_j: Q (j = 0) and K_j are in */
    __syncthreads();

    /* S = Q K_j^T, (16*MT, BC) per warp */
    float s[FA_MT][FA_BC / 8][4];
#pragma unroll
    for (int a = 0; a < FA_MT; a++)
#pragma unroll
      for (int n = 0; n < FA_BC / 8; n++) s[a][n][0] = s[a][n][1] = s[a][n][2] = s[a][n][3] = 0.f;
#pragma unroll
    for (int kc = 0; kc < FA_HD / 16; kc++) {
      uint32_t qa[FA_MT][4];
#pragma unroll
      for (int a = 0; a < FA_MT; a++)
        fa_ldsm_x4(qa[a], sQ + fa_swz(wrow + a * 16 + (mi & 1) * 8 + lr, kc * 2 + (mi >> 1)));
#pragma unroll
      for (int np = 0; np < FA_BC / 16; np++) {
        uint32_t kb4[4];
        fa_ldsm_x4(kb4, sK + fa_swz(np * 16 + (mi >> 1) * 8 + lr, kc * 2 + (mi & 1)));
#pragma unroll
        for (int a = 0; a < FA_MT; a++) {
          fa_mma(s[a][2 * np], qa[a], kb4[0], kb4[1]);
          fa_mma(s[a][2 * np + 1], qa[a], kb4[2], kb4[3]);
        }
      }
    }

    /* K_{j+1} into the other buffer: its last reader (S_{j-1}) finished
     * before every warp passed the barrier above. Always commit a group so
     * the wait counts below stay the same on the last tile. */
    if (j + 1 < ntiles) fa_load_tile<FA_BC>(sK0 + ((j + 1) & 1) * tileb, kh, ld, kb + FA_BC, Lk, tid);
    fa_cp_commit();

    /* mask key columns past Lk (only the last tile can have them) */
    if (kb + FA_BC > Lk) {
#pragma unroll
      for (int n = 0; n < FA_BC / 8; n++) {
        int c = kb + n * 8 + 2 * t;
#pragma unroll
        for (int a = 0; a < FA_MT; a++) {
          if (c >= Lk) s[a][n][0] = s[a][n][2] = -INFINITY;
          if (c + 1 >= Lk) s[a][n][1] = s[a][n][3] = -INFINITY;
        }
      }
    }

    /* online softmax, in place: s becomes P (fp32) */
#pragma unroll
    for (int a = 0; a < FA_MT; a++) {
#pragma unroll
      for (int r = 0; r < 2; r++) {
        float mx = -INFINITY;
#pragma unroll
        for (int n = 0; n < FA_BC / 8; n++) mx = fmaxf(mx, fmaxf(s[a][n][2 * r], s[a][n][2 * r + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mnew = fmaxf(m[a][r], mx * scale_log2); /* scale > 0 */
        const float corr = fa_exp2(m[a][r] - mnew);           /* 0 on the first tile */
        m[a][r] = mnew;
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < FA_BC / 8; n++) {
          float p0 = fa_exp2(fmaf(s[a][n][2 * r], scale_log2, -mnew));
          float p1 = fa_exp2(fmaf(s[a][n][2 * r + 1], scale_log2, -mnew));
          s[a][n][2 * r] = p0;
          s[a][n][2 * r + 1] = p1;
          sum += p0 + p1;
        }
        l[a][r] = l[a][r] * corr + sum; /* this thread's columns; quad-reduced at the end */
#pragma unroll
        for (int d = 0; d < FA_HD / 8; d++) {
          o[a][d][2 * r] *= corr;
          o[a][d][2 * r + 1] *= corr;
        }
      }
    }

    fa_cp_wait<1>(); /* V_j in; K_{j+1} may still be in flight */
    __syncthreads();

    /* O += P V_j: P's C fragments of key tiles 2kk, 2kk+1 are the A
     * fragment of key chunk kk */
#pragma unroll
    for (int kk = 0; kk < FA_BC / 16; kk++) {
      uint32_t pa[FA_MT][4];
#pragma unroll
      for (int a = 0; a < FA_MT; a++) {
        pa[a][0] = fa_pack_bf16(s[a][2 * kk][0], s[a][2 * kk][1]);
        pa[a][1] = fa_pack_bf16(s[a][2 * kk][2], s[a][2 * kk][3]);
        pa[a][2] = fa_pack_bf16(s[a][2 * kk + 1][0], s[a][2 * kk + 1][1]);
        pa[a][3] = fa_pack_bf16(s[a][2 * kk + 1][2], s[a][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < FA_HD / 16; dp++) {
        uint32_t vb[4];
        fa_ldsm_x4_t(vb, sV + fa_swz(kk * 16 + (mi & 1) * 8 + lr, dp * 2 + (mi >> 1)));
#pragma unroll
        for (int a = 0; a < FA_MT; a++) {
          fa_mma(o[a][2 * dp], pa[a], vb[0], vb[1]);
          fa_mma(o[a][2 * dp + 1], pa[a], vb[2], vb[3]);
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

/* ---- launcher ----------------------------------------------------------- */

/* Keys per tile: STATICPIPE_FLASH_BC (32 or 64), read on every call so a
 * benchmark can switch it; anything else, or unset, is 64. */
static int fa_tile_keys(void) {
  const char *e = getenv("STATICPIPE_FLASH_BC");
  return (e && e[0] == '3' && e[1] == '2' && e[2] == 0) ? 32 : 64;
}

extern "C" int kern_attn_flash_supported(const kern_attn_params *p, char *why, size_t why_len) {
  char tmp[2];
  if (!why) {
    why = tmp;
    why_len = sizeof tmp;
  }
  if (p->hd != FA_HD) {
    snprintf(why, why_len, "head dim %lld: flash supports %d only", (long long)p->hd, FA_HD);
    return 0;
  }
  if (p->Lq < 1 || p->Lk < 1 || p->heads < 1) {
    snprintf(why, why_len, "Lq %lld, Lk %lld, heads %lld: all must be >= 1", (long long)p->Lq,
             (long long)p->Lk, (long long)p->heads);
    return 0;
  }
  /* grid.x and grid.y limits; 64-bit offsets inside the kernel */
  /* 32-bit row indices in the kernel (offsets are 64-bit): Lq, Lk + one
   * tile and heads * 128 below 2^31; heads is grid.y */
  if (p->Lq > 2147483647LL - FA_BR || p->Lk > 2147483647LL - 64 || p->heads > 65535) {
    snprintf(why, why_len, "Lq %lld, Lk %lld, heads %lld: beyond 2^31 - 128 rows or 65535 heads",
             (long long)p->Lq, (long long)p->Lk, (long long)p->heads);
    return 0;
  }
  if (!p->q || !p->k || !p->v || !p->out) {
    snprintf(why, why_len, "a NULL q, k, v or out pointer");
    return 0;
  }
  if ((((uintptr_t)p->q | (uintptr_t)p->k | (uintptr_t)p->v | (uintptr_t)p->out) & 15u) != 0) {
    snprintf(why, why_len, "q, k, v, out must be 16-byte aligned (cp.async)");
    return 0;
  }
  if (!(p->scale >= 0.f) || isinf(p->scale)) { /* 0 means 1/sqrt(hd); NaN refused */
    snprintf(why, why_len, "scale %g: must be finite and > 0 (0 picks 1/sqrt(hd))",
             (double)p->scale);
    return 0;
  }
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    snprintf(why, why_len, "no CUDA device");
    return 0;
  }
  if (major < 8) {
    snprintf(why, why_len, "device %d is sm_%d*: flash needs sm_80 or later (bf16 mma.sync)",
             dev, major);
    return 0;
  }
  return 1;
}

extern "C" void kern_attn_flash(kern_attn_params p, cudaStream_t stream) {
  char why[160];
  if (!kern_attn_flash_supported(&p, why, sizeof why)) sp_fatal("attention (flash): %s", why);
  const float scale = p.scale > 0.f ? p.scale : 1.0f / sqrtf((float)p.hd);
  const float scale_log2 = scale * 1.4426950408889634f; /* log2(e) */
  dim3 grid((unsigned)((p.Lq + FA_BR - 1) / FA_BR), (unsigned)p.heads);
  const __nv_bfloat16 *q = reinterpret_cast<const __nv_bfloat16 *>(p.q);
  const __nv_bfloat16 *k = reinterpret_cast<const __nv_bfloat16 *>(p.k);
  const __nv_bfloat16 *v = reinterpret_cast<const __nv_bfloat16 *>(p.v);
  __nv_bfloat16 *o = reinterpret_cast<__nv_bfloat16 *>(p.out);
  /* above the 48 KiB default: opt in (per device, cheap, idempotent) */
  if (fa_tile_keys() == 32) {
    CUDA_CHECK(cudaFuncSetAttribute(fa_fwd_kernel<32>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    FA_SMEM_BYTES(32)));
    fa_fwd_kernel<32><<<grid, FA_THREADS, FA_SMEM_BYTES(32), stream>>>(
        q, k, v, o, (int)p.Lq, (int)p.Lk, (int)p.heads, scale_log2);
  } else {
    CUDA_CHECK(cudaFuncSetAttribute(fa_fwd_kernel<64>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    FA_SMEM_BYTES(64)));
    fa_fwd_kernel<64><<<grid, FA_THREADS, FA_SMEM_BYTES(64), stream>>>(
        q, k, v, o, (int)p.Lq, (int)p.Lk, (int)p.heads, scale_log2);
  }
  CUDA_LAUNCH_CHECK();
}
