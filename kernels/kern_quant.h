/* Quantized weight formats: the one table of them, their sizes, and the CPU
 * dequantisers (the reference of the GPU's, kern_cuda_quant.h).
 *
 * A quantized weight is a row-major (rows, cols) matrix, a row being an
 * output channel of a linear layer (a row of PyTorch's [out, in] weight).
 * Each row is cols / block blocks of block_bytes bytes (kern_quant_decode.h
 * has every layout); the "row-scaled" formats also hold a float32 scale per
 * row, apart from the codes (a dataset NAME.scale beside the weight, as the
 * fp8 model files have it: MODEL.md "fp8 weights").
 *
 * The formats:
 * - fp8_e4m3 (ours, MODEL.md "fp8 weights"): one e4m3 byte per value, the
 *   row's scale s; value = fp32(e4m3(q) x s). Quantised by
 *   kern_fp8_quantize_rows (kern_dtype.h).
 * - int8 (ours): one int8 per value, the row's scale s; value = fp32(q x s).
 *   The quantiser, per row x of n fp32 values: amax = max |x|; m = 127 /
 *   amax and s = amax / 127, each rounded to fp32 (m = s = 1 when amax = 0);
 *   q_i = fp32(x_i x m) rounded to the nearest integer, ties to even, then
 *   clamped to [-127, 127] (symmetric: the quantiser never writes -128; a
 *   stored -128 reads as -128 s). Activations use the same rule per token
 *   (kern_i8_fake_quant_rows).
 * - GGUF's ggml types: fp32, fp16, bf16 (F32, F16, BF16: one value per
 *   block), q8_0, q5_0, q5_1, q4_0, q4_1 (blocks of 32), q6_k, q5_k, q4_k,
 *   q3_k, q2_k (blocks of 256), the bytes exactly as a GGUF file holds them. Their values are
 *   ggml's dequantisation, as gguf-py's numpy code computes it (the products
 *   exact, one fp32 rounding at most: kern_quant_decode.h).
 *
 * The bf16 dequantisation of every format is the fp32 one rounded to bf16,
 * nearest even (kern_f32_to_bf16): the weights the GPU's weight-only path
 * computes with. */
#ifndef KERN_QUANT_H
#define KERN_QUANT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kern_quant_decode.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kern_qfmt {
  KERN_QFMT_F32 = KQ_F32,
  KERN_QFMT_F16 = KQ_F16,
  KERN_QFMT_BF16 = KQ_BF16,
  KERN_QFMT_E4M3_ROW = KQ_E4M3_ROW,
  KERN_QFMT_I8_ROW = KQ_I8_ROW,
  KERN_QFMT_Q8_0 = KQ_Q8_0,
  KERN_QFMT_Q6_K = KQ_Q6_K,
  KERN_QFMT_Q5_K = KQ_Q5_K,
  KERN_QFMT_Q5_0 = KQ_Q5_0,
  KERN_QFMT_Q5_1 = KQ_Q5_1,
  KERN_QFMT_Q4_K = KQ_Q4_K,
  KERN_QFMT_Q4_0 = KQ_Q4_0,
  KERN_QFMT_Q4_1 = KQ_Q4_1,
  KERN_QFMT_Q3_K = KQ_Q3_K,
  KERN_QFMT_Q2_K = KQ_Q2_K,
  KERN_QFMT_COUNT = KQ_COUNT
} kern_qfmt;

typedef struct kern_qfmt_info {
  const char *name; /* lowercase, as a dataset's dtype attribute names it: "fp32", "bf16",
                       "fp8_e4m3" (the model file's names), "q4_k" (ggml's, lowercase) */
  int ggml_type;    /* the GGUF/ggml type code, -1 for ours */
  int block;        /* values per block along a row */
  int block_bytes;  /* bytes per block */
  int row_scale;    /* 1: a float32 scale per row beside the codes */
} kern_qfmt_info;

/* The table entry of f (NULL when f is out of range). */
const kern_qfmt_info *kern_qfmt_get(kern_qfmt f);
/* The format named name (case-insensitive) or of ggml type code t: 0 and
 * *out, or -1 (out untouched) when there is none. */
int kern_qfmt_from_name(const char *name, kern_qfmt *out);
int kern_qfmt_from_ggml(int t, kern_qfmt *out);
/* "F32, F16, ..., Q2_K": the ggml types this table reads, for messages. */
const char *kern_qfmt_ggml_list(void);
/* The stored dtype of a model file (kern_dtype.h) that holds format f, and
 * the format of a stored dtype: one of each per row of the table. */
kern_dtype kern_qfmt_dtype(kern_qfmt f);
kern_qfmt kern_dtype_qfmt(kern_dtype d);

/* Bytes of a (rows, cols) tensor of format f: *data_bytes the codes (rows x
 * cols / block x block_bytes), *scale_bytes the row scales (4 x rows for a
 * row-scaled format, else 0). Checks rows >= 1, cols >= 1, cols a multiple
 * of the block, and that no size overflows int64. 0 and both outputs, or -1
 * with a message in err naming the format and the check (outputs
 * untouched). Pure: no logging. */
int kern_qfmt_bytes(kern_qfmt f, int64_t rows, int64_t cols, uint64_t *data_bytes,
                    uint64_t *scale_bytes, char *err, size_t errlen);

/* A quantized tensor in memory (host pointers here; device pointers for
 * kern_cuda_quant.h). */
typedef struct kern_qtensor {
  kern_qfmt fmt;
  const void *data;    /* (rows, cols / block x block_bytes) bytes */
  const float *scale;  /* (rows) for a row-scaled format, else NULL */
  int64_t rows, cols;  /* validated by kern_qfmt_bytes */
} kern_qtensor;

/* Rows r0 .. r0 + n - 1 of t dequantised: out (n, cols) fp32, or bf16 bits
 * (the fp32 value rounded to nearest even). 0 <= r0, r0 + n <= rows. Rows
 * in parallel (OpenMP); each value has the same bits for any thread count
 * and any row range. No argument checks (kern_qfmt_bytes validated the
 * shape). */
void kern_quant_dequant_rows_f32(const kern_qtensor *t, int64_t r0, int64_t n, float *out);
void kern_quant_dequant_rows_bf16(const kern_qtensor *t, int64_t r0, int64_t n, uint16_t *out);

/* ---- Q8_0's quantiser ---------------------------------------------------- */

/* x (rows, cols) fp32, finite, cols a multiple of 32 -> Q8_0 blocks (rows,
 * cols / 32 x 34 bytes), ggml's reference rule (quantize_row_q8_0_ref):
 * per block of 32, d = amax / 127 and id = 1 / d (0 when d is 0), in fp32;
 * codes roundf(x id) (half away from zero); d stored as fp16, to nearest
 * even. Rows in parallel, the same bytes for any thread count. */
void kern_q8_0_quantize_rows(const float *x, int64_t rows, int64_t cols, uint8_t *out);

/* ---- int8 per row (the int8 format's quantiser, above) ----------------- */

#define KERN_I8_MAX 127.0f

/* The rule's factors for a row of largest magnitude amax (finite): q =
 * code(x x kern_i8_quant_mul(amax)), x ~ q x kern_i8_scale(amax); shared
 * with the GPU's quantiser (kern_cuda_quantize_i8_rows). */
static inline KERN_HD float kern_i8_quant_mul(float amax) {
  return amax > 0.0f ? KERN_I8_MAX / amax : 1.0f;
}
static inline KERN_HD float kern_i8_scale(float amax) {
  return amax > 0.0f ? amax / KERN_I8_MAX : 1.0f;
}
/* v rounded to the nearest integer, ties to even, clamped to +-127. */
static inline KERN_HD int8_t kern_i8_code(float v) {
  float q = rintf(v);
  q = q > KERN_I8_MAX ? KERN_I8_MAX : (q < -KERN_I8_MAX ? -KERN_I8_MAX : q);
  return (int8_t)q;
}

/* x (rows, cols) fp32, finite -> q (rows, cols) int8 and scale (rows). */
void kern_i8_quantize_rows(const float *x, int64_t rows, int64_t cols, int8_t *q, float *scale);
/* In place, per row (a token): x = fp32(q x s), q and s as the quantiser
 * makes them. x (rows, cols), finite. */
void kern_i8_fake_quant_rows(float *x, int64_t rows, int64_t cols);

/* The CPU reference of the int8 W8A8 linear (kern_cuda_linear_w8a8 with
 * KERN_QFMT_I8_ROW): acc = the exact integer dot product of x_q's row m and
 * w_q's row n, then y = fp32(fp32(fp32(acc) x sx[m]) x sw[n]) + b[n], each
 * step rounded once (the GPU's epilogue does the same operations in the
 * same order: bit-identical). x_q (M, K), w_q (N, K) int8; sx (M), sw (N)
 * fp32; b (N) fp32 or NULL; y (M, N) fp32. K <= 133,000 (|acc| < 2^31). */
void kern_cpu_linear_w8a8_i8(const int8_t *x_q, const float *sx, const int8_t *w_q,
                             const float *sw, const float *b, float *y, int64_t M, int64_t K,
                             int64_t N);

#ifdef __cplusplus
}
#endif

#endif
