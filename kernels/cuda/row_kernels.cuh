/* The residual stream's row kernels (kern_cuda.h), as a CUDA-only header:
 * included by cuda_norm.cu, whose launchers pick the kernels that ship, and
 * by the benchmark variants of tests/gpu/dev/norm_variants.cu, which
 * force the other choices. Every kernel and launch helper here is static,
 * so the two translation units each keep their own copy. The reductions,
 * chunk loads and stores and the work split are row_common.cuh's.
 *
 * They are memory-bound, so the vector kernels move each byte once, in
 * 16-byte loads and stores: one CTA per row, a thread holding a few chunks
 * of 8 elements of its row in registers, so the row's statistics and its
 * output come from one read of x. The scalar kernels (the first version:
 * one CTA of 256 threads per row, one element per load, rereading the row
 * per pass) take the rows the vector kernels cannot: a width that is not a
 * multiple of 8, a pointer that is not 16-byte aligned.
 *
 * Row statistics are fp32 block reductions in a fixed order (each thread's
 * chunks in turn, a butterfly over the warp, the warps in index order), and
 * the work split depends only on the row width, so a rerun is bit-identical,
 * and a row gives the same bits whether it is normalised alone or with
 * others. LayerNorm is two-pass (mean, then the mean of squared deviations)
 * like the CPU reference, not E[x^2] - E[x]^2, which loses digits when the
 * mean is large: with the row in registers the second pass costs no bytes.
 *
 * The norm's output can also be quantised per token for the W8A8 linear
 * layers after it (residual_row_params's qc): the row's bf16-rounded outputs,
 * still in registers, give the row's max |h| (a max is exact in any order)
 * and then their codes, the bytes and scales kern_cuda_quantize_fp8_rows or
 * kern_cuda_quantize_i8_rows would make from h, without writing h and
 * reading it back (h is still written when the caller needs it). */
#ifndef KERN_ROW_KERNELS_CUH
#define KERN_ROW_KERNELS_CUH

#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include "cuda_check.h"
#include "kern_cuda.h"
#include "row_common.cuh"

#define NORM_THREADS 256   /* the element-wise kernels' CTA */

/* ---- scalar kernels: any width, any alignment ------------------------- */

/* The per-token codes of a norm's output h (the W8A8 input of the linear
 * layers after it). */
typedef struct row_codes {
  kern_qfmt fmt; /* KERN_QFMT_E4M3_ROW or KERN_QFMT_I8_ROW */
  uint8_t *q;    /* (rows, dim) codes, or NULL: none */
  float *scale;  /* (rows) the rows' scales */
} row_codes;

/* One row of the residual stream: x += y * gate (when y is given, x written
 * back), then h = LayerNorm(x) [* w + b] [* (1 + scale) + shift] (when h or
 * qc.q is given), into h and, when qc.q is given, its per-token codes. The add
 * and the norm use the sums the separate ops would, so the fused call is
 * bit-identical to the calls it replaces. The scalar kernels take it too. */
typedef struct residual_row_params {
  float *x;                       /* (rows, dim) fp32; written only when y is given */
  const void *y;                  /* (rows, dim) fp32 or bf16 (the TY of the kernel), or NULL */
  const float *gate;              /* (dim) or NULL: gate 1 */
  const __nv_bfloat16 *w, *b;     /* (dim) or both NULL: no affine */
  const float *shift, *scale;     /* (dim) or both NULL: no modulation */
  __nv_bfloat16 *h;               /* (rows, dim) or NULL */
  int dim;
  float eps;
  row_codes qc;                   /* h's codes, or {}: none */
} residual_row_params;

/* x (rows, dim) fp32 += y (rows, dim) * gate (dim) or gate 1. */
template <typename T>
static __global__ void gated_add_kernel(float *x, const T *y, const float *gate, int64_t rows,
                                        int64_t dim) {
  const int64_t n = rows * dim;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float g = gate ? gate[i % dim] : 1.0f;
    x[i] += load_f(y, i) * g;
  }
}

/* The norm's output at column i of the row xr, in the scalar kernel's
 * operations. */
static __device__ __forceinline__ float layernorm_out(const residual_row_params &p,
                                                      const float *xr, int64_t i, float mean,
                                                      float rstd) {
  float v = (xr[i] - mean) * rstd;
  if (p.w) v = v * __bfloat162float(p.w[i]) + __bfloat162float(p.b[i]);
  if (p.scale) v = v * (1.0f + p.scale[i]) + p.shift[i];
  return v;
}

/* p.x (rows, dim) fp32 -> p.h (rows, dim) bf16 when given, and its codes
 * p.qc.q when given (p.y unused: the gated add runs before, gated_add_kernel).
 * One CTA per row. With codes, each output is computed twice in the same
 * operations: for the row's max, then for its code. */
static __global__ void layernorm_modulate_kernel(residual_row_params p) {
  __shared__ float red[32];
  const int64_t dim = p.dim, row = blockIdx.x;
  const float *xr = p.x + row * dim; // (dim)
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += NORM_THREADS) s += xr[i];
  const float mean = block_sum(s, red) / (float)dim;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += NORM_THREADS) {
    float d = xr[i] - mean;
    ss += d * d;
  }
  const float var = block_sum(ss, red) / (float)dim;
  const float rstd = 1.0f / sqrtf(var + p.eps);
  float m = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += NORM_THREADS) {
    const float v = layernorm_out(p, xr, i, mean, rstd);
    if (p.h) p.h[row * dim + i] = __float2bfloat16_rn(v);
    m = fmaxf(m, fabsf(bf16_round(v)));
  }
  if (!p.qc.q) return; /* the same for the whole grid */
  const int e4m3 = p.qc.fmt == KERN_QFMT_E4M3_ROW;
  const float amax = block_max(m, red), mul = row_quant_mul(e4m3, amax);
  if (threadIdx.x == 0) p.qc.scale[row] = row_quant_scale(e4m3, amax);
  for (int64_t i = threadIdx.x; i < dim; i += NORM_THREADS)
    p.qc.q[row * dim + i] = row_code(e4m3, bf16_round(layernorm_out(p, xr, i, mean, rstd)), mul);
}

/* x (L, heads*hd) fp32 or bf16 -> y (L, heads*hd) bf16; w (heads*hd) bf16;
 * cos_t, sin_t (L, hd/2) fp32 or NULL. One CTA per token; thread work is
 * one interleaved pair (x[2p], x[2p+1]) so the rotation needs no exchange.
 * Each thread reads the pair it writes after the row's statistics, so y may
 * alias x. */
template <typename T>
static __global__ void rmsnorm_rope_kernel(const T *x, const __nv_bfloat16 *w,
                                           const float *cos_t, const float *sin_t,
                                           __nv_bfloat16 *y, int64_t dim, int64_t hd, float eps) {
  __shared__ float red[32];
  const int64_t l = blockIdx.x, half = hd / 2, pairs = dim / 2;
  const T *xr = x + l * dim;          // (dim)
  __nv_bfloat16 *yr = y + l * dim;    // (dim)
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += NORM_THREADS) {
    const float v = load_f(xr, i);
    ss += v * v;
  }
  const float r = 1.0f / sqrtf(block_sum(ss, red) / (float)dim + eps);
  for (int64_t p = threadIdx.x; p < pairs; p += NORM_THREADS) {
    float a0 = load_f(xr, 2 * p) * r * __bfloat162float(w[2 * p]);
    float a1 = load_f(xr, 2 * p + 1) * r * __bfloat162float(w[2 * p + 1]);
    if (cos_t) {
      const int64_t j = p % half; /* pair index inside its head */
      const float c = cos_t[l * half + j], s = sin_t[l * half + j];
      const float o0 = a0 * c - a1 * s, o1 = a0 * s + a1 * c;
      a0 = o0;
      a1 = o1;
    }
    yr[2 * p] = __float2bfloat16_rn(a0);
    yr[2 * p + 1] = __float2bfloat16_rn(a1);
  }
}

/* ---- vector kernels: width a multiple of 8, 16-byte aligned rows ------ */

/* The norm's outputs of a thread's chunks of the row (v: the row's values
 * in, the outputs rounded to bf16 out, what a reader of h would see), into
 * h when given. */
template <int NV>
static __device__ __forceinline__ void row_norm_out(const residual_row_params &p, int64_t row,
                                                    float (&v)[NV][ROW_VEC],
                                                    const bool (&in)[NV], float mean,
                                                    float rstd) {
#pragma unroll
  for (int k = 0; k < NV; k++) {
    const int c = (k * (int)blockDim.x + (int)threadIdx.x) * ROW_VEC;
    if (!in[k]) continue;
    float o[ROW_VEC];
    for (int i = 0; i < ROW_VEC; i++) o[i] = (v[k][i] - mean) * rstd;
    if (p.w) {
      float w[ROW_VEC], b[ROW_VEC];
      load8(p.w + c, w);
      load8(p.b + c, b);
      for (int i = 0; i < ROW_VEC; i++) o[i] = fmaf(o[i], w[i], b[i]);
    }
    if (p.scale) {
      float sc[ROW_VEC], sh[ROW_VEC];
      load8(p.scale + c, sc);
      load8(p.shift + c, sh);
      for (int i = 0; i < ROW_VEC; i++) o[i] = fmaf(o[i], 1.0f + sc[i], sh[i]);
    }
    if (p.h) store8(p.h + row * p.dim + c, o);
    for (int i = 0; i < ROW_VEC; i++) v[k][i] = bf16_round(o[i]);
  }
}

template <typename TY, int NV>
static __global__ void __launch_bounds__(ROW_MAX_THREADS)
    residual_row_kernel(residual_row_params p) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  float *xr = p.x + row * p.dim; // (dim)
  float v[NV][ROW_VEC];
  bool in[NV]; /* the chunk lies in the row (the last warp may run past it) */
#pragma unroll
  for (int k = 0; k < NV; k++) {
    const int c = (k * (int)blockDim.x + (int)threadIdx.x) * ROW_VEC;
    in[k] = c < p.dim;
    if (!in[k]) continue;
    load8(xr + c, v[k]);
    if (p.y) {
      float t[ROW_VEC];
      load8((const TY *)p.y + row * p.dim + c, t);
      if (p.gate) {
        float g[ROW_VEC];
        load8(p.gate + c, g);
        for (int i = 0; i < ROW_VEC; i++) v[k][i] = fmaf(t[i], g[i], v[k][i]);
      } else {
        for (int i = 0; i < ROW_VEC; i++) v[k][i] += t[i];
      }
    }
  }
  if (p.y) {
#pragma unroll
    for (int k = 0; k < NV; k++)
      if (in[k]) store8(xr + (k * (int)blockDim.x + (int)threadIdx.x) * ROW_VEC, v[k]);
  }
  if (!p.h && !p.qc.q) return; /* the same for the whole grid, so no thread waits in block_sum */
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < NV; k++)
    if (in[k]) s += sum8(v[k]);
  const float mean = block_sum(s, red) / (float)p.dim;
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < NV; k++) {
    if (!in[k]) continue;
    float d[ROW_VEC];
    for (int i = 0; i < ROW_VEC; i++) d[i] = (v[k][i] - mean) * (v[k][i] - mean);
    ss += sum8(d);
  }
  const float rstd = 1.0f / sqrtf(block_sum(ss, red) / (float)p.dim + p.eps);
  row_norm_out<NV>(p, row, v, in, mean, rstd);
  if (p.qc.q) /* the same for the whole grid; v: the bf16-rounded outputs */
    row_codes_store<NV>(v, in, p.qc.fmt == KERN_QFMT_E4M3_ROW, p.qc.q + row * p.dim,
                        p.qc.scale + row, red);
}

/* RMSNorm + RoPE of one token, the layout of rmsnorm_rope_kernel. A chunk
 * is 4 rotation pairs of one head (hd a multiple of 8), so its angles are
 * one float4 of each table. The whole row is loaded before the first store
 * (block_sum waits for every thread), so y may alias a bf16 x. */
template <typename TX, int NV>
static __global__ void __launch_bounds__(ROW_MAX_THREADS)
    rmsnorm_rope_row_kernel(const TX *x, const __nv_bfloat16 *w, const float *cos_t,
                            const float *sin_t, __nv_bfloat16 *y, int dim, int half, float eps) {
  __shared__ float red[32];
  const int64_t l = blockIdx.x;
  const TX *xr = x + l * dim;       // (dim)
  __nv_bfloat16 *yr = y + l * dim;  // (dim)
  float v[NV][ROW_VEC];
  bool in[NV];
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < NV; k++) {
    const int c = (k * (int)blockDim.x + (int)threadIdx.x) * ROW_VEC;
    in[k] = c < dim;
    if (!in[k]) continue;
    load8(xr + c, v[k]);
    float sq[ROW_VEC];
    for (int i = 0; i < ROW_VEC; i++) sq[i] = v[k][i] * v[k][i];
    ss += sum8(sq);
  }
  const float r = 1.0f / sqrtf(block_sum(ss, red) / (float)dim + eps);
#pragma unroll
  for (int k = 0; k < NV; k++) {
    const int c = (k * (int)blockDim.x + (int)threadIdx.x) * ROW_VEC;
    if (!in[k]) continue;
    float a[ROW_VEC], wv[ROW_VEC];
    load8(w + c, wv);
    for (int i = 0; i < ROW_VEC; i++) a[i] = v[k][i] * r * wv[i];
    if (cos_t) {
      const int j = (c / 2) % half; /* first pair of the chunk inside its head */
      const float4 c4 = *reinterpret_cast<const float4 *>(cos_t + l * half + j);
      const float4 s4 = *reinterpret_cast<const float4 *>(sin_t + l * half + j);
      const float cs[4] = {c4.x, c4.y, c4.z, c4.w}, sn[4] = {s4.x, s4.y, s4.z, s4.w};
      for (int q = 0; q < 4; q++) {
        const float a0 = a[2 * q], a1 = a[2 * q + 1];
        a[2 * q] = a0 * cs[q] - a1 * sn[q];
        a[2 * q + 1] = a0 * sn[q] + a1 * cs[q];
      }
    }
    store8(yr + c, a);
  }
}

/* ---- launch helpers ----------------------------------------------------- */

static inline void check_residual(const char *op, int64_t rows, int64_t dim) {
  if (rows < 0 || rows > INT32_MAX || dim < 1 || dim > INT32_MAX)
    sp_fatal("%s: bad shape rows %lld dim %lld (need rows < 2^31, 1 <= dim < 2^31)", op,
             (long long)rows, (long long)dim);
}

static inline void check_norm_args(const char *op, const uint16_t *w, const uint16_t *b,
                                   const float *shift, const float *scale) {
  if (!w != !b) sp_fatal("%s: affine weight and bias must be both given or both NULL", op);
  if (!shift != !scale) sp_fatal("%s: shift and scale must be both given or both NULL", op);
}

static inline void check_dtype(const char *op, const char *what, kern_dtype t) {
  if (t != KERN_DTYPE_F32 && t != KERN_DTYPE_BF16)
    sp_fatal("%s: %s dtype %d is not fp32 or bf16", op, what, (int)t);
}

static inline void check_rmsnorm_rope(kern_dtype x_dtype, const uint16_t *w, const float *cos_t,
                                      const float *sin_t, int64_t L, int64_t heads, int64_t hd) {
  if (L < 0 || L > INT32_MAX || heads < 1 || hd < 2 || (hd & 1) || heads > INT32_MAX / hd)
    sp_fatal("rmsnorm_rope: bad shape L %lld heads %lld hd %lld (need L < 2^31, heads >= 1, "
             "hd even, heads*hd < 2^31)",
             (long long)L, (long long)heads, (long long)hd);
  if (!cos_t != !sin_t)
    sp_fatal("rmsnorm_rope: cos and sin tables must be both given or both NULL");
  if (!w) sp_fatal("rmsnorm_rope: the norm weight is required");
  check_dtype("rmsnorm_rope", "x", x_dtype);
}

/* Launches residual_row_kernel with split s (the caller checked the width
 * and the alignment). */
static inline void residual_row_run(const residual_row_params *p, kern_dtype y_dtype,
                                    int64_t rows, const row_split *s, cudaStream_t stream) {
  if (p->y && y_dtype == KERN_DTYPE_BF16)
    ROW_NV_DISPATCH(s->nv, (residual_row_kernel<__nv_bfloat16, NV>
                            <<<(unsigned)rows, s->threads, 0, stream>>>(*p)))
  else
    ROW_NV_DISPATCH(s->nv, (residual_row_kernel<float, NV>
                            <<<(unsigned)rows, s->threads, 0, stream>>>(*p)))
  CUDA_LAUNCH_CHECK();
}

/* The vector kernels take p: every pointer 16-byte aligned, q 8-byte. */
static inline int residual_row_aligned(const residual_row_params *p) {
  const void *ptrs[] = {p->x, p->y, p->gate, p->w, p->b, p->shift, p->scale, p->h};
  for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
    if (!aligned16(ptrs[i])) return 0;
  return ((uintptr_t)p->qc.q & 7u) == 0; /* 8 codes a store */
}

static inline void gated_add_scalar(float *x, const void *y, kern_dtype y_dtype,
                                    const float *gate, int64_t rows, int64_t dim,
                                    cudaStream_t stream) {
  int64_t blocks = (rows * dim + NORM_THREADS - 1) / NORM_THREADS;
  if (blocks > 65536) blocks = 65536;
  if (y_dtype == KERN_DTYPE_F32)
    gated_add_kernel<<<(unsigned)blocks, NORM_THREADS, 0, stream>>>(x, (const float *)y, gate,
                                                                     rows, dim);
  else
    gated_add_kernel<<<(unsigned)blocks, NORM_THREADS, 0, stream>>>(
        x, (const __nv_bfloat16 *)y, gate, rows, dim);
  CUDA_LAUNCH_CHECK();
}

static inline void layernorm_scalar(const residual_row_params *p, int64_t rows,
                                    cudaStream_t stream) {
  layernorm_modulate_kernel<<<(unsigned)rows, NORM_THREADS, 0, stream>>>(*p);
  CUDA_LAUNCH_CHECK();
}

/* RMSNorm + RoPE of L tokens: the vector kernel with split s, or the
 * scalar kernel when s is NULL (the caller checked width and alignment). */
static inline void rmsnorm_rope_run(const void *x, kern_dtype x_dtype, const __nv_bfloat16 *wb,
                                    const float *cos_t, const float *sin_t, __nv_bfloat16 *yb,
                                    int64_t L, int64_t dim, int64_t hd, float eps,
                                    const row_split *s, cudaStream_t stream) {
  if (s) {
    if (x_dtype == KERN_DTYPE_BF16)
      ROW_NV_DISPATCH(s->nv, (rmsnorm_rope_row_kernel<__nv_bfloat16, NV>
                              <<<(unsigned)L, s->threads, 0, stream>>>(
                                  (const __nv_bfloat16 *)x, wb, cos_t, sin_t, yb, (int)dim,
                                  (int)(hd / 2), eps)))
    else
      ROW_NV_DISPATCH(s->nv, (rmsnorm_rope_row_kernel<float, NV>
                              <<<(unsigned)L, s->threads, 0, stream>>>(
                                  (const float *)x, wb, cos_t, sin_t, yb, (int)dim,
                                  (int)(hd / 2), eps)))
  } else if (x_dtype == KERN_DTYPE_BF16) {
    rmsnorm_rope_kernel<<<(unsigned)L, NORM_THREADS, 0, stream>>>(
        (const __nv_bfloat16 *)x, wb, cos_t, sin_t, yb, dim, hd, eps);
  } else {
    rmsnorm_rope_kernel<<<(unsigned)L, NORM_THREADS, 0, stream>>>((const float *)x, wb, cos_t,
                                                                  sin_t, yb, dim, hd, eps);
  }
  CUDA_LAUNCH_CHECK();
}

/* ---- the row ops, for a choice of kernels --------------------------------- */

/* Which kernels a row op runs. NULL is the choice that ships (kern_cuda.h):
 * the vector kernels with row_split_pick's split, the scalar kernels for
 * rows they cannot take. The benchmarks force one (tests/gpu/dev/):
 * the scalar kernels at any width, or nv chunks a thread. */
typedef struct row_choice {
  int scalar, nv;
} row_choice;

/* The vector kernels' split of a row of `chunks` chunks under choice c, or
 * 0 when the scalar kernels run. */
static inline int row_split_choose(const row_choice *c, int64_t chunks, row_split *out) {
  if (!c) return row_split_pick(chunks, out);
  return !c->scalar && row_split_forced(chunks, c->nv, out);
}

/* Launches residual_row_kernel and returns 1, or returns 0 when the vector
 * kernel cannot take the call (or c asks for the scalar kernels); the
 * caller then runs the scalar kernels. */
static inline int residual_row_launch(const row_choice *c, const residual_row_params *p,
                                      kern_dtype y_dtype, int64_t rows, cudaStream_t stream) {
  row_split s;
  if (p->dim % ROW_VEC != 0 || !row_split_choose(c, p->dim / ROW_VEC, &s) ||
      !residual_row_aligned(p))
    return 0;
  residual_row_run(p, y_dtype, rows, &s, stream);
  return 1;
}

static inline void row_gated_add(const row_choice *c, float *x, const void *y,
                                 kern_dtype y_dtype, const float *gate, int64_t rows,
                                 int64_t dim, cudaStream_t stream) {
  check_residual("gated_add", rows, dim);
  check_dtype("gated_add", "y", y_dtype);
  if (rows == 0) return;
  const residual_row_params p = {x, y, gate, NULL, NULL, NULL, NULL, NULL, (int)dim, 0.0f, {}};
  if (!residual_row_launch(c, &p, y_dtype, rows, stream))
    gated_add_scalar(x, y, y_dtype, gate, rows, dim, stream);
}

static inline void row_layernorm_modulate(const row_choice *c, const float *x,
                                          const uint16_t *w, const uint16_t *b,
                                          const float *shift, const float *scale, uint16_t *y,
                                          int64_t rows, int64_t dim, float eps,
                                          cudaStream_t stream) {
  check_residual("layernorm_modulate", rows, dim);
  check_norm_args("layernorm_modulate", w, b, shift, scale);
  if (rows == 0) return;
  /* x is only read: residual_row_kernel writes x back only when y is given. */
  const residual_row_params p = {(float *)x, NULL, NULL, (const __nv_bfloat16 *)w,
                                 (const __nv_bfloat16 *)b, shift, scale, (__nv_bfloat16 *)y,
                                 (int)dim, eps, {}};
  if (!residual_row_launch(c, &p, KERN_DTYPE_F32, rows, stream)) layernorm_scalar(&p, rows, stream);
}

static inline void row_gated_add_layernorm(const row_choice *c, float *x, const void *y,
                                           kern_dtype y_dtype, const float *gate,
                                           const uint16_t *w, const uint16_t *b,
                                           const float *shift, const float *scale, uint16_t *h,
                                           int64_t rows, int64_t dim, float eps,
                                           cudaStream_t stream) {
  check_residual("gated_add_layernorm", rows, dim);
  check_dtype("gated_add_layernorm", "y", y_dtype);
  check_norm_args("gated_add_layernorm", w, b, shift, scale);
  if (!y || !h) sp_fatal("gated_add_layernorm: y and h are required");
  if (rows == 0) return;
  const residual_row_params p = {x, y, gate, (const __nv_bfloat16 *)w, (const __nv_bfloat16 *)b,
                                 shift, scale, (__nv_bfloat16 *)h, (int)dim, eps, {}};
  if (residual_row_launch(c, &p, y_dtype, rows, stream)) return;
  gated_add_scalar(x, y, y_dtype, gate, rows, dim, stream);
  layernorm_scalar(&p, rows, stream);
}

/* Any row op of residual_row_params (kern_cuda_norm_quant): the vector
 * kernel in one pass, or the scalar kernels (the add, then the norm). */
static inline void row_norm_quant(const row_choice *c, const residual_row_params *p,
                                  kern_dtype y_dtype, int64_t rows, cudaStream_t stream) {
  check_residual("norm_quant", rows, p->dim);
  if (p->y) check_dtype("norm_quant", "y", y_dtype);
  check_norm_args("norm_quant", (const uint16_t *)p->w, (const uint16_t *)p->b, p->shift,
                  p->scale);
  if (!p->h && !p->qc.q) sp_fatal("norm_quant: h or q is required");
  if (p->qc.q &&
      (!p->qc.scale || (p->qc.fmt != KERN_QFMT_E4M3_ROW && p->qc.fmt != KERN_QFMT_I8_ROW)))
    sp_fatal("norm_quant: codes of format %d with scales %p (need e4m3_row or i8_row, and "
             "scales)", (int)p->qc.fmt, (void *)p->qc.scale);
  if (rows == 0) return;
  if (residual_row_launch(c, p, y_dtype, rows, stream)) return;
  if (p->y) gated_add_scalar(p->x, p->y, y_dtype, p->gate, rows, p->dim, stream);
  layernorm_scalar(p, rows, stream);
}

static inline void row_rmsnorm_rope(const row_choice *c, const void *x, kern_dtype x_dtype,
                                    const uint16_t *w, const float *cos_t, const float *sin_t,
                                    uint16_t *y, int64_t L, int64_t heads, int64_t hd, float eps,
                                    cudaStream_t stream) {
  check_rmsnorm_rope(x_dtype, w, cos_t, sin_t, L, heads, hd);
  if (L == 0) return;
  const int64_t dim = heads * hd;
  row_split s;
  const int vec = hd % ROW_VEC == 0 && row_split_choose(c, dim / ROW_VEC, &s) && aligned16(x) &&
                  aligned16(w) && aligned16(cos_t) && aligned16(sin_t) && aligned16(y);
  rmsnorm_rope_run(x, x_dtype, (const __nv_bfloat16 *)w, cos_t, sin_t, (__nv_bfloat16 *)y, L,
                   dim, hd, eps, vec ? &s : NULL, stream);
}

#endif
