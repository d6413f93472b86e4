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
 * variants in tests/gpu/dev/norm_variants.cu. */
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include "cuda_check.h"
#include "kern_cuda.h"
#include "kern_cuda_quant.h"
#include "row_kernels.cuh"

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

/* ---- launchers: the one choice that ships (row_choice NULL) ----------- */

extern "C" void kern_cuda_gated_add(float *x, const void *y, kern_dtype y_dtype,
                                    const float *gate, int64_t rows, int64_t dim,
                                    cudaStream_t stream) {
  row_gated_add(NULL, x, y, y_dtype, gate, rows, dim, stream);
}

extern "C" void kern_cuda_layernorm_modulate(const float *x, const uint16_t *w,
                                             const uint16_t *b, const float *shift,
                                             const float *scale, uint16_t *y, int64_t rows,
                                             int64_t dim, float eps, cudaStream_t stream) {
  row_layernorm_modulate(NULL, x, w, b, shift, scale, y, rows, dim, eps, stream);
}

extern "C" void kern_cuda_gated_add_layernorm(float *x, const void *y, kern_dtype y_dtype,
                                              const float *gate, const uint16_t *w,
                                              const uint16_t *b, const float *shift,
                                              const float *scale, uint16_t *h, int64_t rows,
                                              int64_t dim, float eps, cudaStream_t stream) {
  row_gated_add_layernorm(NULL, x, y, y_dtype, gate, w, b, shift, scale, h, rows, dim, eps,
                          stream);
}

extern "C" void kern_cuda_norm_quant(const kern_cuda_norm_quant_params *p,
                                     cudaStream_t stream) {
  if (!p || !p->x) sp_fatal("norm_quant: params %p: need the params and x", (const void *)p);
  check_residual("norm_quant", p->rows, p->dim);
  const residual_row_params r = {p->x, p->y, p->gate, (const __nv_bfloat16 *)p->w,
                                 (const __nv_bfloat16 *)p->b, p->shift, p->scale,
                                 (__nv_bfloat16 *)p->h, (int)p->dim, p->eps,
                                 {p->qfmt, (uint8_t *)p->q, p->qscale}};
  row_norm_quant(NULL, &r, p->y_dtype, p->rows, stream);
}

extern "C" void kern_cuda_rmsnorm_rope(const void *x, kern_dtype x_dtype, const uint16_t *w,
                                       const float *cos_t, const float *sin_t, uint16_t *y,
                                       int64_t L, int64_t heads, int64_t hd, float eps,
                                       cudaStream_t stream) {
  row_rmsnorm_rope(NULL, x, x_dtype, w, cos_t, sin_t, y, L, heads, hd, eps, stream);
}
