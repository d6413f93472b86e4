/* Norms on the GPU: LayerNorm (+ affine) + modulate, RMSNorm + RoPE, and
 * the modulation table add (kern_cuda.h). One CTA per row; the row
 * statistics are fp32 block reductions in a fixed tree order, so a rerun is
 * bit-identical. LayerNorm is two-pass (mean, then the mean of squared
 * deviations) like the CPU reference, not the one-pass E[x^2] - E[x]^2,
 * which loses digits when the mean is large. */
#include <cuda_bf16.h>
#include <math.h>

#include "cuda_check.h"
#include "kern_cuda.h"

#define NORM_THREADS 256

/* Sum over the CTA, same order every call; result broadcast to all threads.
 * red: NORM_THREADS/32 floats of shared memory. */
__device__ float block_sum(float v, float *red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  __syncthreads(); /* red may still be read by the previous call */
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float s = 0.0f;
  for (int i = 0; i < NORM_THREADS / 32; i++) s += red[i];
  return s;
}

/* ---- modulation ------------------------------------------------------- */

__global__ void modulation_kernel(const __nv_bfloat16 *table, const float *e, float *out,
                                  int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = __bfloat162float(table[i]) + e[i];
}

extern "C" void kern_cuda_modulation(const uint16_t *table, const float *e, float *out,
                                     int64_t n, cudaStream_t stream) {
  if (n < 1) sp_fatal("modulation: bad element count %lld", (long long)n);
  int64_t blocks = (n + NORM_THREADS - 1) / NORM_THREADS;
  if (blocks > 65536) blocks = 65536;
  modulation_kernel<<<(unsigned)blocks, NORM_THREADS, 0, stream>>>(
      (const __nv_bfloat16 *)table, e, out, n);
  CUDA_LAUNCH_CHECK();
}

/* ---- LayerNorm + modulate -------------------------------------------- */

/* x (rows, dim) fp32 -> y (rows, dim) bf16; w, b (dim) bf16 or NULL;
 * shift, scale (dim) fp32 or NULL. One CTA per row. */
__global__ void layernorm_modulate_kernel(const float *x, const __nv_bfloat16 *w,
                                          const __nv_bfloat16 *b, const float *shift,
                                          const float *scale, __nv_bfloat16 *y, int64_t dim,
                                          float eps) {
  __shared__ float red[NORM_THREADS / 32];
  const float *xr = x + (int64_t)blockIdx.x * dim; // (dim)
  __nv_bfloat16 *yr = y + (int64_t)blockIdx.x * dim; // (dim)
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += NORM_THREADS) s += xr[i];
  const float mean = block_sum(s, red) / (float)dim;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += NORM_THREADS) {
    float d = xr[i] - mean;
    ss += d * d;
  }
  const float var = block_sum(ss, red) / (float)dim;
  const float rstd = 1.0f / sqrtf(var + eps);
  for (int64_t i = threadIdx.x; i < dim; i += NORM_THREADS) {
    float v = (xr[i] - mean) * rstd;
    if (w) v = v * __bfloat162float(w[i]) + __bfloat162float(b[i]);
    if (scale) v = v * (1.0f + scale[i]) + shift[i];
    yr[i] = __float2bfloat16_rn(v);
  }
}

extern "C" void kern_cuda_layernorm_modulate(const float *x, const uint16_t *w,
                                             const uint16_t *b, const float *shift,
                                             const float *scale, uint16_t *y, int64_t rows,
                                             int64_t dim, float eps, cudaStream_t stream) {
  if (rows < 0 || rows > INT32_MAX || dim < 1)
    sp_fatal("layernorm_modulate: bad shape rows %lld dim %lld (need rows < 2^31, dim >= 1)",
             (long long)rows, (long long)dim);
  if (!w != !b)
    sp_fatal("layernorm_modulate: affine weight and bias must be both given or both NULL");
  if (!shift != !scale)
    sp_fatal("layernorm_modulate: shift and scale must be both given or both NULL");
  if (rows == 0) return;
  layernorm_modulate_kernel<<<(unsigned)rows, NORM_THREADS, 0, stream>>>(
      x, (const __nv_bfloat16 *)w, (const __nv_bfloat16 *)b, shift, scale, (__nv_bfloat16 *)y,
      dim, eps);
  CUDA_LAUNCH_CHECK();
}

/* ---- RMSNorm + RoPE ----------------------------------------------------- */

/* x (L, heads*hd) fp32 or bf16 -> y (L, heads*hd) bf16; w (heads*hd) bf16;
 * cos_t, sin_t (L, hd/2) fp32 or NULL. One CTA per token; thread work is
 * one interleaved pair (x[2p], x[2p+1]) so the rotation needs no exchange.
 * Each thread reads the pair it writes after the row's statistics, so y may
 * alias x. */
__device__ __forceinline__ float load_f(const float *p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load_f(const __nv_bfloat16 *p, int64_t i) {
  return __bfloat162float(p[i]);
}

template <typename T>
__global__ void rmsnorm_rope_kernel(const T *x, const __nv_bfloat16 *w, const float *cos_t,
                                    const float *sin_t, __nv_bfloat16 *y, int64_t dim,
                                    int64_t hd, float eps) {
  __shared__ float red[NORM_THREADS / 32];
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

extern "C" void kern_cuda_rmsnorm_rope(const void *x, kern_dtype x_dtype, const uint16_t *w,
                                       const float *cos_t,
                                       const float *sin_t, uint16_t *y, int64_t L,
                                       int64_t heads, int64_t hd, float eps,
                                       cudaStream_t stream) {
  if (L < 0 || L > INT32_MAX || heads < 1 || hd < 2 || (hd & 1) || heads > INT64_MAX / hd)
    sp_fatal("rmsnorm_rope: bad shape L %lld heads %lld hd %lld (need L < 2^31, heads >= 1, "
             "hd even)",
             (long long)L, (long long)heads, (long long)hd);
  if (!cos_t != !sin_t)
    sp_fatal("rmsnorm_rope: cos and sin tables must be both given or both NULL");
  if (!w) sp_fatal("rmsnorm_rope: the norm weight is required");
  if (L == 0) return;
  if (x_dtype == KERN_DTYPE_BF16)
    rmsnorm_rope_kernel<<<(unsigned)L, NORM_THREADS, 0, stream>>>(
        (const __nv_bfloat16 *)x, (const __nv_bfloat16 *)w, cos_t, sin_t, (__nv_bfloat16 *)y,
        heads * hd, hd, eps);
  else
    rmsnorm_rope_kernel<<<(unsigned)L, NORM_THREADS, 0, stream>>>(
        (const float *)x, (const __nv_bfloat16 *)w, cos_t, sin_t, (__nv_bfloat16 *)y,
        heads * hd, hd, eps);
  CUDA_LAUNCH_CHECK();
}
