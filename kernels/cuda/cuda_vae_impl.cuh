/* What the VAE decoder's CUDA ops (kern_cuda_vae.h) share between their
 * two files: the context (cuDNN and cuBLASLt handles, the per-shape plans
 * of cuda_vae.cu), the channel checks, and the element access of
 * channels-last rows used by the kernels of both files (cuda_vae.cu: the
 * convolutions, GEMMs and attention; cuda_vae_elem.cu: the element
 * kernels). Included by those two only. */
#ifndef CUDA_VAE_IMPL_CUH
#define CUDA_VAE_IMPL_CUH

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cudnn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "cuda_vae_common.cuh"
#include "cuda_vae_conv.h"
#include "cuda_vae_graph.cuh"
#include "lib_check.cuh"
#include "kern_cuda_vae.h"
#include "vae_layout.h"

#define CONV_CACHE 96 /* conv shapes of a decode: ~40 published */
#define GEMM_CACHE 32 /* attention GEMM shapes: 2 per row-chunk size */
#define MAX_ALGOS 16

/* ---- the context ----------------------------------------------------------- */

/* A convolution's shape (cuda_vae_conv.h). */
typedef cuda_vae_conv_key conv_key;

typedef struct conv_entry {
  conv_key key;
  cuda_vae_conv_descs d;
  cudnnConvolutionFwdAlgo_t algo;
  cudnnMathType_t math; /* the convolution descriptor's, set for algo */
  size_t ws;
  int64_t runs; /* calls since the context was made (cuda_vae_conv_picks) */
  /* the backend engine rule's plan (cuda_vae_engine_rule), which runs
   * instead of algo when g.plan is set */
  att_graph g;
} conv_entry;

typedef struct gemm_key {
  int64_t M, N, K, lda, ldb, ldd;
  int b_kn, d_f32;
} gemm_key;

typedef struct gemm_entry {
  gemm_key key;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, ld; /* cuBLASLt's A (our B), B (our A), D */
  cublasLtMatmulAlgo_t algo;
} gemm_entry;

struct kern_cuda_vae {
  kern_dtype dt;
  int tf32; /* fp32 only: convolutions and GEMMs may use the TF32 tensor cores */
  cudaStream_t stream;
  cudnnHandle_t dnn;
  cublasLtHandle_t lt;
  void *conv_ws, *gemm_ws;
  size_t conv_ws_bytes, gemm_ws_bytes;
  int nconv, ngemm;
  conv_entry conv[CONV_CACHE];
  gemm_entry gemm[GEMM_CACHE];
};

static inline int misaligned(const void *p) { return ((uintptr_t)p & 15u) != 0; }

static inline void check_ch(const char *op, int64_t C, const void *a, const void *b) {
  if (C < 8 || C % 8 != 0 || misaligned(a) || (b && misaligned(b)))
    sp_fatal("vae %s: %lld channels (need a multiple of 8), pointers %p %p (need 16-byte "
             "alignment)",
             op, (long long)C, a, b);
}

/* ---- element access ------------------------------------------------------------ */

/* 16 bytes of a channels-last row as fp32 values. */
template <typename T>
struct vec;
template <>
struct vec<float> {
  static constexpr int n = 4;
  static __device__ __forceinline__ void load(const float *p, float *f) {
    float4 u = *(const float4 *)p;
    f[0] = u.x, f[1] = u.y, f[2] = u.z, f[3] = u.w;
  }
  static __device__ __forceinline__ void store(float *p, const float *f) {
    *(float4 *)p = make_float4(f[0], f[1], f[2], f[3]);
  }
};
template <>
struct vec<__nv_bfloat16> {
  static constexpr int n = 8;
  static __device__ __forceinline__ void load(const __nv_bfloat16 *p, float *f) {
    uint4 u = *(const uint4 *)p;
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&u;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      float2 t = __bfloat1622float2(h[i]);
      f[2 * i] = t.x, f[2 * i + 1] = t.y;
    }
  }
  static __device__ __forceinline__ void store(__nv_bfloat16 *p, const float *f) {
    uint4 u;
    __nv_bfloat162 *h = (__nv_bfloat162 *)&u;
#pragma unroll
    for (int i = 0; i < 4; i++) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    *(uint4 *)p = u;
  }
};

/* V values of a row in T storage, V a multiple of vec<T>::n: a bf16 row's
 * vector read from or written to fp32 storage takes two float4s. */
template <typename T, int V>
static __device__ __forceinline__ void load_v(const T *p, float *f) {
#pragma unroll
  for (int i = 0; i < V; i += vec<T>::n) vec<T>::load(p + i, f + i);
}
template <typename T, int V>
static __device__ __forceinline__ void store_v(T *p, const float *f) {
#pragma unroll
  for (int i = 0; i < V; i += vec<T>::n) vec<T>::store(p + i, f + i);
}

/* ---- attention ---------------------------------------------------------------------- */

/* Max then sum over a block, in a fixed order (warp shuffles, then warp 0
 * over the warps' results). */
template <int MAX>
static __device__ float block_reduce(float x, float *sh) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float t = __shfl_xor_sync(0xffffffffu, x, o);
    x = MAX ? fmaxf(x, t) : x + t;
  }
  __syncthreads(); /* sh may still be read from the previous reduction */
  if (lane == 0) sh[wid] = x;
  __syncthreads();
  if (wid == 0) {
    x = lane < nw ? sh[lane] : (MAX ? -INFINITY : 0.0f);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float t = __shfl_xor_sync(0xffffffffu, x, o);
      x = MAX ? fmaxf(x, t) : x + t;
    }
    if (lane == 0) sh[32] = x;
  }
  __syncthreads();
  return sh[32];
}

#endif
