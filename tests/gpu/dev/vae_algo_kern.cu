/* The device helpers of the convolution algorithm benchmark
 * (vae_algo_kern.h): random fill and the comparison of two outputs. */
#include "vae_algo_kern.h"

#include <cuda_bf16.h>
#include <stdlib.h>

#include "cuda_check.h"

#define FILL_THREADS 256
#define CMP_BLOCKS 1024
#define CMP_THREADS 256

/* A uniform value in [-1, 1) from a 64-bit mix of (seed, i)
 * (splitmix64's finaliser). */
static __device__ float unit(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void fill_kernel(void *p, int64_t n, int bf16, float a, uint64_t seed) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const float v = a * unit(seed, (uint64_t)i);
    if (bf16)
      ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
    else
      ((float *)p)[i] = v;
  }
}

extern "C" void vae_algo_fill(void *p, int64_t n, int bf16, float a, uint64_t seed,
                              cudaStream_t stream) {
  int64_t blocks = (n + FILL_THREADS - 1) / FILL_THREADS;
  if (blocks > 65536) blocks = 65536;
  if (blocks < 1) return;
  fill_kernel<<<(unsigned)blocks, FILL_THREADS, 0, stream>>>(p, n, bf16, a, seed);
  CUDA_CHECK(cudaGetLastError());
}

/* Per block: elements whose bits differ, sum (a - b)^2 and sum b^2 in
 * double, each block's share in a fixed order (a tree in shared memory). */
__global__ void compare_kernel(const void *a, const void *b, int64_t n, int bf16,
                               unsigned long long *ndiff, double *d2, double *r2) {
  __shared__ unsigned long long sn[CMP_THREADS];
  __shared__ double sd[CMP_THREADS], sr[CMP_THREADS];
  unsigned long long cnt = 0;
  double dd = 0.0, rr = 0.0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    double x, y;
    if (bf16) {
      const unsigned short ua = ((const unsigned short *)a)[i], ub = ((const unsigned short *)b)[i];
      cnt += ua != ub;
      x = __bfloat162float(((const __nv_bfloat16 *)a)[i]);
      y = __bfloat162float(((const __nv_bfloat16 *)b)[i]);
    } else {
      const unsigned int ua = ((const unsigned int *)a)[i], ub = ((const unsigned int *)b)[i];
      cnt += ua != ub;
      x = ((const float *)a)[i];
      y = ((const float *)b)[i];
    }
    dd += (x - y) * (x - y);
    rr += y * y;
  }
  sn[threadIdx.x] = cnt, sd[threadIdx.x] = dd, sr[threadIdx.x] = rr;
  __syncthreads();
  for (int s = CMP_THREADS / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) {
      sn[threadIdx.x] += sn[threadIdx.x + s];
      sd[threadIdx.x] += sd[threadIdx.x + s];
      sr[threadIdx.x] += sr[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    ndiff[blockIdx.x] = sn[0];
    d2[blockIdx.x] = sd[0];
    r2[blockIdx.x] = sr[0];
  }
}

extern "C" vae_algo_diff vae_algo_compare(const void *a, const void *b, int64_t n, int bf16,
                                          cudaStream_t stream) {
  unsigned long long *dn = NULL;
  double *dd = NULL;
  CUDA_CHECK(cudaMalloc((void **)&dn, CMP_BLOCKS * sizeof *dn));
  CUDA_CHECK(cudaMalloc((void **)&dd, 2 * CMP_BLOCKS * sizeof *dd));
  compare_kernel<<<CMP_BLOCKS, CMP_THREADS, 0, stream>>>(a, b, n, bf16, dn, dd, dd + CMP_BLOCKS);
  CUDA_CHECK(cudaGetLastError());
  unsigned long long hn[CMP_BLOCKS];
  double hd[2 * CMP_BLOCKS];
  CUDA_CHECK(cudaMemcpyAsync(hn, dn, sizeof hn, cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaMemcpyAsync(hd, dd, sizeof hd, cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CUDA_CHECK(cudaFree(dn));
  CUDA_CHECK(cudaFree(dd));
  vae_algo_diff r = {0, 0.0, 0.0};
  for (int i = 0; i < CMP_BLOCKS; i++) {
    r.ndiff += (int64_t)hn[i];
    r.d2 += hd[i];
    r.r2 += hd[CMP_BLOCKS + i];
  }
  return r;
}
