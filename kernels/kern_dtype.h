/* Storage dtypes of weights and their conversion to fp32. bf16 is the top
 * half of an IEEE binary32; narrowing rounds to nearest, ties to even, and
 * keeps NaN a (quiet) NaN. fp8 e4m3 (the OCP "e4m3fn" of Hopper's tensor
 * cores) and its per-tensor scale are at the end. */
#ifndef KERN_DTYPE_H
#define KERN_DTYPE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The few helpers CUDA code shares with the CPU (the fp8 scale formula). */
#if defined(__CUDACC__)
#define KERN_HD __host__ __device__
#else
#define KERN_HD
#endif

/* E4M3: fp8 e4m3 bytes, the DiT blocks' linear weights of an fp8 model
 * file only (MODEL.md "fp8 weights"); no group is laid out in it. The
 * values from F16 on are the other stored formats of quantized weights
 * (kern_quant.h's table, kern_dtype_qfmt): fp16, int8 with a scale per
 * row, and GGUF's block formats, which only the model file and the
 * dequantisers know; a dtype of activations is BF16 or F32. */
typedef enum {
  KERN_DTYPE_BF16 = 0,
  KERN_DTYPE_F32 = 1,
  KERN_DTYPE_E4M3 = 2,
  KERN_DTYPE_F16 = 3,
  KERN_DTYPE_I8 = 4,
  KERN_DTYPE_Q8_0 = 5,
  KERN_DTYPE_Q6_K = 6,
  KERN_DTYPE_Q5_K = 7,
  KERN_DTYPE_Q5_0 = 8,
  KERN_DTYPE_Q5_1 = 9,
  KERN_DTYPE_Q4_K = 10,
  KERN_DTYPE_Q4_0 = 11,
  KERN_DTYPE_Q4_1 = 12,
  KERN_DTYPE_Q3_K = 13,
  KERN_DTYPE_Q2_K = 14,
  KERN_DTYPE_COUNT = 15
} kern_dtype;

/* Bytes of one value; 0 for a block format (GGUF's Q8_0 ... Q2_K: its
 * bytes per row are kern_qfmt_bytes'). */
static inline size_t kern_dtype_size(kern_dtype t) {
  switch (t) {
  case KERN_DTYPE_F32: return 4;
  case KERN_DTYPE_BF16: case KERN_DTYPE_F16: return 2;
  case KERN_DTYPE_E4M3: case KERN_DTYPE_I8: return 1;
  default: return 0;
  }
}
/* The name a dataset's dtype attribute gives it (kern_quant.h's table
 * names the same; tests/kernels/test_quant.c ties the two). */
static inline const char *kern_dtype_name(kern_dtype t) {
  static const char *const names[KERN_DTYPE_COUNT] = {
      "bf16", "fp32", "fp8_e4m3", "fp16", "int8", "q8_0", "q6_k", "q5_k",
      "q5_0", "q5_1", "q4_k", "q4_0", "q4_1", "q3_k", "q2_k"};
  return (int)t >= 0 && (int)t < KERN_DTYPE_COUNT ? names[t] : "?";
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

/* fp32 rounded to TF32 (the top 10 of the 23 mantissa bits kept): the
 * form the TF32 tensor cores multiply. Which rounding cuDNN and cuBLASLt
 * apply is not documented, so both candidates are here: to nearest with
 * ties away from zero (PTX cvt.rna.tf32.f32), or truncation (the low 13
 * bits dropped). Inf and NaN are kept; a finite value may round up to
 * inf. For the CPU emulation of the CUDA VAE decoder's tf32 mode
 * (wan_vae.h, wan_vae_decoder_tf32). */
static inline float kern_f32_round_tf32(float f, int truncate) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) != 0x7f800000u) {
    if (!truncate) u += 0x1000u; /* half of the last kept bit, on the magnitude */
    u &= ~0x1fffu;
  }
  memcpy(&f, &u, sizeof f);
  return f;
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

/* ---- fp8 e4m3 ------------------------------------------------------------
 * Bits s eeee mmm, exponent bias 7: e 1..15 is (1 + m/8) 2^(e-7), e 0 is
 * the subnormal m/8 2^-6, and s 1111 111 is NaN (no infinities). The
 * largest finite value is 448 (e 15, m 6). */
#define KERN_FP8_E4M3_MAX 448.0f

static inline float kern_fp8_e4m3_to_f32(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  float v;
  if (e == 15 && m == 7) return (b & 0x80u) ? -NAN : NAN;
  v = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), e - 10);
  return (b & 0x80u) ? -v : v;
}

/* Rounds v >= 0 (a float holding at most 24 significant bits, so v - floor
 * is exact) to an integer, ties to even. */
static inline float kern_round_half_even(float v) {
  float f = floorf(v), d = v - f;
  if (d > 0.5f || (d == 0.5f && fmodf(f, 2.0f) != 0.0f)) f += 1.0f;
  return f;
}

/* fp32 to IEEE half, to nearest even (ggml's and numpy's conversion): a
 * magnitude past 65504 rounds to infinity, NaN stays NaN. */
static inline uint16_t kern_f32_to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds past 65504 */
  if (a < 0x38800000u) /* subnormal half: steps of 2^-24 (the product is exact) */
    return (uint16_t)(sign | (uint16_t)kern_round_half_even(fabsf(f) * 16777216.0f));
  const uint32_t r = a + 0xfffu + ((a >> 13) & 1u); /* to nearest even on bit 13 */
  return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

/* fp32 -> e4m3, round to nearest, ties to even, saturating: a finite value
 * or an infinity beyond 448 becomes +-448, NaN becomes NaN (0x7f with the
 * sign), -0 keeps its sign. The same as the GPU's __nv_cvt_float_to_fp8
 * with __NV_SATFINITE and __NV_E4M3. */
static inline uint8_t kern_f32_to_fp8_e4m3(float f) {
  const uint8_t sign = signbit(f) ? 0x80u : 0u;
  const float a = fabsf(f);
  if (isnan(f)) return (uint8_t)(sign | 0x7fu);
  if (a >= KERN_FP8_E4M3_MAX) return (uint8_t)(sign | 0x7eu);
  if (a < 0.015625f) /* subnormal: steps of 2^-9; 8 steps is the smallest normal */
    return (uint8_t)(sign | (uint8_t)kern_round_half_even(a * 512.0f));
  int e2;
  (void)frexpf(a, &e2); /* a = f 2^e2, f in [0.5, 1): a's exponent is e2 - 1 */
  int e = e2 - 1;
  int m = (int)kern_round_half_even((ldexpf(a, -e) - 1.0f) * 8.0f);
  if (m == 8) m = 0, e++;
  /* a < 448 rounds to at most 448 (e 8, m 6): never the NaN pattern */
  return (uint8_t)(sign | (uint8_t)((e + 7) << 3) | (uint8_t)m);
}

/* The per-tensor scale of fp8 tensors: a tensor of largest magnitude amax
 * is stored as q = e4m3(x * kern_fp8_quant_mul(amax)), so amax lands on
 * 448, and read back as x ~ e4m3_to_f32(q) * kern_fp8_scale(amax) (the
 * dequantisation scale cuBLASLt and cuDNN multiply by). An all-zero tensor
 * has scale 1. amax must be finite. */
static inline KERN_HD float kern_fp8_quant_mul(float amax) {
  return amax > 0.0f ? KERN_FP8_E4M3_MAX / amax : 1.0f;
}
static inline KERN_HD float kern_fp8_scale(float amax) {
  return amax > 0.0f ? amax / KERN_FP8_E4M3_MAX : 1.0f;
}

/* The CPU reference of the per-tensor quantiser (kern_cuda_quantize_fp8):
 * x (n) fp32 -> q (n) e4m3 and *scale = kern_fp8_scale(max |x|). Returns
 * that amax. The one quantiser of fp8 weights and activations (MODEL.md
 * "fp8 weights"): the rows' versions below apply it to each row. */
float kern_fp8_quantize_n(const float *x, size_t n, uint8_t *q, float *scale);

/* Per row (a weight's output channel): kern_fp8_quantize_n of each row of
 * x (rows, cols) into q (rows, cols) and scale (rows). Rows in parallel;
 * each row's bytes are the same for any thread count. */
void kern_fp8_quantize_rows(const float *x, int64_t rows, int64_t cols, uint8_t *q,
                            float *scale);
/* w (rows, cols) = e4m3_to_f32(q) x scale[row], each product rounded to
 * fp32 once. */
void kern_fp8_dequantize_rows(const uint8_t *q, const float *scale, int64_t rows, int64_t cols,
                              float *w);
/* In place, per row (a token of an activation): x = e4m3_to_f32(e4m3(x x
 * kern_fp8_quant_mul(amax))) x kern_fp8_scale(amax), amax the row's max
 * |x|: kern_fp8_quantize_n then kern_fp8_dequantize_rows, without the
 * bytes. x (rows, cols), finite. */
void kern_fp8_fake_quant_rows(float *x, int64_t rows, int64_t cols);

void kern_bf16_to_f32_n(const uint16_t *src, float *dst, size_t n);
void kern_f32_to_bf16_n(const float *src, uint16_t *dst, size_t n);

#endif
