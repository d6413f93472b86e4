/* fp8 e4m3 tensors on the GPU (kern_cuda.h): the per-tensor and per-row
 * quantisers and the widening back to bf16. The scale formula and the rounding are
 * kern_dtype.h's, so the CPU quantiser (kern_fp8_quantize_n) gives the
 * same bytes: one multiply x * (448 / amax) in fp32, then the hardware's
 * round-to-nearest-even saturating conversion (__NV_SATFINITE).
 *
 * Quantising is two launches: a grid-wide max |x| into one float (an
 * atomic max on the float's bits, exact and order-free for non-negative
 * floats, so reruns give the same scale), then the scaling pass, which
 * needs that max in every block before it writes anything. The scale
 * never leaves the device: no host synchronisation. */
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "cuda_check.h"
#include "kern_cuda.h"
#include "row_common.cuh"

#define F8_THREADS 256
#define F8_MAX_BLOCKS 4096

static unsigned f8_blocks(int64_t n) {
  int64_t b = (n + F8_THREADS - 1) / F8_THREADS;
  return (unsigned)(b < 1 ? 1 : (b > F8_MAX_BLOCKS ? F8_MAX_BLOCKS : b));
}

__device__ __forceinline__ float f8_load(const float *p, int64_t i) { return p[i]; }
__device__ __forceinline__ float f8_load(const __nv_bfloat16 *p, int64_t i) {
  return __bfloat162float(p[i]);
}

/* *amax = max |x| over n (amax zeroed before the launch). */
template <typename T>
__global__ void f8_amax_kernel(const T *x, int64_t n, float *amax) {
  __shared__ float part[F8_THREADS / 32];
  float m = 0.0f;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    m = fmaxf(m, fabsf(f8_load(x, i)));
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < F8_THREADS / 32; w++) m = fmaxf(m, part[w]);
    /* non-negative floats order as their bit patterns */
    atomicMax((unsigned *)amax, __float_as_uint(m));
  }
}

template <typename T>
__global__ void f8_quant_kernel(const T *x, int64_t n, const float *amax, uint8_t *q,
                                float *scale) {
  const float a = *amax, mul = kern_fp8_quant_mul(a);
  if (blockIdx.x == 0 && threadIdx.x == 0) *scale = kern_fp8_scale(a);
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    q[i] = (uint8_t)__nv_cvt_float_to_fp8(f8_load(x, i) * mul, __NV_SATFINITE, __NV_E4M3);
}

template <typename T>
static void f8_quant_launch(const T *x, int64_t n, uint8_t *q, float *scale, float *amax,
                            cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof *amax, stream));
  f8_amax_kernel<T><<<f8_blocks(n), F8_THREADS, 0, stream>>>(x, n, amax);
  CUDA_LAUNCH_CHECK();
  f8_quant_kernel<T><<<f8_blocks(n), F8_THREADS, 0, stream>>>(x, n, amax, q, scale);
  CUDA_LAUNCH_CHECK();
}

extern "C" void kern_cuda_quantize_fp8(const void *x, kern_dtype x_dtype, int64_t n, uint8_t *q,
                                       float *scale, float *amax, cudaStream_t stream) {
  if (n < 1 || !x || !q || !scale || !amax)
    sp_fatal("quantize_fp8: n %lld, x %p, q %p, scale %p, amax %p: need n >= 1 and every "
             "pointer",
             (long long)n, x, (void *)q, (void *)scale, (void *)amax);
  if (x_dtype == KERN_DTYPE_F32)
    f8_quant_launch((const float *)x, n, q, scale, amax, stream);
  else if (x_dtype == KERN_DTYPE_BF16)
    f8_quant_launch((const __nv_bfloat16 *)x, n, q, scale, amax, stream);
  else
    sp_fatal("quantize_fp8: dtype %d is not fp32 or bf16", (int)x_dtype);
}

/* Per row: one block a row (rows strided over the grid), max |x| of the row
 * reduced in the block (a max is exact in any order), then the row scaled
 * and converted; thread 0 writes the row's scale. */
template <typename T>
__global__ void f8_rows_kernel(const T *x, int64_t rows, int64_t cols, uint8_t *q,
                               float *scale) {
  __shared__ float part[F8_THREADS / 32];
  __shared__ float row_amax;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * cols;
    float m = 0.0f;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, fabsf(f8_load(xr, i)));
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < F8_THREADS / 32; w++) m = fmaxf(m, part[w]);
      row_amax = m;
      scale[r] = kern_fp8_scale(m);
    }
    __syncthreads();
    const float mul = kern_fp8_quant_mul(row_amax);
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x)
      q[r * cols + i] =
          (uint8_t)__nv_cvt_float_to_fp8(f8_load(xr, i) * mul, __NV_SATFINITE, __NV_E4M3);
    __syncthreads(); /* part and row_amax are the next row's */
  }
}

/* f8_rows_kernel for bf16 rows of a multiple of 8 values, 16-byte aligned,
 * that quant_rows_reg (row_common.cuh: the row held in registers, read
 * once; every activation of the stage) cannot take, over 32,768 wide:
 * 16-byte loads of 8 values, 8-byte stores of their codes; the same max,
 * scale and conversion per value, so the same bytes. The second pass reads
 * the row again (from L2). */
__global__ void f8_rows_bf16x8_kernel(const uint4 *x, int64_t rows, int64_t vecs, uint2 *q,
                                      float *scale) {
  __shared__ float part[F8_THREADS / 32];
  __shared__ float row_amax;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const uint4 *xr = x + r * vecs;
    float m = 0.0f;
    for (int64_t i = threadIdx.x; i < vecs; i += blockDim.x) {
      const uint4 v = xr[i];
      const __nv_bfloat162 *h = (const __nv_bfloat162 *)&v;
      for (int j = 0; j < 4; j++) {
        const float2 f = __bfloat1622float2(h[j]);
        m = fmaxf(m, fmaxf(fabsf(f.x), fabsf(f.y)));
      }
    }
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < F8_THREADS / 32; w++) m = fmaxf(m, part[w]);
      row_amax = m;
      scale[r] = kern_fp8_scale(m);
    }
    __syncthreads();
    const float mul = kern_fp8_quant_mul(row_amax);
    for (int64_t i = threadIdx.x; i < vecs; i += blockDim.x) {
      const uint4 v = xr[i];
      const __nv_bfloat162 *h = (const __nv_bfloat162 *)&v;
      uint2 out;
      uint8_t *o = (uint8_t *)&out;
      for (int j = 0; j < 4; j++) {
        const float2 f = __bfloat1622float2(h[j]);
        o[2 * j] = (uint8_t)__nv_cvt_float_to_fp8(f.x * mul, __NV_SATFINITE, __NV_E4M3);
        o[2 * j + 1] = (uint8_t)__nv_cvt_float_to_fp8(f.y * mul, __NV_SATFINITE, __NV_E4M3);
      }
      q[r * vecs + i] = out;
    }
    __syncthreads(); /* part and row_amax are the next row's */
  }
}

extern "C" void kern_cuda_quantize_fp8_rows(const void *x, kern_dtype x_dtype, int64_t rows,
                                            int64_t cols, uint8_t *q, float *scale,
                                            cudaStream_t stream) {
  if (rows < 1 || cols < 1 || !x || !q || !scale)
    sp_fatal("quantize_fp8_rows: %lld x %lld, x %p, q %p, scale %p: need a row, a column and "
             "every pointer",
             (long long)rows, (long long)cols, x, (void *)q, (void *)scale);
  if (x_dtype == KERN_DTYPE_BF16 && quant_rows_reg(1, x, rows, cols, q, scale, stream)) return;
  const unsigned blocks = (unsigned)(rows < F8_MAX_BLOCKS ? rows : F8_MAX_BLOCKS);
  if (x_dtype == KERN_DTYPE_BF16 && cols % 8 == 0 && ((uintptr_t)x & 15u) == 0 &&
      ((uintptr_t)q & 7u) == 0)
    f8_rows_bf16x8_kernel<<<blocks, F8_THREADS, 0, stream>>>((const uint4 *)x, rows, cols / 8,
                                                             (uint2 *)q, scale);
  else if (x_dtype == KERN_DTYPE_F32)
    f8_rows_kernel<<<blocks, F8_THREADS, 0, stream>>>((const float *)x, rows, cols, q, scale);
  else if (x_dtype == KERN_DTYPE_BF16)
    f8_rows_kernel<<<blocks, F8_THREADS, 0, stream>>>((const __nv_bfloat16 *)x, rows, cols, q,
                                                      scale);
  else
    sp_fatal("quantize_fp8_rows: dtype %d is not fp32 or bf16", (int)x_dtype);
  CUDA_LAUNCH_CHECK();
}

__global__ void f8_to_bf16_kernel(const uint8_t *q, const float *scale, __nv_bfloat16 *y,
                                  int64_t n) {
  const float s = *scale;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)q[i], __NV_E4M3);
    y[i] = __float2bfloat16_rn(__half2float(__half(h)) * s);
  }
}

extern "C" void kern_cuda_fp8_to_bf16(const uint8_t *q, const float *scale, uint16_t *y,
                                      int64_t n, cudaStream_t stream) {
  if (n < 1 || !q || !scale || !y)
    sp_fatal("fp8_to_bf16: n %lld, q %p, scale %p, y %p: need n >= 1 and every pointer",
             (long long)n, (const void *)q, (const void *)scale, (void *)y);
  f8_to_bf16_kernel<<<f8_blocks(n), F8_THREADS, 0, stream>>>(q, scale, (__nv_bfloat16 *)y, n);
  CUDA_LAUNCH_CHECK();
}
