/* The UMT5 encoder's own ops (kern_cuda_t5.h): RMS norm, biased attention,
 * gated GELU. Plain kernels written for correctness and determinism: every
 * reduction is a fixed tree inside one block, no atomics. */
#include <cuda_bf16.h>
#include <math.h>

#include "cuda_check.h"
#include "kern_cuda_t5.h"

#define T5_THREADS 256 /* a power of two: the block reductions halve it */
#define T5_MAX_BLOCKS 65536

__device__ __forceinline__ float bf(const uint16_t *p, int64_t i) {
  return __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(p)[i]);
}

/* Sum over the block of v, the same tree every call; every thread gets it. */
__device__ float block_sum(float v, float *red) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  const float r = red[0];
  __syncthreads();
  return r;
}

__device__ float block_max(float v, float *red) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  const float r = red[0];
  __syncthreads();
  return r;
}

/* ---- RMS norm ---------------------------------------------------------- */

template <typename T>
__global__ void t5_rmsnorm_kernel(const float *x, const uint16_t *w, T *y, int64_t D, float eps) {
  __shared__ float red[T5_THREADS];
  const float *xr = x + (int64_t)blockIdx.x * D;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) ss += xr[i] * xr[i];
  const float r = rsqrtf(block_sum(ss, red) / (float)D + eps);
  T *yr = y + (int64_t)blockIdx.x * D;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    const float v = bf(w, i) * (xr[i] * r);
    if constexpr (sizeof(T) == 4)
      yr[i] = v;
    else
      yr[i] = __float2bfloat16_rn(v);
  }
}

extern "C" void kern_cuda_t5_rmsnorm(const float *x, const uint16_t *w, void *y,
                                     kern_dtype y_dtype, int64_t L, int64_t D, float eps,
                                     cudaStream_t stream) {
  if (L < 1 || L > INT32_MAX || D < 1) sp_fatal("t5 rmsnorm: %lld rows of %lld", (long long)L,
                                                (long long)D);
  if (y_dtype == KERN_DTYPE_F32)
    t5_rmsnorm_kernel<float><<<(unsigned)L, T5_THREADS, 0, stream>>>(x, w, (float *)y, D, eps);
  else if (y_dtype == KERN_DTYPE_BF16)
    t5_rmsnorm_kernel<__nv_bfloat16>
        <<<(unsigned)L, T5_THREADS, 0, stream>>>(x, w, (__nv_bfloat16 *)y, D, eps);
  else
    sp_fatal("t5 rmsnorm: output dtype %d is not fp32 or bf16", (int)y_dtype);
  CUDA_LAUNCH_CHECK();
}

/* ---- attention with the relative-position bias ------------------------- */

#define T5_QB 4 /* query rows per block: each key row read once serves all of them */

/* Block (r, h): query rows [4r, 4r + 4) of head h. A warp per key (its lanes
 * over the head width, coalesced, then a fixed shuffle tree) writes the
 * rows' scores to shared memory; an exact softmax per row; each output
 * element summed by one thread over the keys in order. */
__global__ void t5_attention_kernel(const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                    const uint16_t *pos, const int32_t *bucket, uint16_t *out,
                                    int64_t L, int64_t heads, int64_t hd) {
  __shared__ float p[T5_QB][KERN_CUDA_T5_MAX_LEN];
  __shared__ float qs[T5_QB][256];
  __shared__ float red[T5_THREADS];
  const int64_t i0 = (int64_t)blockIdx.x * T5_QB, h = blockIdx.y, row = heads * hd;
  const int nq = L - i0 < T5_QB ? (int)(L - i0) : T5_QB;
  for (int64_t t = threadIdx.x; t < T5_QB * hd; t += blockDim.x) {
    const int qi = (int)(t / hd);
    const int64_t d = t % hd;
    qs[qi][d] = qi < nq ? bf(q, (i0 + qi) * row + h * hd + d) : 0.0f;
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarp = blockDim.x >> 5;
  for (int64_t j = warp; j < L; j += nwarp) {
    float sc[T5_QB];
    for (int qi = 0; qi < T5_QB; qi++) sc[qi] = 0.0f;
    const int64_t kb = j * row + h * hd;
    for (int64_t d = lane; d < hd; d += 32) {
      const float kv = bf(k, kb + d);
      for (int qi = 0; qi < T5_QB; qi++) sc[qi] = fmaf(qs[qi][d], kv, sc[qi]);
    }
    for (int qi = 0; qi < T5_QB; qi++) {
      float x = sc[qi];
      for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
      if (lane == 0 && qi < nq)
        p[qi][j] = x + bf(pos, (int64_t)bucket[j - (i0 + qi) + L - 1] * heads + h);
    }
  }
  __syncthreads();
  float inv[T5_QB];
  for (int qi = 0; qi < T5_QB; qi++) {
    inv[qi] = 0.0f;
    if (qi >= nq) continue; /* nq is the same for the whole block */
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < L; j += blockDim.x) mx = fmaxf(mx, p[qi][j]);
    mx = block_max(mx, red);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < L; j += blockDim.x) {
      const float e = expf(p[qi][j] - mx);
      p[qi][j] = e;
      sum += e;
    }
    inv[qi] = 1.0f / block_sum(sum, red); /* its barriers also publish p */
  }
  for (int64_t t = threadIdx.x; t < nq * hd; t += blockDim.x) {
    const int qi = (int)(t / hd);
    const int64_t d = t % hd;
    float acc = 0.0f;
    for (int64_t j = 0; j < L; j++) acc = fmaf(p[qi][j], bf(v, j * row + h * hd + d), acc);
    float sc = inv[0];
    for (int r = 1; r < T5_QB; r++)
      if (r == qi) sc = inv[r];
    reinterpret_cast<__nv_bfloat16 *>(out)[(i0 + qi) * row + h * hd + d] =
        __float2bfloat16_rn(acc * sc);
  }
}

extern "C" void kern_cuda_t5_attention(const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                       const uint16_t *pos, const int32_t *bucket, uint16_t *out,
                                       int64_t L, int64_t heads, int64_t hd,
                                       cudaStream_t stream) {
  if (L < 1 || L > KERN_CUDA_T5_MAX_LEN || heads < 1 || heads > 65535 || hd < 1 || hd > 256)
    sp_fatal("t5 attention: %lld tokens, %lld heads of %lld: accepted 1..%d tokens, heads up to "
             "65535, head width up to 256",
             (long long)L, (long long)heads, (long long)hd, KERN_CUDA_T5_MAX_LEN);
  dim3 grid((unsigned)((L + T5_QB - 1) / T5_QB), (unsigned)heads);
  t5_attention_kernel<<<grid, T5_THREADS, 0, stream>>>(q, k, v, pos, bucket, out, L, heads, hd);
  CUDA_LAUNCH_CHECK();
}

/* ---- gated GELU ---------------------------------------------------------- */

__global__ void t5_gated_gelu_kernel(const float *g, const float *h, __nv_bfloat16 *y, int64_t n) {
  const float c = 0.7978845608028654f; /* sqrt(2/pi), as the CPU's kern_cpu_gelu_tanh */
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const float x = g[i];
    const float gl = 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
    y[i] = __float2bfloat16_rn(gl * h[i]);
  }
}

extern "C" void kern_cuda_t5_gated_gelu(const float *g, const float *h, uint16_t *y, int64_t n,
                                        cudaStream_t stream) {
  if (n < 0) sp_fatal("t5 gated gelu: negative count %lld", (long long)n);
  if (n == 0) return;
  int64_t b = (n + T5_THREADS - 1) / T5_THREADS;
  if (b > T5_MAX_BLOCKS) b = T5_MAX_BLOCKS;
  t5_gated_gelu_kernel<<<(unsigned)b, T5_THREADS, 0, stream>>>(g, h, (__nv_bfloat16 *)y, n);
  CUDA_LAUNCH_CHECK();
}
