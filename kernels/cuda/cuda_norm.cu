/* The residual stream's row ops on the GPU (kern_cuda.h): the gated
 * residual add, LayerNorm (+ affine) + modulate, the two fused into one pass
 * over x, RMSNorm + RoPE, and the modulation table add. The kernels are in
 * row_kernels.cuh; here are the launchers and the one choice that ships:
 * the vector kernels with the split row_split_pick makes from the width,
 * and the scalar kernels for rows the vector kernels cannot take (a width
 * not a multiple of 8, a pointer not 16-byte aligned). The vector kernels
 * are the ones measured fastest on the H200 (launch/bench/RESULTS.md, "Row
 * kernels": 101-107% of the 4.0 TB/s copy rate against 61-87% for the
 * scalar ones at L 32,760 x D 5120, RMSNorm + RoPE 75% against 58%). The
 * forced splits and the scalar kernels at every width stay as benchmark
 * variants in launch/bench/dev/norm_variants.cu. */
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include "cuda_check.h"
#include "kern_cuda.h"
#include "row_kernels.cuh"

/* The vector kernels' work split of a row of `chunks` chunks: nv chunks a
 * thread, threads a whole number of warps. The smallest nv of 2, 3, 4, 5, 8
 * that gives whole warps and at most 256 threads with no thread idle (at
 * least two chunks a thread, so each thread has two loads in flight: 1536
 * wide -> 2 x 96 threads, 5120 -> 4 x 160); else the smallest nv of 1, 2,
 * 3, 4, 5, 8 within ROW_MAX_THREADS, the last warp partly idle. 0 when the
 * row is too wide (the caller runs the scalar kernel). */
static int row_split_pick(int64_t chunks, row_split *out) {
  static const int exact[] = {2, 3, 4, 5, 8}, any[] = {1, 2, 3, 4, 5, 8};
  for (int i = 0; i < 5; i++) {
    const int nv = exact[i];
    if (chunks % nv == 0 && (chunks / nv) % 32 == 0 && chunks / nv <= 256) {
      out->nv = nv;
      out->threads = (int)(chunks / nv);
      return 1;
    }
  }
  for (int i = 0; i < 6; i++) {
    const int64_t t = (chunks + any[i] - 1) / any[i];
    if (t <= ROW_MAX_THREADS) {
      out->nv = any[i];
      out->threads = (int)((t + 31) / 32 * 32);
      return 1;
    }
  }
  return 0;
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

/* ---- launchers ---------------------------------------------------------- */

/* Launches residual_row_kernel and returns 1, or returns 0 when the vector
 * kernel cannot take the call; the caller then runs the scalar kernels. */
static int residual_row_launch(const residual_row_params *p, kern_dtype y_dtype, int64_t rows,
                               cudaStream_t stream) {
  row_split s;
  if (p->dim % ROW_VEC != 0 || !row_split_pick(p->dim / ROW_VEC, &s) || !residual_row_aligned(p))
    return 0;
  residual_row_run(p, y_dtype, rows, &s, stream);
  return 1;
}

extern "C" void kern_cuda_gated_add(float *x, const void *y, kern_dtype y_dtype,
                                    const float *gate, int64_t rows, int64_t dim,
                                    cudaStream_t stream) {
  check_residual("gated_add", rows, dim);
  check_dtype("gated_add", "y", y_dtype);
  if (rows == 0) return;
  const residual_row_params p = {x, y, gate, NULL, NULL, NULL, NULL, NULL, (int)dim, 0.0f};
  if (!residual_row_launch(&p, y_dtype, rows, stream))
    gated_add_scalar(x, y, y_dtype, gate, rows, dim, stream);
}

extern "C" void kern_cuda_layernorm_modulate(const float *x, const uint16_t *w,
                                             const uint16_t *b, const float *shift,
                                             const float *scale, uint16_t *y, int64_t rows,
                                             int64_t dim, float eps, cudaStream_t stream) {
  check_residual("layernorm_modulate", rows, dim);
  check_norm_args("layernorm_modulate", w, b, shift, scale);
  if (rows == 0) return;
  /* x is only read: residual_row_kernel writes x back only when y is given. */
  const residual_row_params p = {(float *)x, NULL, NULL, (const __nv_bfloat16 *)w,
                                 (const __nv_bfloat16 *)b, shift, scale, (__nv_bfloat16 *)y,
                                 (int)dim, eps};
  if (!residual_row_launch(&p, KERN_DTYPE_F32, rows, stream)) layernorm_scalar(&p, rows, stream);
}

extern "C" void kern_cuda_gated_add_layernorm(float *x, const void *y, kern_dtype y_dtype,
                                              const float *gate, const uint16_t *w,
                                              const uint16_t *b, const float *shift,
                                              const float *scale, uint16_t *h, int64_t rows,
                                              int64_t dim, float eps, cudaStream_t stream) {
  check_residual("gated_add_layernorm", rows, dim);
  check_dtype("gated_add_layernorm", "y", y_dtype);
  check_norm_args("gated_add_layernorm", w, b, shift, scale);
  if (!y || !h) sp_fatal("gated_add_layernorm: y and h are required");
  if (rows == 0) return;
  const residual_row_params p = {x, y, gate, (const __nv_bfloat16 *)w, (const __nv_bfloat16 *)b,
                                 shift, scale, (__nv_bfloat16 *)h, (int)dim, eps};
  if (residual_row_launch(&p, y_dtype, rows, stream)) return;
  gated_add_scalar(x, y, y_dtype, gate, rows, dim, stream);
  layernorm_scalar(&p, rows, stream);
}

extern "C" void kern_cuda_rmsnorm_rope(const void *x, kern_dtype x_dtype, const uint16_t *w,
                                       const float *cos_t,
                                       const float *sin_t, uint16_t *y, int64_t L,
                                       int64_t heads, int64_t hd, float eps,
                                       cudaStream_t stream) {
  check_rmsnorm_rope(x_dtype, w, cos_t, sin_t, L, heads, hd);
  if (L == 0) return;
  const int64_t dim = heads * hd;
  row_split s;
  const int vec = hd % ROW_VEC == 0 && row_split_pick(dim / ROW_VEC, &s) && aligned16(x) &&
                  aligned16(w) && aligned16(cos_t) && aligned16(sin_t) && aligned16(y);
  rmsnorm_rope_run(x, x_dtype, (const __nv_bfloat16 *)w, cos_t, sin_t, (__nv_bfloat16 *)y, L,
                   dim, hd, eps, vec ? &s : NULL, stream);
}
