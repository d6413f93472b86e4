/* The UMT5 encoder's row ops (kern_cuda_t5.h): RMS norm and gated GELU
 * (the biased attention is cuda_t5_attn.cu). Every reduction is a fixed
 * tree inside one block, no atomics. */
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
