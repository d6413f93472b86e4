/* Quantized weights on the GPU (kern_cuda_quant.h): the dequantiser of
 * every format to bf16, the int8 per-token quantiser, and the W8A8 linears.
 *
 * Dequantising decodes with kern_quant_decode.h, the CPU's own code: a
 * thread takes 8 consecutive values of a row (a group never straddles two
 * blocks), applies the row scale in fp32 (kq_scale: NaN codes keep their
 * bits) and rounds to bf16 with the CPU's rule, so the bits are the CPU's
 * (every product in a decoder is exact, so a contracted multiply-add rounds
 * the same). A non-finite f16 scale inside a ggml block (a file the loader
 * should refuse) gives NaN on both sides, not necessarily the same NaN.
 *
 * The W8A8 epilogue computes act(fp32(fp32(acc x sx[m]) x sw[n]) + b[n])
 * with explicitly rounded operations (no contraction into an FMA), the
 * order of kern_cpu_linear_w8a8_i8: for int8 the accumulator is exact, so
 * without an activation the result is that CPU reference's bit for bit. */
#include <cuda_bf16.h>
#include <stdint.h>

#include "act.cuh"
#include "cuda_check.h"
#include "cuda_gemm_q.cuh"
#include "kern_cuda_quant.h"
#include "row_common.cuh"

#define DQ_THREADS 256
#define DQ_MAX_BLOCKS 65536
#define Q8_THREADS 256
#define Q8_MAX_BLOCKS 4096

static unsigned grid_for(int64_t n, int threads, int64_t max_blocks) {
  const int64_t b = (n + threads - 1) / threads;
  return (unsigned)(b < 1 ? 1 : (b > max_blocks ? max_blocks : b));
}

/* ---- dequantise to bf16 ------------------------------------------------- */

/* Group g of y (rows, cols): row g / gpr, columns 8 (g % gpr) and on. */
template <int FMT, int ROW_SCALE, int VEC>
__global__ void dequant_bf16_kernel(const uint8_t *data, const float *scale, int64_t rows,
                                    int64_t cols, int64_t row_bytes, uint16_t *y) {
  const int64_t gpr = (cols + KQ_GROUP - 1) / KQ_GROUP, groups = rows * gpr;
  for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups;
       g += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = g / gpr, c = (g % gpr) * KQ_GROUP;
    const int n = cols - c < KQ_GROUP ? (int)(cols - c) : KQ_GROUP;
    float v[KQ_GROUP];
    kq_decode(FMT, data + r * row_bytes, c, n, v);
    const float s = ROW_SCALE ? scale[r] : 1.0f;
    uint16_t *out = y + r * cols + c;
    if (VEC) { /* n == 8, out 16-byte aligned */
      uint4 w;
      uint32_t *wp = (uint32_t *)&w;
      for (int i = 0; i < 4; i++) {
        const float a = ROW_SCALE ? kq_scale(v[2 * i], s) : v[2 * i];
        const float b = ROW_SCALE ? kq_scale(v[2 * i + 1], s) : v[2 * i + 1];
        wp[i] = (uint32_t)kq_to_bf16(a) | (uint32_t)kq_to_bf16(b) << 16;
      }
      *(uint4 *)out = w;
    } else {
      for (int i = 0; i < n; i++) out[i] = kq_to_bf16(ROW_SCALE ? kq_scale(v[i], s) : v[i]);
    }
  }
}

template <int FMT>
static void dequant_launch(const kern_qtensor *t, int64_t row_bytes, uint16_t *y,
                           cudaStream_t stream) {
  const int rs = kern_qfmt_get(t->fmt)->row_scale;
  const int vec = t->cols % KQ_GROUP == 0 && ((uintptr_t)y & 15u) == 0;
  const int64_t groups = t->rows * ((t->cols + KQ_GROUP - 1) / KQ_GROUP);
  const unsigned blocks = grid_for(groups, DQ_THREADS, DQ_MAX_BLOCKS);
  const uint8_t *d = (const uint8_t *)t->data;
#define DQ_GO(RS, V) \
  dequant_bf16_kernel<FMT, RS, V><<<blocks, DQ_THREADS, 0, stream>>>(d, t->scale, t->rows, \
                                                                     t->cols, row_bytes, y)
  if (rs && vec) DQ_GO(1, 1);
  else if (rs) DQ_GO(1, 0);
  else if (vec) DQ_GO(0, 1);
  else DQ_GO(0, 0);
#undef DQ_GO
  CUDA_LAUNCH_CHECK();
}

extern "C" void kern_cuda_dequant_bf16(const kern_qtensor *t, uint16_t *y, cudaStream_t stream) {
  uint64_t data_bytes, scale_bytes;
  char err[256];
  if (!t || !y || !t->data)
    sp_fatal("dequant_bf16: tensor %p (data %p), y %p: need every pointer", (const void *)t,
             t ? t->data : NULL, (void *)y);
  if (kern_qfmt_bytes(t->fmt, t->rows, t->cols, &data_bytes, &scale_bytes, err, sizeof err))
    sp_fatal("dequant_bf16: %s", err);
  if (scale_bytes && !t->scale)
    sp_fatal("dequant_bf16: a %s tensor needs its row scales", kern_qfmt_get(t->fmt)->name);
  const int64_t row_bytes = (int64_t)(data_bytes / (uint64_t)t->rows);
  switch (t->fmt) {
#define DQ_CASE(F) \
  case F: dequant_launch<F>(t, row_bytes, y, stream); break
    DQ_CASE(KQ_F32); DQ_CASE(KQ_F16); DQ_CASE(KQ_BF16); DQ_CASE(KQ_E4M3_ROW);
    DQ_CASE(KQ_I8_ROW); DQ_CASE(KQ_Q8_0); DQ_CASE(KQ_Q6_K); DQ_CASE(KQ_Q5_K);
    DQ_CASE(KQ_Q5_0); DQ_CASE(KQ_Q5_1); DQ_CASE(KQ_Q4_K); DQ_CASE(KQ_Q4_0);
    DQ_CASE(KQ_Q4_1); DQ_CASE(KQ_Q3_K); DQ_CASE(KQ_Q2_K);
#undef DQ_CASE
  default:
    sp_fatal("dequant_bf16: format %d has no kernel", (int)t->fmt);
  }
}

/* ---- int8 per-token quantiser ------------------------------------------- */

__device__ __forceinline__ float q8_load(const float *p, int64_t i) { return p[i]; }
__device__ __forceinline__ float q8_load(const __nv_bfloat16 *p, int64_t i) {
  return __bfloat162float(p[i]);
}

/* One block per row (rows strided over the grid): max |x| reduced in the
 * block (a max is exact in any order), then kern_i8_code of each value.
 * bf16 rows of a multiple of 8 values, aligned, run quant_rows_reg instead
 * (row_common.cuh: the row read once, held in registers; the same bytes). */
template <typename T>
__global__ void i8_rows_kernel(const T *x, int64_t rows, int64_t cols, int8_t *q, float *scale) {
  __shared__ float part[Q8_THREADS / 32];
  __shared__ float row_amax;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * cols;
    float m = 0.0f;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, fabsf(q8_load(xr, i)));
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < Q8_THREADS / 32; w++) m = fmaxf(m, part[w]);
      row_amax = m;
      scale[r] = kern_i8_scale(m);
    }
    __syncthreads();
    const float mul = kern_i8_quant_mul(row_amax);
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x)
      q[r * cols + i] = kern_i8_code(q8_load(xr, i) * mul);
    __syncthreads(); /* part and row_amax are the next row's */
  }
}

extern "C" void kern_cuda_quantize_i8_rows(const void *x, kern_dtype x_dtype, int64_t rows,
                                           int64_t cols, int8_t *q, float *scale,
                                           cudaStream_t stream) {
  if (rows < 1 || cols < 1 || !x || !q || !scale)
    sp_fatal("quantize_i8_rows: %lld x %lld, x %p, q %p, scale %p: need a row, a column and "
             "every pointer", (long long)rows, (long long)cols, x, (void *)q, (void *)scale);
  if (x_dtype == KERN_DTYPE_BF16 &&
      quant_rows_reg(0, x, rows, cols, (uint8_t *)q, scale, stream))
    return;
  const unsigned blocks = (unsigned)(rows < Q8_MAX_BLOCKS ? rows : Q8_MAX_BLOCKS);
  if (x_dtype == KERN_DTYPE_F32)
    i8_rows_kernel<<<blocks, Q8_THREADS, 0, stream>>>((const float *)x, rows, cols, q, scale);
  else if (x_dtype == KERN_DTYPE_BF16)
    i8_rows_kernel<<<blocks, Q8_THREADS, 0, stream>>>((const __nv_bfloat16 *)x, rows, cols, q,
                                                      scale);
  else
    sp_fatal("quantize_i8_rows: dtype %d is not fp32 or bf16", (int)x_dtype);
  CUDA_LAUNCH_CHECK();
}

/* ---- W8A8 ------------------------------------------------------------------ */

__device__ __forceinline__ float acc_f(const float *p, int64_t i) { return p[i]; }
__device__ __forceinline__ float acc_f(const int32_t *p, int64_t i) { return __int2float_rn(p[i]); }
__device__ __forceinline__ void out_f(float *p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void out_f(__nv_bfloat16 *p, int64_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

/* y = act(fp32(fp32(acc x sx[m]) x sw[n]) + b[n]); acc and y may be the
 * same memory (each element read, then written, by one thread). Rows over
 * blockIdx.y (strided), columns over x. */
template <typename A, typename Y>
__global__ void w8a8_epilogue_kernel(const A *acc, const float *sx, const float *sw,
                                     const __nv_bfloat16 *b, Y *y, int64_t M, int64_t N,
                                     int act) {
  for (int64_t m = blockIdx.y; m < M; m += gridDim.y) {
    const float s = sx[m];
    for (int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; n < N;
         n += (int64_t)gridDim.x * blockDim.x) {
      float v = __fmul_rn(__fmul_rn(acc_f(acc, m * N + n), s), sw[n]);
      if (b) v = __fadd_rn(v, __bfloat162float(b[n]));
      if (act == KERN_CUDA_ACT_GELU_TANH) v = gelu_tanh_f(v);
      out_f(y, m * N + n, v);
    }
  }
}

template <typename A>
static void epilogue_launch(const A *acc, const kern_cuda_w8a8_params *p, cudaStream_t stream) {
  const dim3 grid(grid_for(p->N, DQ_THREADS, 64), (unsigned)(p->M < 65535 ? p->M : 65535));
  const __nv_bfloat16 *b = (const __nv_bfloat16 *)p->bias;
  if (p->y_dtype == KERN_DTYPE_F32)
    w8a8_epilogue_kernel<<<grid, DQ_THREADS, 0, stream>>>(acc, p->sx, p->sw, b, (float *)p->y,
                                                          p->M, p->N, (int)p->act);
  else
    w8a8_epilogue_kernel<<<grid, DQ_THREADS, 0, stream>>>(
        acc, p->sx, p->sw, b, (__nv_bfloat16 *)p->y, p->M, p->N, (int)p->act);
  CUDA_LAUNCH_CHECK();
}

extern "C" size_t kern_cuda_w8a8_scratch_bytes(kern_qfmt fmt, kern_cuda_w8a8_path path,
                                               int64_t M, int64_t N, kern_dtype y_dtype,
                                               int sm) {
  const int gemm_scales = fmt == KERN_QFMT_E4M3_ROW &&
                          (path == KERN_CUDA_W8A8_GEMM_SCALES ||
                           path == KERN_CUDA_W8A8_GEMM_SCALES_FAST ||
                           ((path == KERN_CUDA_W8A8_AUTO || path == KERN_CUDA_W8A8_FAST_AUTO) &&
                            sm == 90));
  if (gemm_scales || y_dtype == KERN_DTYPE_F32 || M < 1 || N < 1) return 0;
  return (size_t)M * (size_t)N * 4;
}

static void w8a8_check(const kern_cuda_w8a8_params *p, int sm) {
  const int fp8 = p->fmt == KERN_QFMT_E4M3_ROW;
  if (!fp8 && p->fmt != KERN_QFMT_I8_ROW)
    sp_fatal("linear_w8a8: format %d is not fp8_e4m3 or int8 (per-row scaled)", (int)p->fmt);
  if (p->M < 1 || p->K % 16 || p->N % 16 || p->K < 16 || p->N < 16)
    sp_fatal("linear_w8a8 %s: M %lld K %lld N %lld: need M >= 1 and K, N multiples of 16 "
             "(cuBLASLt's 8-bit rows of 16 bytes)", kern_qfmt_get(p->fmt)->name, (long long)p->M,
             (long long)p->K, (long long)p->N);
  if (!p->x_q || !p->w_q || !p->sx || !p->sw || !p->y)
    sp_fatal("linear_w8a8 %s: x_q %p w_q %p sx %p sw %p y %p: need every pointer",
             kern_qfmt_get(p->fmt)->name, p->x_q, p->w_q, (const void *)p->sx,
             (const void *)p->sw, p->y);
  if (p->y_dtype != KERN_DTYPE_F32 && p->y_dtype != KERN_DTYPE_BF16)
    sp_fatal("linear_w8a8: output dtype %d is not fp32 or bf16", (int)p->y_dtype);
  if (fp8 && sm < 89)
    sp_fatal("linear_w8a8: fp8 W8A8 needs fp8 tensor cores (sm_89 Ada or sm_90 Hopper); this "
             "GPU is sm_%d: use the weight-only path (kern_cuda_dequant_bf16)", sm);
  if ((p->path == KERN_CUDA_W8A8_GEMM_SCALES || p->path == KERN_CUDA_W8A8_GEMM_SCALES_FAST ||
       p->path == KERN_CUDA_W8A8_FAST_AUTO) &&
      (!fp8 || sm != 90))
    sp_fatal("linear_w8a8: the GEMM_SCALES paths are fp8 on sm_90 only (format %s, sm_%d)",
             kern_qfmt_get(p->fmt)->name, sm);
  if ((int)p->path < KERN_CUDA_W8A8_AUTO || p->path > KERN_CUDA_W8A8_FAST_AUTO)
    sp_fatal("linear_w8a8: unknown path %d", (int)p->path);
}

/* The epilogue path: the raw product into scratch (or into an fp32 y),
 * then the epilogue kernel into y. */
static void w8a8_epilogue_path(kern_cuda_gemm_ctx *ctx, const kern_cuda_w8a8_params *p, int sm,
                               cudaStream_t stream) {
  const size_t need = kern_cuda_w8a8_scratch_bytes(p->fmt, KERN_CUDA_W8A8_EPILOGUE, p->M, p->N,
                                                   p->y_dtype, sm);
  if (need > p->scratch_bytes || (need && (!p->scratch || ((uintptr_t)p->scratch & 15u))))
    sp_fatal("linear_w8a8 %s M %lld K %lld N %lld: the epilogue path needs %zu bytes of "
             "16-byte aligned scratch, given %zu at %p (kern_cuda_w8a8_scratch_bytes with path "
             "EPILOGUE)", kern_qfmt_get(p->fmt)->name, (long long)p->M, (long long)p->K,
             (long long)p->N, need, p->scratch_bytes, p->scratch);
  void *acc = need ? p->scratch : p->y;
  kern_cuda_matmul_params g;
  kern_cuda_gemm_linear_params(p->x_q, p->w_q, NULL, acc, KERN_DTYPE_F32, p->M, p->K, p->N,
                               KERN_CUDA_ACT_NONE, 0.0f, &g);
  if (p->fmt == KERN_QFMT_I8_ROW) {
    kern_cuda_gemm_q(ctx, &g, GEMM_IN_I8, NULL, NULL, 0, stream);
    epilogue_launch((const int32_t *)acc, p, stream);
  } else {
    kern_cuda_gemm_q(ctx, &g, GEMM_IN_E4M3, NULL, NULL, 0, stream);
    epilogue_launch((const float *)acc, p, stream);
  }
}

extern "C" kern_cuda_w8a8_path kern_cuda_linear_w8a8(kern_cuda_gemm_ctx *ctx,
                                                     const kern_cuda_w8a8_params *p,
                                                     cudaStream_t stream) {
  static int warned, warned_fast; /* each fallback is said once per process */
  const int sm = kern_cuda_gemm_ctx_sm(ctx);
  w8a8_check(p, sm);
  if (p->fmt == KERN_QFMT_E4M3_ROW && p->path != KERN_CUDA_W8A8_EPILOGUE && sm == 90) {
    kern_cuda_matmul_params g;
    kern_cuda_gemm_linear_params(p->x_q, p->w_q, p->bias, p->y, p->y_dtype, p->M, p->K, p->N,
                                 p->act, 0.0f, &g);
    const int may_refuse = p->path == KERN_CUDA_W8A8_AUTO || p->path == KERN_CUDA_W8A8_FAST_AUTO;
    const int fast = p->path == KERN_CUDA_W8A8_GEMM_SCALES_FAST ||
                     p->path == KERN_CUDA_W8A8_FAST_AUTO;
    if (fast && kern_cuda_gemm_q(ctx, &g, GEMM_IN_E4M3_OUTER_FAST, p->sx, p->sw, may_refuse,
                                 stream))
      return KERN_CUDA_W8A8_GEMM_SCALES_FAST;
    if (fast && !warned_fast++)
      sp_log_warn("linear_w8a8: cuBLASLt has no fast-accumulation fp8 GEMM for M %lld K %lld "
                  "N %lld; such shapes accumulate in full (run with -v for cuBLASLt's answer)",
                  (long long)p->M, (long long)p->K, (long long)p->N);
    if (kern_cuda_gemm_q(ctx, &g, GEMM_IN_E4M3_OUTER, p->sx, p->sw, may_refuse, stream))
      return KERN_CUDA_W8A8_GEMM_SCALES;
    if (!warned++)
      sp_log_warn("linear_w8a8: cuBLASLt has no outer-vector scaled fp8 GEMM for M %lld K %lld "
                  "N %lld; the scales go to an epilogue kernel (run with -v for cuBLASLt's "
                  "answer)", (long long)p->M, (long long)p->K, (long long)p->N);
  }
  w8a8_epilogue_path(ctx, p, sm, stream);
  return KERN_CUDA_W8A8_EPILOGUE;
}
