/* Bulk dtype conversions (see kern_dtype.h). */
#include "kern_dtype.h"

void kern_bf16_to_f32_n(const uint16_t *src, float *dst, size_t n) {
#pragma omp parallel for schedule(static) if (n > (1u << 20))
  for (size_t i = 0; i < n; i++) dst[i] = kern_bf16_to_f32(src[i]);
}

void kern_f32_to_bf16_n(const float *src, uint16_t *dst, size_t n) {
#pragma omp parallel for schedule(static) if (n > (1u << 20))
  for (size_t i = 0; i < n; i++) dst[i] = kern_f32_to_bf16(src[i]);
}

static float amax_of(const float *x, size_t n) {
  float amax = 0.0f;
  for (size_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
  return amax;
}

float kern_fp8_quantize_n(const float *x, size_t n, uint8_t *q, float *scale) {
  const float amax = amax_of(x, n);
  const float mul = kern_fp8_quant_mul(amax);
  for (size_t i = 0; i < n; i++) q[i] = kern_f32_to_fp8_e4m3(x[i] * mul);
  *scale = kern_fp8_scale(amax);
  return amax;
}

void kern_fp8_quantize_rows(const float *x, int64_t rows, int64_t cols, uint8_t *q,
                            float *scale) {
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
  for (int64_t r = 0; r < rows; r++)
    (void)kern_fp8_quantize_n(x + r * cols, (size_t)cols, q + r * cols, &scale[r]);
}

void kern_fp8_dequantize_rows(const uint8_t *q, const float *scale, int64_t rows, int64_t cols,
                              float *w) {
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
  for (int64_t r = 0; r < rows; r++)
    for (int64_t i = 0; i < cols; i++)
      w[r * cols + i] = kern_fp8_e4m3_to_f32(q[r * cols + i]) * scale[r];
}

void kern_fp8_fake_quant_rows(float *x, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
  for (int64_t r = 0; r < rows; r++) {
    float *row = x + r * cols;
    const float amax = amax_of(row, (size_t)cols);
    const float mul = kern_fp8_quant_mul(amax), s = kern_fp8_scale(amax);
    for (int64_t i = 0; i < cols; i++)
      row[i] = kern_fp8_e4m3_to_f32(kern_f32_to_fp8_e4m3(row[i] * mul)) * s;
  }
}
