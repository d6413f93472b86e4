/* CPU dequantisers of the quantized formats and the int8 rules
 * (kern_quant.h). Each value is decoded by kern_quant_decode.h, the code the
 * GPU runs too; rows in parallel, every value computed by one thread in a
 * fixed order, so the bits do not depend on the thread count. Nothing
 * allocates. */
#include <math.h>
#include <string.h>

#include "kern_quant.h"

/* Row r of t, KQ_GROUP values at a time: the values of columns c .. c + n -
 * 1 (the row scale applied) into v, then stored as fp32 into f32 or as bf16
 * into b16 (one of them non-NULL; each points at the row's first value). */
static void dequant_row(const kern_qtensor *t, int64_t r, float *f32, uint16_t *b16) {
  const kern_qfmt_info *in = kern_qfmt_get(t->fmt);
  const int64_t row_bytes = t->cols / in->block * in->block_bytes;
  const uint8_t *row = (const uint8_t *)t->data + r * row_bytes;
  const float s = in->row_scale ? t->scale[r] : 1.0f;
  float v[KQ_GROUP];
  for (int64_t c = 0; c < t->cols; c += KQ_GROUP) {
    const int n = t->cols - c < KQ_GROUP ? (int)(t->cols - c) : KQ_GROUP;
    kq_decode((int)t->fmt, row, c, n, v);
    if (in->row_scale)
      for (int i = 0; i < n; i++) v[i] = kq_scale(v[i], s);
    if (f32)
      for (int i = 0; i < n; i++) f32[c + i] = v[i];
    else
      for (int i = 0; i < n; i++) b16[c + i] = kern_f32_to_bf16(v[i]);
  }
}

void kern_quant_dequant_rows_f32(const kern_qtensor *t, int64_t r0, int64_t n, float *out) {
#pragma omp parallel for schedule(static) if (n * t->cols > (1 << 16))
  for (int64_t i = 0; i < n; i++) dequant_row(t, r0 + i, out + i * t->cols, NULL);
}

void kern_quant_dequant_rows_bf16(const kern_qtensor *t, int64_t r0, int64_t n, uint16_t *out) {
#pragma omp parallel for schedule(static) if (n * t->cols > (1 << 16))
  for (int64_t i = 0; i < n; i++) dequant_row(t, r0 + i, NULL, out + i * t->cols);
}

/* ---- Q8_0 ----------------------------------------------------------------- */

void kern_q8_0_quantize_rows(const float *x, int64_t rows, int64_t cols, uint8_t *out) {
  const int64_t nb = cols / KQ_QK;
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
  for (int64_t r = 0; r < rows; r++)
    for (int64_t b = 0; b < nb; b++) {
      const float *v = x + r * cols + b * KQ_QK;
      uint8_t *blk = out + (r * nb + b) * KQ_Q8_0_BYTES;
      float amax = 0.0f;
      for (int i = 0; i < KQ_QK; i++) amax = fmaxf(amax, fabsf(v[i]));
      const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
      const uint16_t h = kern_f32_to_f16(d);
      memcpy(blk, &h, 2);
      for (int i = 0; i < KQ_QK; i++) blk[2 + i] = (uint8_t)(int8_t)roundf(v[i] * id);
    }
}

/* ---- int8 per row -------------------------------------------------------- */

static float row_amax(const float *x, int64_t n) {
  float a = 0.0f;
  for (int64_t i = 0; i < n; i++) a = fmaxf(a, fabsf(x[i]));
  return a;
}

void kern_i8_quantize_rows(const float *x, int64_t rows, int64_t cols, int8_t *q, float *scale) {
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    const float amax = row_amax(xr, cols), m = kern_i8_quant_mul(amax);
    for (int64_t i = 0; i < cols; i++) q[r * cols + i] = kern_i8_code(xr[i] * m);
    scale[r] = kern_i8_scale(amax);
  }
}

void kern_i8_fake_quant_rows(float *x, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
  for (int64_t r = 0; r < rows; r++) {
    float *xr = x + r * cols;
    const float amax = row_amax(xr, cols), m = kern_i8_quant_mul(amax), s = kern_i8_scale(amax);
    for (int64_t i = 0; i < cols; i++) xr[i] = (float)kern_i8_code(xr[i] * m) * s;
  }
}

/* Flat list: a GEMM's operands and shape, as BLAS and kern_cuda's W8A8 GEMM take them. */
void kern_cpu_linear_w8a8_i8(const int8_t *x_q, const float *sx, const int8_t *w_q,
                             const float *sw, const float *b, float *y, int64_t M, int64_t K,
                             int64_t N) {
#pragma omp parallel for schedule(static) if (M * N * K > (1 << 20))
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      const int8_t *xr = x_q + m * K, *wr = w_q + n * K;
      int32_t acc = 0;
      for (int64_t k = 0; k < K; k++) acc += (int32_t)xr[k] * (int32_t)wr[k];
      const float v = (float)acc * sx[m] * sw[n];
      y[m * N + n] = b ? v + b[n] : v;
    }
}
