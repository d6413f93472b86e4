/* Storage dtypes of weights and their conversion to fp32. bf16 is the top
 * half of an IEEE binary32; narrowing rounds to nearest, ties to even, and
 * keeps NaN a (quiet) NaN. */
#ifndef KERN_DTYPE_H
#define KERN_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum { KERN_DTYPE_BF16 = 0, KERN_DTYPE_F32 = 1 } kern_dtype;

static inline size_t kern_dtype_size(kern_dtype t) { return t == KERN_DTYPE_F32 ? 4 : 2; }
static inline const char *kern_dtype_name(kern_dtype t) {
  return t == KERN_DTYPE_F32 ? "fp32" : "bf16";
}

static inline float kern_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline uint16_t kern_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))
    return (uint16_t)((u >> 16) | 0x0040u); /* NaN stays NaN */
  u += 0x7fffu + ((u >> 16) & 1u);          /* round to nearest even */
  return (uint16_t)(u >> 16);
}

/* IEEE half to fp32 (for F16 checkpoints). */
static inline float kern_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else { /* subnormal: normalise */
      exp = 127 - 15 + 1;
      while (!(man & 0x400u)) { man <<= 1; exp--; }
      u = sign | (exp << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

void kern_bf16_to_f32_n(const uint16_t *src, float *dst, size_t n);
void kern_f32_to_bf16_n(const float *src, uint16_t *dst, size_t n);

#endif
