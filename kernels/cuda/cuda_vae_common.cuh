/* What the CUDA ops of every Wan VAE share (the Wan 2.1 VAE's,
 * cuda_vae_impl.cuh; the Wan 2.2 VAE's, cuda_vae22.cu): the element
 * kernels' block size, grid and grid-stride loop, the fp32 view of a
 * storage type, and the release of a cached convolution's cuDNN
 * descriptors. */
#ifndef CUDA_VAE_COMMON_CUH
#define CUDA_VAE_COMMON_CUH

#include <cuda_bf16.h>
#include <cudnn.h>
#include <stdint.h>

#include "lib_check.cuh"

/* Threads of an element kernel's block. The names here are short and
 * plain: only the VAE ops' .cu files include this. */
#define THREADS 256

/* Blocks of THREADS for n outputs, at most 65536 x 8 (the grid-stride
 * loops cover the rest). */
static inline unsigned grid_for(int64_t n) {
  int64_t b = (n + THREADS - 1) / THREADS;
  if (b > 65536 * 8) b = 65536 * 8;
  return (unsigned)(b < 1 ? 1 : b);
}

/* Every output i < n of a grid-stride loop. */
#define VAE_LOOP(i, n)                                                      \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); \
       i += (int64_t)gridDim.x * blockDim.x)

/* A stored value as fp32, and fp32 stored (bf16: rounded to nearest even). */
static __device__ __forceinline__ float to_f(float x) { return x; }
static __device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
static __device__ __forceinline__ void from_f(float *p, float x) { *p = x; }
static __device__ __forceinline__ void from_f(__nv_bfloat16 *p, float x) {
  *p = __float2bfloat16_rn(x);
}

/* Destroys the descriptors of a cached convolution: input, output,
 * filter, convolution. */
static inline void cuda_vae_conv_descs_destroy(cudnnTensorDescriptor_t xd,
                                               cudnnTensorDescriptor_t yd,
                                               cudnnFilterDescriptor_t wd,
                                               cudnnConvolutionDescriptor_t cd) {
  CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(cd));
  CUDNN_CHECK(cudnnDestroyFilterDescriptor(wd));
  CUDNN_CHECK(cudnnDestroyTensorDescriptor(yd));
  CUDNN_CHECK(cudnnDestroyTensorDescriptor(xd));
}

#endif
