/* The row kernels' common parts, as a CUDA-only header (every function
 * static or inline, so each translation unit keeps its own copy): the
 * fixed-order block reductions, 16-byte chunks of 8 values to and from
 * registers, the work split of a row held in registers (a CTA per row, nv
 * chunks a thread), the per-token quantisers' rule for one value, and the
 * per-token quantiser of bf16 rows held in registers.
 * Included by row_kernels.cuh (the residual stream's row ops) and by the
 * per-row quantisers (cuda_fp8.cu, cuda_quant.cu). */
#ifndef KERN_ROW_COMMON_CUH
#define KERN_ROW_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <math.h>
#include <stdint.h>

#include "cuda_check.h"
#include "kern_dtype.h"
#include "kern_quant.h"

#define ROW_VEC 8          /* elements per chunk: 16 bytes of bf16, 32 of fp32 */
#define ROW_MAX_THREADS 512 /* 128 registers a thread: room for 8 chunks */

/* Sum over the CTA (blockDim.x a multiple of 32), same order every call;
 * the result is broadcast to all threads. red: 32 floats of shared memory. */
static __device__ float block_sum(float v, float *red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  __syncthreads(); /* red may still be read by the previous call */
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float s = 0.0f;
  for (int i = 0; i < nwarps; i++) s += red[i];
  return s;
}

/* Max over the CTA, as block_sum; values >= 0 (a max is exact in any order). */
static __device__ float block_max(float v, float *red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  __syncthreads(); /* red may still be read by the previous call */
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float m = 0.0f;
  for (int i = 0; i < nwarps; i++) m = fmaxf(m, red[i]);
  return m;
}

/* The per-token quantisers' rule for one value of a row: e4m3 (cuda_fp8.cu,
 * kern_fp8_quant_mul) or int8 (cuda_quant.cu, kern_i8_quant_mul), v the
 * bf16 value widened, mul the row's factor. */
__device__ __forceinline__ uint8_t row_code(int e4m3, float v, float mul) {
  if (e4m3) return (uint8_t)__nv_cvt_float_to_fp8(v * mul, __NV_SATFINITE, __NV_E4M3);
  return (uint8_t)kern_i8_code(v * mul);
}
__device__ __forceinline__ float row_quant_mul(int e4m3, float amax) {
  return e4m3 ? kern_fp8_quant_mul(amax) : kern_i8_quant_mul(amax);
}
__device__ __forceinline__ float row_quant_scale(int e4m3, float amax) {
  return e4m3 ? kern_fp8_scale(amax) : kern_i8_scale(amax);
}
/* The codes of 8 values (bf16-valued) of a row of factor mul, in one
 * 8-byte store; p 8-byte aligned. */
__device__ __forceinline__ void store_codes8(uint8_t *p, const float v[ROW_VEC], int e4m3,
                                             float mul) {
  uint32_t lo = 0, hi = 0; /* the first code in the lowest byte: first in memory */
  for (int i = 0; i < 4; i++) {
    lo |= (uint32_t)row_code(e4m3, v[i], mul) << (8 * i);
    hi |= (uint32_t)row_code(e4m3, v[i + 4], mul) << (8 * i);
  }
  *reinterpret_cast<uint2 *>(p) = make_uint2(lo, hi);
}
/* v rounded to bf16 (nearest even) and widened back: what a reader of h sees. */
__device__ __forceinline__ float bf16_round(float v) {
  return __bfloat162float(__float2bfloat16_rn(v));
}

__device__ __forceinline__ float load_f(const float *p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load_f(const __nv_bfloat16 *p, int64_t i) {
  return __bfloat162float(p[i]);
}

/* 8 consecutive elements <-> fp32 registers; p 16-byte aligned. */
__device__ __forceinline__ void load8(const float *p, float v[ROW_VEC]) {
  const float4 a = reinterpret_cast<const float4 *>(p)[0];
  const float4 b = reinterpret_cast<const float4 *>(p)[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
  v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
/* 8 bf16 values as loaded (16 bytes) -> fp32, exactly. */
__device__ __forceinline__ void unpack8(const uint4 u, float v[ROW_VEC]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
  for (int i = 0; i < 4; i++) { /* the lower half is the element first in memory */
    v[2 * i] = __uint_as_float(w[i] << 16);
    v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
__device__ __forceinline__ void load8(const __nv_bfloat16 *p, float v[ROW_VEC]) {
  unpack8(*reinterpret_cast<const uint4 *>(p), v);
}
__device__ __forceinline__ void store8(float *p, const float v[ROW_VEC]) {
  reinterpret_cast<float4 *>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4 *>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi); /* nearest even, as _rn */
  return *reinterpret_cast<const uint32_t *>(&h);
}
__device__ __forceinline__ void store8(__nv_bfloat16 *p, const float v[ROW_VEC]) {
  *reinterpret_cast<uint4 *>(p) = make_uint4(pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]),
                                             pack_bf16x2(v[4], v[5]), pack_bf16x2(v[6], v[7]));
}
/* Pairwise: a shorter dependency chain than eight adds in a row. */
__device__ __forceinline__ float sum8(const float v[ROW_VEC]) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

/* A chunk's 8 values as fp32: chunks held as computed (fp32) or as loaded
 * (8 bf16 in 16 bytes, widened exactly). */
__device__ __forceinline__ void chunk8(const float (&c)[ROW_VEC], float v[ROW_VEC]) {
  for (int i = 0; i < ROW_VEC; i++) v[i] = c[i];
}
__device__ __forceinline__ void chunk8(const uint4 &c, float v[ROW_VEC]) { unpack8(c, v); }

/* The per-token codes of a row a CTA holds in registers: NV chunks of 8 a
 * thread, chunk k at column (k blockDim.x + threadIdx.x) 8, in[k] when it
 * lies in the row. The row's max |v| over the CTA (block_max), its scale
 * from thread 0 into *scale, then each chunk's codes (row_code) in one
 * 8-byte store into q_row (the row's codes). One rule for the norms' fused
 * codes and the register-row quantiser, so both write the same bytes as the
 * two-pass quantisers. */
template <int NV, typename C>
__device__ __forceinline__ void row_codes_store(const C (&v)[NV], const bool (&in)[NV], int e4m3,
                                                uint8_t *q_row, float *scale, float *red) {
  float m = 0.0f;
#pragma unroll
  for (int k = 0; k < NV; k++) {
    if (!in[k]) continue;
    float f[ROW_VEC];
    chunk8(v[k], f);
    for (int i = 0; i < ROW_VEC; i++) m = fmaxf(m, fabsf(f[i]));
  }
  const float amax = block_max(m, red), mul = row_quant_mul(e4m3, amax);
  if (threadIdx.x == 0) *scale = row_quant_scale(e4m3, amax);
#pragma unroll
  for (int k = 0; k < NV; k++) {
    if (!in[k]) continue;
    float f[ROW_VEC];
    chunk8(v[k], f);
    store_codes8(q_row + (k * (int)blockDim.x + (int)threadIdx.x) * ROW_VEC, f, e4m3, mul);
  }
}

/* The vector kernels' work split of a row: nv chunks of 8 a thread,
 * threads a whole number of warps (cuda_norm.cu's row_split_pick chooses
 * it from the width). */
typedef struct row_split {
  int nv, threads;
} row_split;

static inline int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Runs STMT with the constant NV set to nv (the template argument of the
 * vector kernels: a thread's chunks live in registers, so their count must
 * be known at compile time). */
#define ROW_NV_DISPATCH(nv, STMT)                  \
  switch (nv) {                                    \
  case 1: { constexpr int NV = 1; STMT; } break;   \
  case 2: { constexpr int NV = 2; STMT; } break;   \
  case 3: { constexpr int NV = 3; STMT; } break;   \
  case 4: { constexpr int NV = 4; STMT; } break;   \
  case 5: { constexpr int NV = 5; STMT; } break;   \
  default: { constexpr int NV = 8; STMT; } break;  \
  }

/* The vector kernels' work split of a row of `chunks` chunks: nv chunks a
 * thread, threads a whole number of warps. The smallest nv of 2, 3, 4, 5, 8
 * that gives whole warps and at most 256 threads with no thread idle (at
 * least two chunks a thread, so each thread has two loads in flight: 1536
 * wide -> 2 x 96 threads, 5120 -> 4 x 160); else the smallest nv of 1, 2,
 * 3, 4, 5, 8 within ROW_MAX_THREADS, the last warp partly idle. 0 when the
 * row is too wide (the caller runs the scalar kernel). */
static inline int row_split_pick(int64_t chunks, row_split *out) {
  static const int exact[] = {2, 3, 4, 5, 8}, any[] = {1, 2, 3, 4, 5, 8};
  for (int i = 0; i < 5; i++) {
    const int nv = exact[i];
    if (chunks % nv == 0 && (chunks / nv) % 32 == 0 && chunks / nv <= 256) {
      out->nv = nv;
      out->threads = (int)(chunks / nv);
      return 1;
    }
  }
  for (int i = 0; i < 6; i++) {
    const int64_t t = (chunks + any[i] - 1) / any[i];
    if (t <= ROW_MAX_THREADS) {
      out->nv = any[i];
      out->threads = (int)((t + 31) / 32 * 32);
      return 1;
    }
  }
  return 0;
}

/* The split with nv chunks a thread: 0 when the row needs more than
 * ROW_MAX_THREADS threads. */
static inline int row_split_forced(int64_t chunks, int nv, row_split *out) {
  const int64_t t = (chunks + nv - 1) / nv;
  if (t > ROW_MAX_THREADS) return 0;
  out->nv = nv;
  out->threads = (int)((t + 31) / 32 * 32);
  return 1;
}

/* ---- per-token quantiser of bf16 rows held in registers -------------------- */

/* x (rows, cols) bf16 -> q (rows, cols) codes and scale (rows) by the rule
 * of row_code (E4M3: e4m3, else int8), a CTA per row, nv chunks of 8 a
 * thread kept as loaded: the row is read from memory once, where the
 * two-pass kernels (cuda_fp8.cu, cuda_quant.cu) read it again for the
 * codes. The same max, factor and codes, so the same bytes. */
template <int NV, int E4M3>
static __global__ void __launch_bounds__(ROW_MAX_THREADS)
    quant_rows_reg_kernel(const __nv_bfloat16 *x, int cols, uint8_t *q, float *scale) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  uint4 u[NV];
  bool in[NV]; /* the chunk lies in the row (the last warp may run past it) */
#pragma unroll
  for (int k = 0; k < NV; k++) {
    const int c = (k * (int)blockDim.x + (int)threadIdx.x) * ROW_VEC;
    in[k] = c < cols;
    u[k] = in[k] ? *reinterpret_cast<const uint4 *>(x + row * cols + c) : make_uint4(0, 0, 0, 0);
  }
  row_codes_store<NV>(u, in, E4M3, q + row * cols, scale + row, red);
}

/* Runs quant_rows_reg_kernel and returns 1, or returns 0 when it cannot
 * take the rows (cols not a multiple of 8 or too wide for the split, x not
 * 16-byte or q not 8-byte aligned, 2^31 rows or more): the caller then
 * runs its two-pass kernel. */
static inline int quant_rows_reg(int e4m3, const void *x, int64_t rows, int64_t cols,
                                 uint8_t *q, float *scale, cudaStream_t stream) {
  row_split s;
  if (cols % ROW_VEC != 0 || cols > INT32_MAX || rows > INT32_MAX ||
      !row_split_pick(cols / ROW_VEC, &s) || !aligned16(x) || ((uintptr_t)q & 7u) != 0)
    return 0;
  const __nv_bfloat16 *xb = (const __nv_bfloat16 *)x;
  if (e4m3)
    ROW_NV_DISPATCH(s.nv, (quant_rows_reg_kernel<NV, 1><<<(unsigned)rows, s.threads, 0, stream>>>(
                              xb, (int)cols, q, scale)))
  else
    ROW_NV_DISPATCH(s.nv, (quant_rows_reg_kernel<NV, 0><<<(unsigned)rows, s.threads, 0, stream>>>(
                              xb, (int)cols, q, scale)))
  CUDA_LAUNCH_CHECK();
  return 1;
}

#endif
