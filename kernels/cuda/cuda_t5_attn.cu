/* The UMT5 encoder's self-attention (kern_cuda_t5.h): a flash-style kernel
 * that adds T5's relative-position bias to the scores inside the tile loop,
 * so neither the L x L scores nor an L x L x heads bias tensor is ever
 * stored.
 *
 * One CTA owns 64 query rows of one head (4 warps of 16 rows) and streams
 * the head's keys through shared memory in tiles of 64:
 *   S  = Q K^T                      (mma.sync m16n8k16 bf16 -> fp32)
 *   S += bias[j - i + L - 1]        (per head, fp32, from the bucket table)
 *   m' = max(m, rowmax(S) log2 e)
 *   P  = exp2(S log2 e - m'),  l = l exp2(m - m') + rowsum(P)
 *   O  = O exp2(m - m') + P V       (P rounded to bf16 for the mma)
 * and writes O / l in bf16 (FlashAttention-2's order of work, as the own
 * flash kernel flash_attn_kernel.cuh does; T5 has no 1/sqrt(hd) scale).
 *
 * The bias: before the loop the CTA turns the sequence's bucket table
 * (2L - 1 int32, bucket[j - i + L - 1]) and its head's column of the
 * layer's position embedding (n_buckets, heads) into one fp32 row of 2L - 1
 * biases in shared memory; a score then adds its entry. That is the CPU's
 * arithmetic (kern_cpu_attention_relbias: q.k, then + bias, in fp32).
 *
 * Head widths: the kernel is instantiated for padded widths HDP of 16, 32,
 * 64 and 128 (UMT5-XXL 64, the tiny synthetic encoder 16) and runs any
 * hd <= 128 on the smallest HDP >= hd: columns hd..HDP-1 are zero in shared
 * memory, so they add nothing to q.k and their outputs are not stored.
 * Shared-memory rows are HDP * 2 + 16 bytes, so the 8 rows an ldmatrix reads
 * start in 8 different 16-byte bank groups at every HDP. Rows come in as
 * 16-byte cp.async copies when hd is a multiple of 8 and the pointers are
 * 16-byte aligned (the encoder's buffers always are), else element by
 * element; the output goes out in bf16 pairs in the first case, one value at
 * a time in the second.
 *
 * Tails: query rows past L are computed on zero rows and not stored (their
 * bias index is clamped into the table); keys past L get S = -inf, so they
 * add 0 to l and (V zero-filled) nothing to O. Every key tile holds a real
 * key, so the running max is finite after the first tile.
 *
 * Determinism: every output element is made by one thread in a fixed order
 * of tiles and mma's, no atomics: a rerun is bit-identical. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "cuda_check.h"
#include "kern_cuda_t5.h"

#define T5A_WARPS 4
#define T5A_THREADS (32 * T5A_WARPS)
#define T5A_BR (16 * T5A_WARPS) /* query rows per CTA: 16 per warp */
#define T5A_BC 64               /* keys per tile */
#define T5A_HD_MAX 128
#define T5A_TAB (2 * KERN_CUDA_T5_MAX_LEN) /* biases of one head, 2L - 1 used */

/* Shared-memory row bytes and the bytes of one CTA (Q tile, K tile, V
 * tile, the bias row). */
#define T5A_ROW(hdp) ((hdp)*2 + 16)
#define T5A_SMEM(hdp) ((T5A_BR + 2 * T5A_BC) * T5A_ROW(hdp) + T5A_TAB * 4)

/* ---- device helpers ----------------------------------------------------- */

__device__ __forceinline__ void t5a_cp16(uint32_t dst, const void *src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes));
}
__device__ __forceinline__ void t5a_cp_wait_all(void) {
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::);
}
__device__ __forceinline__ void t5a_ldsm(uint32_t r[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void t5a_ldsm_t(uint32_t r[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
/* d (16x8 fp32) += a (16x16 bf16, row) * b (16x8 bf16, col). */
__device__ __forceinline__ void t5a_mma(float d[4], const uint32_t a[4], uint32_t b0,
                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
/* 2^x (ex2.approx, 2 ulp); 2^-inf = +0 for masked keys and the first tile. */
__device__ __forceinline__ float t5a_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ uint32_t t5a_pack(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&h);
}

/* Rows r0 .. r0 + ROWS - 1 of one head (base: row 0, column 0 of the head;
 * row stride ld elements) into a shared tile of HDP columns; rows at or past
 * `limit` and columns at or past hd are zero. vec: 16-byte cp.async copies
 * (hd a multiple of 8, 16-byte aligned rows), else element by element.
 * Complete (and visible to the CTA) after the caller's t5a_cp_wait_all and
 * barrier. */
template <int HDP, int ROWS>
__device__ __forceinline__ void t5a_load(uint32_t s, uint16_t *sp, const uint16_t *base, int64_t ld,
                                         int r0, int limit, int hd, int vec, int tid) {
  constexpr int CH = HDP / 8; /* 16-byte chunks per shared row */
  if (vec) {
    for (int i = tid; i < ROWS * CH; i += T5A_THREADS) {
      const int row = i / CH, ch = i % CH, g = r0 + row;
      const int ok = g < limit && ch * 8 < hd;
      const uint16_t *src = base + (ok ? (int64_t)g * ld + ch * 8 : 0);
      t5a_cp16(s + (uint32_t)(row * T5A_ROW(HDP) + ch * 16), src, ok ? 16 : 0);
    }
  } else {
    for (int i = tid; i < ROWS * HDP; i += T5A_THREADS) {
      const int row = i / HDP, d = i % HDP, g = r0 + row;
      sp[row * (T5A_ROW(HDP) / 2) + d] = g < limit && d < hd ? base[(int64_t)g * ld + d] : 0;
    }
  }
}

/* ---- kernel ------------------------------------------------------------- */

/* grid (ceil(L / 64), heads). q, k, v, out (L, heads, hd) bf16; pos
 * (n_buckets, heads) bf16; bucket (2L - 1) int32. One function on purpose:
 * the accumulators, maxima and sums stay in registers across the key loop. */
template <int HDP>
__global__ void __launch_bounds__(T5A_THREADS)
    t5a_kernel(const uint16_t *__restrict__ q, const uint16_t *__restrict__ k,
               const uint16_t *__restrict__ v, const uint16_t *__restrict__ pos,
               const int32_t *__restrict__ bucket, uint16_t *__restrict__ out, int L, int heads,
               int hd, int vec) {
  constexpr int SROW = T5A_ROW(HDP), KC = HDP / 16, NT = T5A_BC / 8;
  extern __shared__ __align__(128) unsigned char t5a_smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3, mi = lane >> 3, lr = lane & 7;
  const int h = blockIdx.y, q0 = blockIdx.x * T5A_BR, wrow = warp * 16;
  const int64_t ld = (int64_t)heads * hd;
  const float LOG2E = 1.4426950408889634f;

  uint16_t *pQ = reinterpret_cast<uint16_t *>(t5a_smem);
  uint16_t *pK = pQ + T5A_BR * (SROW / 2);
  uint16_t *pV = pK + T5A_BC * (SROW / 2);
  float *tab = reinterpret_cast<float *>(pV + T5A_BC * (SROW / 2)); /* (2L - 1) */
  const uint32_t sQ = (uint32_t)__cvta_generic_to_shared(pQ);
  const uint32_t sK = (uint32_t)__cvta_generic_to_shared(pK);
  const uint32_t sV = (uint32_t)__cvta_generic_to_shared(pV);

  t5a_load<HDP, T5A_BR>(sQ, pQ, q + (int64_t)h * hd, ld, q0, L, hd, vec, tid);
  for (int r = tid; r < 2 * L - 1; r += T5A_THREADS)
    tab[r] = __bfloat162float(
        reinterpret_cast<const __nv_bfloat16 *>(pos)[(int64_t)bucket[r] * heads + h]);
  t5a_cp_wait_all();
  __syncthreads();

  /* this warp's 16 query rows as A fragments, kept for every key tile */
  uint32_t qa[KC][4];
#pragma unroll
  for (int kc = 0; kc < KC; kc++)
    t5a_ldsm(qa[kc], sQ + (uint32_t)((wrow + (mi & 1) * 8 + lr) * SROW + (kc * 2 + (mi >> 1)) * 16));
  /* the bias rows of query rows g and g + 8 (clamped: rows past L are not stored) */
  const int row0 = min(q0 + wrow + g, L - 1), row1 = min(q0 + wrow + g + 8, L - 1);
  const float *tab0 = tab + (L - 1 - row0), *tab1 = tab + (L - 1 - row1);

  float o[HDP / 8][4];
#pragma unroll
  for (int d = 0; d < HDP / 8; d++) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  for (int j0 = 0; j0 < L; j0 += T5A_BC) {
    __syncthreads(); /* every warp is done with the previous K and V tiles */
    t5a_load<HDP, T5A_BC>(sK, pK, k + (int64_t)h * hd, ld, j0, L, hd, vec, tid);
    t5a_load<HDP, T5A_BC>(sV, pV, v + (int64_t)h * hd, ld, j0, L, hd, vec, tid);
    t5a_cp_wait_all();
    __syncthreads();

    /* S = Q K^T, (16, 64) per warp */
    float s[NT][4];
#pragma unroll
    for (int n = 0; n < NT; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int kc = 0; kc < KC; kc++)
#pragma unroll
      for (int np = 0; np < NT / 2; np++) {
        uint32_t kb[4];
        t5a_ldsm(kb, sK + (uint32_t)((np * 16 + (mi >> 1) * 8 + lr) * SROW + (kc * 2 + (mi & 1)) * 16));
        t5a_mma(s[2 * np], qa[kc], kb[0], kb[1]);
        t5a_mma(s[2 * np + 1], qa[kc], kb[2], kb[3]);
      }

    /* + bias, keys past L masked; then the online softmax in the log2
     * domain, P packed to bf16 as it is made */
    uint32_t pb[NT][2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const float *tr = r ? tab1 : tab0;
      float mx = -INFINITY;
#pragma unroll
      for (int n = 0; n < NT; n++) {
        const int c = j0 + n * 8 + 2 * t;
        s[n][2 * r] = c < L ? s[n][2 * r] + tr[c] : -INFINITY;
        s[n][2 * r + 1] = c + 1 < L ? s[n][2 * r + 1] + tr[c + 1] : -INFINITY;
        mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mnew = fmaxf(m[r], mx * LOG2E);
      /* 0 on the first tile (2^-inf), exactly 1 when the max stays */
      const float corr = mnew == m[r] ? 1.f : t5a_exp2(m[r] - mnew);
      m[r] = mnew;
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < NT; n++) {
        const float p0 = t5a_exp2(fmaf(s[n][2 * r], LOG2E, -mnew));
        const float p1 = t5a_exp2(fmaf(s[n][2 * r + 1], LOG2E, -mnew));
        pb[n][r] = t5a_pack(p0, p1);
        sum += p0 + p1;
      }
      l[r] = l[r] * corr + sum; /* this thread's columns; quad-reduced at the end */
#pragma unroll
      for (int d = 0; d < HDP / 8; d++) {
        o[d][2 * r] *= corr;
        o[d][2 * r + 1] *= corr;
      }
    }

    /* O += P V: P's C fragments of key tiles 2kk, 2kk + 1 are the A
     * fragment of key chunk kk */
#pragma unroll
    for (int kk = 0; kk < T5A_BC / 16; kk++) {
      const uint32_t pa[4] = {pb[2 * kk][0], pb[2 * kk][1], pb[2 * kk + 1][0], pb[2 * kk + 1][1]};
#pragma unroll
      for (int dp = 0; dp < HDP / 16; dp++) {
        uint32_t vb[4];
        t5a_ldsm_t(vb, sV + (uint32_t)((kk * 16 + (mi & 1) * 8 + lr) * SROW + (dp * 2 + (mi >> 1)) * 16));
        t5a_mma(o[2 * dp], pa, vb[0], vb[1]);
        t5a_mma(o[2 * dp + 1], pa, vb[2], vb[3]);
      }
    }
  }

  /* O / l in bf16: rows past L and columns past hd dropped */
#pragma unroll
  for (int r = 0; r < 2; r++) {
    float sum = l[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = 1.f / sum;
    const int row = q0 + wrow + g + 8 * r;
    if (row >= L) continue;
    __nv_bfloat16 *dst = reinterpret_cast<__nv_bfloat16 *>(out) + (int64_t)row * ld +
                         (int64_t)h * hd;
#pragma unroll
    for (int d8 = 0; d8 < HDP / 8; d8++) {
      const int d = d8 * 8 + 2 * t;
      const float a = o[d8][2 * r] * inv, b = o[d8][2 * r + 1] * inv;
      if (vec) { /* hd a multiple of 8: both columns real, 4-byte aligned */
        if (d < hd) *reinterpret_cast<__nv_bfloat162 *>(dst + d) = __floats2bfloat162_rn(a, b);
      } else {
        if (d < hd) dst[d] = __float2bfloat16_rn(a);
        if (d + 1 < hd) dst[d + 1] = __float2bfloat16_rn(b);
      }
    }
  }
}

/* ---- launcher ------------------------------------------------------------ */

template <int HDP>
static void t5a_launch(const uint16_t *q, const uint16_t *k, const uint16_t *v,
                       const uint16_t *pos, const int32_t *bucket, uint16_t *out, int L,
                       int heads, int hd, int vec, cudaStream_t stream) {
  const int smem = T5A_SMEM(HDP);
  /* above the 48 KiB default at HDP 128: opt in (cheap, idempotent) */
  CUDA_CHECK(cudaFuncSetAttribute(t5a_kernel<HDP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  smem));
  dim3 grid((unsigned)((L + T5A_BR - 1) / T5A_BR), (unsigned)heads);
  t5a_kernel<HDP><<<grid, T5A_THREADS, smem, stream>>>(q, k, v, pos, bucket, out, L, heads, hd,
                                                       vec);
  CUDA_LAUNCH_CHECK();
}

extern "C" void kern_cuda_t5_attention(const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                       const uint16_t *pos, const int32_t *bucket, uint16_t *out,
                                       int64_t L, int64_t heads, int64_t hd,
                                       cudaStream_t stream) {
  if (L < 1 || L > KERN_CUDA_T5_MAX_LEN || heads < 1 || heads > 65535 || hd < 1 ||
      hd > KERN_CUDA_T5_MAX_HD)
    sp_fatal("t5 attention: %lld tokens, %lld heads of %lld: accepted 1..%d tokens, heads up to "
             "65535, head width up to %d",
             (long long)L, (long long)heads, (long long)hd, KERN_CUDA_T5_MAX_LEN,
             KERN_CUDA_T5_MAX_HD);
  const uintptr_t addr = (uintptr_t)q | (uintptr_t)k | (uintptr_t)v | (uintptr_t)out;
  const int vec = hd % 8 == 0 && (addr & 15u) == 0;
  const int n = (int)L, nh = (int)heads, w = (int)hd;
  if (hd <= 16)
    t5a_launch<16>(q, k, v, pos, bucket, out, n, nh, w, vec, stream);
  else if (hd <= 32)
    t5a_launch<32>(q, k, v, pos, bucket, out, n, nh, w, vec, stream);
  else if (hd <= 64)
    t5a_launch<64>(q, k, v, pos, bucket, out, n, nh, w, vec, stream);
  else
    t5a_launch<T5A_HD_MAX>(q, k, v, pos, bucket, out, n, nh, w, vec, stream);
}

static_assert(T5A_HD_MAX == KERN_CUDA_T5_MAX_HD, "the widest instance is the header's limit");
