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

float kern_fp8_quantize_n(const float *x, size_t n, uint8_t *q, float *scale) {
  float amax = 0.0f;
  for (size_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
  const float mul = kern_fp8_quant_mul(amax);
  for (size_t i = 0; i < n; i++) q[i] = kern_f32_to_fp8_e4m3(x[i] * mul);
  *scale = kern_fp8_scale(amax);
  return amax;
}
