/* Quantized weights on the GPU (cuda/cuda_quant.cu), behind a C interface
 * with kern_cuda.h's conventions (device pointers, stream last, a bad
 * argument or failed launch fatal through sp_fatal, reruns bit-identical):
 *
 * - the weight-only path: any format of kern_quant.h expanded to bf16 (the
 *   CPU's kern_quant_dequant_rows_bf16, bit for bit), right before the bf16
 *   GEMMs that read it;
 * - W8A8 linears: activations quantised per token (fp8: kern_cuda_quantize_
 *   fp8_rows, kern_cuda.h; int8: kern_cuda_quantize_i8_rows) times weights
 *   with a scale per output channel, through cuBLASLt's fp8 or int8 GEMM.
 *
 * Which GPU takes which path: fp8 W8A8 needs fp8 tensor cores (sm_89 Ada,
 * sm_90 Hopper); on sm_90 the two scale vectors are applied by cuBLASLt
 * itself (its outer-vector scale mode, cuBLASLt 12.9+), elsewhere (and
 * where cuBLASLt refuses that mode for a shape) by an unscaled fp8 GEMM
 * into fp32 and one epilogue kernel. int8 W8A8 runs on sm_80 and later
 * (an exact int32 GEMM, then the epilogue). The weight-only path runs
 * everywhere. */
#ifndef KERN_CUDA_QUANT_H
#define KERN_CUDA_QUANT_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "kern_cuda.h"
#include "kern_quant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- weight-only: dequantise to bf16 ------------------------------------ */

/* y (rows, cols) bf16 = t dequantised: t->data and t->scale are device
 * pointers (t->scale (rows) fp32 for a row-scaled format, else NULL), the
 * shape one kern_qfmt_bytes accepts. One launch; bit-identical to
 * kern_quant_dequant_rows_bf16 on the same bytes. y must not overlap the
 * codes; 16-byte aligned y and cols a multiple of 8 take 16-byte stores. */
void kern_cuda_dequant_bf16(const kern_qtensor *t, uint16_t *y, cudaStream_t stream);

/* ---- int8 activations ---------------------------------------------------- */

/* Per row (a token): x (rows, cols) fp32 or bf16 (finite) -> q (rows, cols)
 * int8 and scale (rows) fp32 by the int8 rule of kern_quant.h: the bytes
 * and scales of kern_i8_quantize_rows. One launch, a block per row (bf16
 * rows as kern_cuda_quantize_fp8_rows reads them). */
void kern_cuda_quantize_i8_rows(const void *x, kern_dtype x_dtype, int64_t rows, int64_t cols,
                                int8_t *q, float *scale, cudaStream_t stream);

/* ---- a norm's output quantised per token (cuda/cuda_norm.cu) ------------ */

/* kern_cuda_layernorm_modulate (y NULL) or kern_cuda_gated_add_layernorm
 * (y given) through one params struct, whose bf16 output h can also (or
 * instead) be quantised per token for the W8A8 linear layers after it: q
 * and qscale get the bytes and scales that kern_cuda_quantize_fp8_rows
 * (KERN_QFMT_E4M3_ROW) or kern_cuda_quantize_i8_rows (KERN_QFMT_I8_ROW)
 * would make from h, in the same pass over x: h is not read back, and not
 * written at all when NULL (tests/gpu/test_norm_quant.c). */
typedef struct kern_cuda_norm_quant_params {
  float *x;                   /* (rows, dim) fp32; updated in place when y is given */
  const void *y;              /* (rows, dim) fp32 or bf16 (y_dtype), or NULL: no add */
  kern_dtype y_dtype;
  const float *gate;          /* (dim) fp32 or NULL: gate 1 */
  const uint16_t *w, *b;      /* (dim) bf16 or both NULL: no affine */
  const float *shift, *scale; /* (dim) fp32 or both NULL: no modulation */
  uint16_t *h;                /* (rows, dim) bf16 or NULL; must not alias x or y */
  kern_qfmt qfmt;             /* KERN_QFMT_E4M3_ROW or KERN_QFMT_I8_ROW, with q */
  void *q;                    /* (rows, dim) codes or NULL (h or q is required) */
  float *qscale;              /* (rows) fp32, with q */
  int64_t rows, dim;
  float eps;
} kern_cuda_norm_quant_params;
void kern_cuda_norm_quant(const kern_cuda_norm_quant_params *p, cudaStream_t stream);

/* ---- W8A8 linear --------------------------------------------------------- */

/* Where the two scales are applied (AUTO in production, FAST_AUTO for
 * --fp8-accum fast; the others for benchmarks and tests, which compare
 * them). */
typedef enum kern_cuda_w8a8_path {
  KERN_CUDA_W8A8_AUTO = 0,       /* fp8 on sm_90: GEMM_SCALES where cuBLASLt takes the
                                    shape, else EPILOGUE; fp8 on sm_89, int8: EPILOGUE */
  KERN_CUDA_W8A8_GEMM_SCALES = 1, /* fp8 only: cuBLASLt's outer-vector scales (sm_90) */
  KERN_CUDA_W8A8_EPILOGUE = 2,   /* the raw product into fp32 (fp8) or int32 (int8), then
                                    one kernel: act(acc x sx x sw + b) */
  KERN_CUDA_W8A8_GEMM_SCALES_FAST = 3, /* GEMM_SCALES with cuBLASLt's fast fp8 accumulation
                                    (no periodic promotion to full fp32) */
  KERN_CUDA_W8A8_FAST_AUTO = 4,  /* fp8 on sm_90 only: GEMM_SCALES_FAST where cuBLASLt takes
                                    the shape, else as AUTO (GEMM_SCALES, else EPILOGUE),
                                    a warning once per process */
} kern_cuda_w8a8_path;

/* y (M, N) = act((x_q * sx) (w_q * sw)^T + bias): x_q (M, K) quantised per
 * row (token) with scales sx (M), w_q (N, K) per row (output channel) with
 * scales sw (N), fp32 (fp8) or exact int32 (int8) accumulation. */
typedef struct kern_cuda_w8a8_params {
  kern_qfmt fmt;        /* KERN_QFMT_E4M3_ROW or KERN_QFMT_I8_ROW */
  const void *x_q;      /* (M, K) e4m3 or int8 */
  const float *sx;      /* (M) */
  const void *w_q;      /* (N, K) e4m3 or int8 */
  const float *sw;      /* (N) */
  const uint16_t *bias; /* (N) bf16 or NULL */
  void *y;              /* (M, N) */
  kern_dtype y_dtype;   /* fp32 or bf16 */
  int64_t M, K, N;      /* K and N multiples of 16 */
  kern_cuda_act act;
  kern_cuda_w8a8_path path;
  void *scratch;        /* kern_cuda_w8a8_scratch_bytes of device memory, 16-byte aligned */
  size_t scratch_bytes;
} kern_cuda_w8a8_params;

/* Scratch bytes kern_cuda_linear_w8a8 needs for this shape on a device of
 * compute capability sm (major x 10 + minor): M x N x 4 for the epilogue
 * path with a bf16 y (the raw product), 0 otherwise (an fp32 y holds the
 * product in place). For fp8 on sm_90 with path AUTO (or FAST_AUTO) it is 0: cuBLASLt
 * 13.1 took the outer-vector mode for every shape tests/gpu/test_quant and
 * the benchmark ran on an H100 (M 5 .. 32,760; K, N 256 .. 13,824; bias,
 * GELU, bf16 and fp32 outputs); were it to refuse one, the call falls back
 * to the epilogue path and needs this function's answer for path EPILOGUE
 * (fatal, naming the bytes, without). */
size_t kern_cuda_w8a8_scratch_bytes(kern_qfmt fmt, kern_cuda_w8a8_path path, int64_t M,
                                    int64_t N, kern_dtype y_dtype, int sm);

/* Runs the linear and returns the path it took (GEMM_SCALES,
 * GEMM_SCALES_FAST or EPILOGUE; an AUTO or FAST_AUTO call that falls back
 * logs a warning once per process); fatal, naming the requirement, for an
 * fp8 format on a GPU before sm_89, the GEMM_SCALES paths or FAST_AUTO off
 * sm_90, GEMM_SCALES or GEMM_SCALES_FAST refused by cuBLASLt, a format
 * other than the two, K or N not a multiple of 16, a missing scale, or
 * too little scratch. */
kern_cuda_w8a8_path kern_cuda_linear_w8a8(kern_cuda_gemm_ctx *ctx,
                                          const kern_cuda_w8a8_params *p, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
