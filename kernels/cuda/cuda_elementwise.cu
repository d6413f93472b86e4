/* Elementwise ops: GELU-tanh, SiLU, bias+activation, patchify/unpatchify,
 * dtype conversions (kern_cuda.h); the gated residual add is a row op of the
 * residual stream, in cuda_norm.cu with the norm it fuses with. fp32 arithmetic
 * everywhere; bf16 only as storage. Grid-stride loops over int64 indices
 * so any size runs with a bounded grid. */
#include <cuda_bf16.h>
#include <math.h>

#include "act.cuh"
#include "cuda_check.h"
#include "kern_cuda.h"

#define EW_THREADS 256
#define EW_MAX_BLOCKS 65536

static unsigned ew_blocks(int64_t n) {
  int64_t b = (n + EW_THREADS - 1) / EW_THREADS;
  return (unsigned)(b < 1 ? 1 : (b > EW_MAX_BLOCKS ? EW_MAX_BLOCKS : b));
}

static void check_count(const char *op, int64_t n) {
  if (n < 0) sp_fatal("%s: negative element count %lld", op, (long long)n);
}

static void check_dtype(const char *op, kern_dtype t) {
  if (t != KERN_DTYPE_F32 && t != KERN_DTYPE_BF16)
    sp_fatal("%s: dtype %d is not fp32 or bf16", op, (int)t);
}

/* Storage <-> fp32 for the two dtypes, so one template serves both. */
__device__ __forceinline__ float load_f(const float *p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load_f(const __nv_bfloat16 *p, int64_t i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ void store_f(float *p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store_f(__nv_bfloat16 *p, int64_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}


/* ---- activations -------------------------------------------------------- */

template <typename T, int ACT> /* ACT: 1 GELU-tanh, 2 SiLU */
__global__ void act_kernel(T *x, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float v = load_f(x, i);
    store_f(x, i, ACT == 1 ? gelu_tanh_f(v) : silu_f(v));
  }
}

template <int ACT>
static void act_launch(const char *op, void *x, kern_dtype dtype, int64_t n,
                       cudaStream_t stream) {
  check_count(op, n);
  check_dtype(op, dtype);
  if (n == 0) return;
  if (dtype == KERN_DTYPE_F32)
    act_kernel<float, ACT><<<ew_blocks(n), EW_THREADS, 0, stream>>>((float *)x, n);
  else
    act_kernel<__nv_bfloat16, ACT>
        <<<ew_blocks(n), EW_THREADS, 0, stream>>>((__nv_bfloat16 *)x, n);
  CUDA_LAUNCH_CHECK();
}

extern "C" void kern_cuda_gelu_tanh(void *x, kern_dtype dtype, int64_t n, cudaStream_t stream) {
  act_launch<1>("gelu_tanh", x, dtype, n, stream);
}

extern "C" void kern_cuda_silu(void *x, kern_dtype dtype, int64_t n, cudaStream_t stream) {
  act_launch<2>("silu", x, dtype, n, stream);
}

/* ---- bias + activation on a GEMM output ------------------------------- */

template <typename T>
__global__ void bias_act_kernel(T *y, const __nv_bfloat16 *b, int64_t rows, int64_t N,
                                int64_t ldy, int act) {
  const int64_t n = rows * N;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / N, c = i % N;
    float v = load_f(y, r * ldy + c) + (b ? __bfloat162float(b[c]) : 0.0f);
    if (act == KERN_CUDA_ACT_GELU_TANH) v = gelu_tanh_f(v);
    store_f(y, r * ldy + c, v);
  }
}

extern "C" void kern_cuda_bias_act(void *y, kern_dtype y_dtype, const uint16_t *b, int64_t rows,
                                   int64_t N, int64_t ldy, kern_cuda_act act,
                                   cudaStream_t stream) {
  if (rows < 0 || N < 1 || ldy < N || rows > INT64_MAX / ldy)
    sp_fatal("bias_act: bad shape rows %lld N %lld ldy %lld", (long long)rows, (long long)N,
             (long long)ldy);
  check_dtype("bias_act", y_dtype);
  const unsigned blocks = ew_blocks(rows * N);
  const __nv_bfloat16 *bb = (const __nv_bfloat16 *)b;
  if (y_dtype == KERN_DTYPE_F32)
    bias_act_kernel<<<blocks, EW_THREADS, 0, stream>>>((float *)y, bb, rows, N, ldy, (int)act);
  else
    bias_act_kernel<<<blocks, EW_THREADS, 0, stream>>>((__nv_bfloat16 *)y, bb, rows, N, ldy,
                                                       (int)act);
  CUDA_LAUNCH_CHECK();
}

/* ---- patchify / unpatchify, patch (1,2,2) ------------------------------- */

static void check_grid(const char *op, int64_t C, int64_t F, int64_t H, int64_t W) {
  if (C < 1 || F < 1 || H < 2 || W < 2 || (H & 1) || (W & 1))
    sp_fatal("%s: bad latent shape (%lld, %lld, %lld, %lld): need C, F >= 1 and H, W even "
             "(patch 1x2x2)",
             op, (long long)C, (long long)F, (long long)H, (long long)W);
  if (C > INT64_MAX / F / H / W) sp_fatal("%s: latent size overflows", op);
}

/* One thread per token value: tokens (F*Hp*Wp, C*4), value c*4 + kh*2 + kw. */
template <typename T>
__global__ void patchify_kernel(const float *x, T *tokens, int64_t C, int64_t F, int64_t H,
                                int64_t W) {
  const int64_t Hp = H / 2, Wp = W / 2, n = C * F * H * W;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t tok = i / (C * 4), v = i % (C * 4);
    const int64_t c = v / 4, kh = (v / 2) % 2, kw = v % 2;
    const int64_t f = tok / (Hp * Wp), h = (tok / Wp) % Hp, w = tok % Wp;
    store_f(tokens, i, x[((c * F + f) * H + 2 * h + kh) * W + 2 * w + kw]);
  }
}

extern "C" void kern_cuda_patchify(const float *x, void *tokens, kern_dtype tokens_dtype,
                                   int64_t C, int64_t F, int64_t H, int64_t W,
                                   cudaStream_t stream) {
  check_grid("patchify", C, F, H, W);
  check_dtype("patchify", tokens_dtype);
  const int64_t n = C * F * H * W;
  if (tokens_dtype == KERN_DTYPE_F32)
    patchify_kernel<<<ew_blocks(n), EW_THREADS, 0, stream>>>(x, (float *)tokens, C, F, H, W);
  else
    patchify_kernel<<<ew_blocks(n), EW_THREADS, 0, stream>>>(x, (__nv_bfloat16 *)tokens, C, F,
                                                             H, W);
  CUDA_LAUNCH_CHECK();
}

/* One thread per latent value x[c, f, y, z]: token (f, y/2, z/2), value
 * ((0*2 + y%2)*2 + z%2)*C + c (channel fastest). */
__global__ void unpatchify_kernel(const float *tokens, float *x, int64_t C, int64_t F,
                                  int64_t H, int64_t W) {
  const int64_t Hp = H / 2, Wp = W / 2, n = C * F * H * W;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t z = i % W, y = (i / W) % H, f = (i / (W * H)) % F, c = i / (W * H * F);
    const int64_t tok = (f * Hp + y / 2) * Wp + z / 2;
    x[i] = tokens[tok * 4 * C + ((y % 2) * 2 + z % 2) * C + c];
  }
}

extern "C" void kern_cuda_unpatchify(const float *tokens, float *x, int64_t C, int64_t F,
                                     int64_t H, int64_t W, cudaStream_t stream) {
  check_grid("unpatchify", C, F, H, W);
  const int64_t n = C * F * H * W;
  unpatchify_kernel<<<ew_blocks(n), EW_THREADS, 0, stream>>>(tokens, x, C, F, H, W);
  CUDA_LAUNCH_CHECK();
}

/* ---- dtype conversions -------------------------------------------------- */

__global__ void bf16_to_f32_kernel(const __nv_bfloat16 *src, float *dst, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = __bfloat162float(src[i]);
}

/* __float2bfloat16_rn rounds to nearest even and keeps NaN a NaN, as
 * kern_f32_to_bf16 does on the host. */
__global__ void f32_to_bf16_kernel(const float *src, __nv_bfloat16 *dst, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = __float2bfloat16_rn(src[i]);
}

extern "C" void kern_cuda_bf16_to_f32(const uint16_t *src, float *dst, int64_t n,
                                      cudaStream_t stream) {
  check_count("bf16_to_f32", n);
  if (n == 0) return;
  bf16_to_f32_kernel<<<ew_blocks(n), EW_THREADS, 0, stream>>>((const __nv_bfloat16 *)src, dst,
                                                              n);
  CUDA_LAUNCH_CHECK();
}

extern "C" void kern_cuda_f32_to_bf16(const float *src, uint16_t *dst, int64_t n,
                                      cudaStream_t stream) {
  check_count("f32_to_bf16", n);
  if (n == 0) return;
  f32_to_bf16_kernel<<<ew_blocks(n), EW_THREADS, 0, stream>>>(src, (__nv_bfloat16 *)dst, n);
  CUDA_LAUNCH_CHECK();
}
