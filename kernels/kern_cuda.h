/* CUDA kernels behind a C interface: every op of MODEL.md on the GPU,
 * each checked against its CPU reference (kern_cpu.h) before it is tuned.
 *
 * Conventions of every function here:
 * - pointers are device pointers, row-major, shapes in the comment of each
 *   argument; bf16 tensors are passed as uint16_t (the bit pattern of
 *   __nv_bfloat16) so C callers need no CUDA headers beyond the runtime;
 * - the residual stream, norms' statistics, modulation, softmax and all
 *   accumulations are fp32; narrowing to bf16 rounds to nearest even;
 * - async on `stream` (last argument), no host synchronisation, no device
 *   allocation (scratch comes from the caller's arena), except the GEMM
 *   context which allocates its workspace once at creation;
 * - a bad argument or a failed launch is a hot-path error: reported through
 *   sp_fatal (comm/log/log.h) with the op and the check, never returned;
 * - every output element is computed in a fixed order, so a rerun is
 *   bit-identical (the GEMM caches its algorithm per shape for the same
 *   reason).
 * GEMM operands must be 16-byte aligned (cudaMalloc and the arena give 256). */
#ifndef KERN_CUDA_H
#define KERN_CUDA_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "kern_dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- GEMM (cuda/cuda_gemm.cu) ------------------------------------------- */

/* One cuBLASLt handle, its workspace, and the cache of the algorithm chosen
 * by the heuristic for each shape (chosen once, reused: same shape, same
 * algorithm, same bits). One per rank; not thread-safe, and its calls must
 * be ordered on one stream (they share the workspace). The workspace is
 * one cudaMalloc at creation (start-up, never in the step loop). Creation
 * failures are fatal. workspace_bytes 0 picks 32 MiB. */
typedef struct kern_cuda_gemm_ctx kern_cuda_gemm_ctx;
kern_cuda_gemm_ctx *kern_cuda_gemm_ctx_create(size_t workspace_bytes);
/* The same on a workspace the caller owns: workspace_bytes of device
 * memory, 256-byte aligned, kept until destroy (an arena's buffer); the
 * context allocates none and frees none. */
kern_cuda_gemm_ctx *kern_cuda_gemm_ctx_create_in(void *workspace, size_t workspace_bytes);
void kern_cuda_gemm_ctx_destroy(kern_cuda_gemm_ctx *ctx);
/* The compute capability of the context's device, major x 10 + minor (90
 * for sm_90), read at creation: what decides the fp8 paths. */
int kern_cuda_gemm_ctx_sm(const kern_cuda_gemm_ctx *ctx);
/* While rows > 0, a GEMM of fewer rows (a chunk) runs the algorithm chosen
 * for `rows` rows, so each row's result equals the unchunked one's (see
 * cuda_gemm.cu). 0 turns it off. */
void kern_cuda_gemm_pin_rows(kern_cuda_gemm_ctx *ctx, int64_t rows);

typedef enum { KERN_CUDA_ACT_NONE = 0, KERN_CUDA_ACT_GELU_TANH = 1 } kern_cuda_act;

/* The general form, batched and strided, in row-major terms:
 *   D_i (M, N) = alpha * A_i (M, K) @ B_i^T [+ bias] [then GELU-tanh]
 * with B_i stored (N, K) (PyTorch Linear weight) or, when b_kn is 1, stored
 * (K, N) and used as is. A and B bf16, D fp32 or bf16, fp32 accumulation.
 * Leading dimensions in elements (>= the row length), batch strides in
 * elements; bias (N) bf16 or NULL, shared by the batch. The bias and GELU
 * run in cuBLASLt's epilogue where it offers one for the shape, else in a
 * separate kernel right after (same results within rounding). */
typedef struct kern_cuda_matmul_params {
  const uint16_t *a; /* (batch, M, lda) bf16 */
  const uint16_t *b; /* (batch, N, ldb) bf16, or (batch, K, ldb) when b_kn */
  const uint16_t *bias; /* (N) bf16 or NULL */
  void *d;           /* (batch, M, ldd) fp32 or bf16 */
  kern_dtype d_dtype;
  int64_t M, N, K;
  int64_t lda, ldb, ldd;
  int b_kn;
  int64_t batch; /* 1 for a plain GEMM */
  int64_t stride_a, stride_b, stride_d;
  float alpha; /* 1 for a linear layer */
  /* 0: D is overwritten; 1: the product is added to C, before the bias and
   * the activation: D = act(alpha A B^T + C + bias). */
  float beta;
  kern_cuda_act act;
  const void *c; /* C: (batch, M, ldd) of d's type; NULL: d itself (in place) */
} kern_cuda_matmul_params;
void kern_cuda_matmul(kern_cuda_gemm_ctx *ctx, const kern_cuda_matmul_params *p,
                      cudaStream_t stream);

/* A linear layer: y = act(x @ w^T + b).
 * x (M, K) bf16, w (N, K) bf16, b (N) bf16 or NULL, y (M, N) fp32 or bf16. */
void kern_cuda_linear(kern_cuda_gemm_ctx *ctx, const uint16_t *x, const uint16_t *w,
                      const uint16_t *b, void *y, kern_dtype y_dtype, int64_t M, int64_t K,
                      int64_t N, kern_cuda_act act, cudaStream_t stream);

/* The parameters of a linear layer y = act(x w^T + b + beta y), one batch:
 * x (M, K), w (N, K) (bf16, or the bytes of a quantized kind), b (N) bf16
 * or NULL, y (M, N), all row-major; alpha 1. With beta 1 it adds onto y
 * (or onto p->c, set after): the W8A8 LoRA pairs' y += t B'^T. */
void kern_cuda_gemm_linear_params(const void *x, const void *w, const uint16_t *b, void *y,
                                  kern_dtype y_dtype, int64_t M, int64_t K, int64_t N,
                                  kern_cuda_act act, float beta, kern_cuda_matmul_params *p);

/* A weight merged with its bypassed LoRA pairs (MODEL.md "LoRA", bypass),
 * for the linear layer's GEMM right after:
 *   w_out = bf16(w + bl @ a)
 * w (N, K), a (r, K), bl (N, r) bf16 (the LoRAs' scales folded into bl),
 * w_out (N, K) bf16, not w (never in place: cuda_gemm.cu says why); one
 * GEMM over the r columns, fp32 accumulation, w added before the single
 * rounding. The layer then costs one pass over its input, as without a
 * LoRA, plus this pass over its weight. */
void kern_cuda_lora_merge(kern_cuda_gemm_ctx *ctx, const uint16_t *w, const uint16_t *a,
                          const uint16_t *bl, int64_t r, uint16_t *w_out, int64_t N, int64_t K,
                          cudaStream_t stream);
/* The GEMM kern_cuda_lora_merge runs, as parameters (w_out == w: the same
 * GEMM in place, which the merge refuses and tests/gpu/test_ops.c
 * measures). */
void kern_cuda_lora_merge_params(const uint16_t *w, const uint16_t *a, const uint16_t *bl,
                                 int64_t r, uint16_t *w_out, int64_t N, int64_t K,
                                 kern_cuda_matmul_params *p);

/* A linear layer on an fp32 input for a few rows (the time embedding and
 * time projection, kept fp32 as the model computes them): y = x @ w^T + b,
 * fp32 arithmetic, bf16 weights widened. One warp per output element.
 * x (M, K) fp32, w (N, K) bf16, b (N) bf16 or NULL, y (M, N) fp32. */
void kern_cuda_linear_f32_input(const float *x, const uint16_t *w, const uint16_t *b, float *y,
                                int64_t M, int64_t K, int64_t N, cudaStream_t stream);

/* An fp8 linear layer (Hopper, cuBLASLt's e4m3 GEMM), in the same cache
 * and workspace as the bf16 GEMMs:
 *   y = act((x_q * sx) @ (w_q * sw)^T + b)
 * x_q (M, K) e4m3 and w_q (N, K) e4m3 (kern_cuda_quantize_fp8), sx and sw
 * (1) fp32 device pointers: the per-tensor dequantisation scales, read by
 * cuBLASLt when the GEMM runs (no host synchronisation); b (N) bf16 or
 * NULL; y (M, N) bf16 or fp32; fp32 accumulation. Per-tensor scales; a
 * scale per token and per output channel is kern_cuda_linear_w8a8
 * (kern_cuda_quant.h). K and N multiples of 16 (cuBLASLt's fp8 rule of 16-byte
 * rows), every pointer 16-byte aligned; a GPU without fp8 GEMMs (before
 * sm_89) gets no algorithm: fatal, naming the need. */
void kern_cuda_linear_fp8(kern_cuda_gemm_ctx *ctx, const uint8_t *x_q, const float *sx,
                          const uint8_t *w_q, const float *sw, const uint16_t *b, void *y,
                          kern_dtype y_dtype, int64_t M, int64_t K, int64_t N, kern_cuda_act act,
                          cudaStream_t stream);

/* ---- fp8 e4m3 tensors (cuda/cuda_fp8.cu) -------------------------------- */

/* Per-tensor quantiser, for weights and activations alike: amax = max |x|,
 * scale = kern_fp8_scale(amax) (amax / 448, 1 for an all-zero x), q =
 * e4m3(x * 448 / amax) rounded to nearest even, saturating: the bytes of
 * the CPU's kern_fp8_quantize_n. x (n) fp32 or bf16 (finite), q (n) e4m3;
 * scale (1) and amax (1) fp32 device, written (amax is its scratch too).
 * Two launches (the max, then the scaling); no host synchronisation. */
void kern_cuda_quantize_fp8(const void *x, kern_dtype x_dtype, int64_t n, uint8_t *q,
                            float *scale, float *amax, cudaStream_t stream);

/* Per row (MODEL.md "fp8 weights": a weight's output channel, an
 * activation's token): each row of x (rows, cols) quantised as
 * kern_cuda_quantize_fp8 quantises a tensor, into q (rows, cols) e4m3 and
 * scale (rows) fp32 device: the bytes and scales of the CPU's
 * kern_fp8_quantize_rows (tests/gpu/test_fp8_rows.c). x fp32 or bf16
 * (finite). One launch, a block per row; bf16 rows of a multiple of 8
 * values with x 16-byte and q 8-byte aligned take 16-byte loads, the row
 * held in registers (read once) up to 32,768 wide. */
void kern_cuda_quantize_fp8_rows(const void *x, kern_dtype x_dtype, int64_t rows, int64_t cols,
                                 uint8_t *q, float *scale, cudaStream_t stream);

/* y = bf16(e4m3_to_f32(q) * *scale): q (n) e4m3, scale (1) fp32 device,
 * y (n) bf16. */
void kern_cuda_fp8_to_bf16(const uint8_t *q, const float *scale, uint16_t *y, int64_t n,
                           cudaStream_t stream);

/* ---- residual stream: gated add, norms, modulation, RoPE (cuda/cuda_norm.cu) --
 *
 * Row sub-ranges: these ops see only the rows they are given. To run a
 * chunk of rows [r0, r0 + n), pass every per-row pointer offset by r0 rows
 * (x, y, h, and the RoPE tables by r0 * hd/2 values: the tables are indexed
 * by the row inside the call) and n as the row count; per-column operands
 * (w, b, gate, shift, scale) are not offset. A row's result does not depend
 * on how the rows are chunked.
 * Speed: rows whose width is a multiple of 8 (and hd, for RoPE) with every
 * pointer 16-byte aligned run the vector kernels (one read of each input
 * byte, 16-byte accesses); other rows run the scalar kernels, same results
 * within fp32 rounding. Forced choices for benchmarks are in
 * tests/gpu/dev/norm_variants.h. */

/* Modulation: out = table + e, table bf16 (the block's or head's
 * modulation), e fp32 (e0 or e), out fp32. table, e, out (n). */
void kern_cuda_modulation(const uint16_t *table, const float *e, float *out, int64_t n,
                          cudaStream_t stream);

/* y = LayerNorm(x) [* w + b] [* (1 + scale) + shift], biased variance, all
 * fp32, one rounding to bf16 at the end (the input of the next GEMM).
 * x (rows, dim) fp32; w, b (dim) bf16 or both NULL (no affine);
 * shift, scale (dim) fp32 or both NULL (no modulation); y (rows, dim) bf16. */
void kern_cuda_layernorm_modulate(const float *x, const uint16_t *w, const uint16_t *b,
                                  const float *shift, const float *scale, uint16_t *y,
                                  int64_t rows, int64_t dim, float eps, cudaStream_t stream);

/* Gated residual add into the fp32 stream: x += y * gate (fp32 arithmetic,
 * one fma). x (rows, dim) fp32; y (rows, dim) fp32 or bf16; gate (dim)
 * fp32 or NULL (gate 1: the cross-attention output). */
void kern_cuda_gated_add(float *x, const void *y, kern_dtype y_dtype, const float *gate,
                         int64_t rows, int64_t dim, cudaStream_t stream);

/* kern_cuda_gated_add, then kern_cuda_layernorm_modulate of the new x into
 * h, in one pass over x (x read once and written once, instead of read
 * twice): bit-identical to the two calls. x (rows, dim) fp32, updated in
 * place; y (rows, dim) fp32 or bf16, required; gate (dim) fp32 or NULL;
 * w, b (dim) bf16 or both NULL; shift, scale (dim) fp32 or both NULL;
 * h (rows, dim) bf16, must not alias x or y. */
void kern_cuda_gated_add_layernorm(float *x, const void *y, kern_dtype y_dtype,
                                   const float *gate, const uint16_t *w, const uint16_t *b,
                                   const float *shift, const float *scale, uint16_t *h,
                                   int64_t rows, int64_t dim, float eps, cudaStream_t stream);

/* q/k normalisation and RoPE: RMSNorm over the whole row (all heads
 * together) with weight, then, when tables are given, RoPE per head on
 * interleaved pairs: out0 = a0 cos - a1 sin, out1 = a0 sin + a1 cos.
 * The angles are computed on the host in double (kern_cpu_rope_table) and
 * stored fp32; the rotation itself is fp32 on the GPU (the CPU rotates in
 * double), a difference far below bf16 rounding.
 * x (L, heads*hd) fp32 or bf16 (x_dtype; the projection's output), w
 * (heads*hd) bf16, cos_t, sin_t (L, hd/2) fp32 or both NULL (no RoPE,
 * cross-attention), y (L, heads*hd) bf16, may alias x when x is bf16 (an
 * fp32 x is twice as wide: an aliased y would overwrite other rows' input).
 * hd even. */
void kern_cuda_rmsnorm_rope(const void *x, kern_dtype x_dtype, const uint16_t *w,
                            const float *cos_t,
                            const float *sin_t, uint16_t *y, int64_t L, int64_t heads,
                            int64_t hd, float eps, cudaStream_t stream);

/* ---- elementwise (cuda/cuda_elementwise.cu) ----------------------------- */

/* In place, n elements, fp32 or bf16 storage (fp32 arithmetic):
 * GELU with the tanh approximation; SiLU x * sigmoid(x). */
void kern_cuda_gelu_tanh(void *x, kern_dtype dtype, int64_t n, cudaStream_t stream);
void kern_cuda_silu(void *x, kern_dtype dtype, int64_t n, cudaStream_t stream);

/* Patch embedding input, patch (1,2,2): x (C, F, H, W) fp32 ->
 * tokens (F*(H/2)*(W/2), C*4) fp32 or bf16, value c*4 + kh*2 + kw reading
 * x[c, f, 2h+kh, 2w+kw], tokens in (f, h, w) row-major order. H, W even. */
void kern_cuda_patchify(const float *x, void *tokens, kern_dtype tokens_dtype, int64_t C,
                        int64_t F, int64_t H, int64_t W, cudaStream_t stream);

/* Unpatchify: tokens (F*(H/2)*(W/2), 4*C) fp32, value ((p*2+q)*2+r)*C + c
 * (p = 0) placed at x[c, f, 2h+q, 2w+r]; x (C, F, H, W) fp32. H, W even. */
void kern_cuda_unpatchify(const float *tokens, float *x, int64_t C, int64_t F, int64_t H,
                          int64_t W, cudaStream_t stream);

/* Bias and activation on a GEMM output in place: y = act(y + b), on the
 * first N values of each row. y (rows, ldy) fp32 or bf16, b (N) bf16 or
 * NULL. (The GEMM's fallback when cuBLASLt has no fused epilogue.) */
void kern_cuda_bias_act(void *y, kern_dtype y_dtype, const uint16_t *b, int64_t rows, int64_t N,
                        int64_t ldy, kern_cuda_act act, cudaStream_t stream);

/* dtype conversions, n elements (bf16 rounding: nearest even, NaN kept). */
void kern_cuda_bf16_to_f32(const uint16_t *src, float *dst, int64_t n, cudaStream_t stream);
void kern_cuda_f32_to_bf16(const float *src, uint16_t *dst, int64_t n, cudaStream_t stream);

/* The time sinusoid is 256 values once per step: it is computed on the host
 * in double (kern_cpu_time_sinusoid) and copied up; no kernel. */

/* ---- attention (cuda/cuda_attention.cu) --------------------------------- */

/* Scratch bytes for kern_cuda_attention to process `chunk` queries at a
 * time (scores fp32 and probabilities bf16 for all heads of the chunk):
 * the planner's plan_attn_scratch_bytes (planner/layout.h), which a
 * stage's layout counts. */
size_t kern_cuda_attention_scratch_bytes(int64_t chunk, int64_t Lk, int64_t heads);

/* Exact softmax attention, scale 1/sqrt(hd), no mask, any Lq and Lk:
 * queries in chunks (as many as the scratch holds, at least one), per chunk
 * S = q k^T (cuBLASLt, fp32), an exact fp32 softmax per row written as bf16
 * probabilities, out = P v (cuBLASLt, fp32 accumulation).
 * q (Lq, heads, hd), k, v (Lk, heads, hd), out (Lq, heads, hd), all bf16;
 * scratch at least kern_cuda_attention_scratch_bytes(1, Lk, heads),
 * 256-byte aligned. */
void kern_cuda_attention(kern_cuda_gemm_ctx *ctx, const uint16_t *q, const uint16_t *k,
                         const uint16_t *v, uint16_t *out, int64_t Lq, int64_t Lk,
                         int64_t heads, int64_t hd, void *scratch, size_t scratch_bytes,
                         cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
