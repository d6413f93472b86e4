/* fp8 e4m3 on the CPU (kern_dtype.h), the reference of the GPU's fp8 ops:
 * - decoding: all 256 bit patterns against the definition written out in
 *   float64 (sign, exponent bias 7, subnormals, the one NaN pattern);
 * - encoding: random and hand-picked fp32 values against a brute-force
 *   nearest search over the 127 finite non-negative codes (ties to the
 *   code with the even mantissa, saturation at 448, NaN kept), and every
 *   code and every midpoint between neighbours;
 * - the per-tensor quantiser: the scale formula amax / 448, the largest
 *   value landing on 448, and the relative L2 error of a quantised normal
 *   tensor within the bound that e4m3's 3 mantissa bits give. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_dtype.h"
#include "sp_test.h"

/* The definition: (-1)^s 2^(e-7) (1 + m/8), or 2^-6 m/8 when e is 0. */
static double e4m3_def(int b) {
  int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return NAN;
  double v = e ? pow(2.0, e - 7) * (1.0 + m / 8.0) : pow(2.0, -6) * (m / 8.0);
  return s ? -v : v;
}

/* Nearest code to f by search; ties to the even code (even mantissa bit). */
static uint8_t e4m3_nearest(float f) {
  if (isnan(f)) return signbit(f) ? 0xff : 0x7f;
  double a = fabs((double)f);
  int best = 0;
  double bd = INFINITY;
  for (int b = 0; b < 0x7f; b++) {
    double d = fabs(e4m3_def(b) - a);
    if (d < bd || (d == bd && (b & 1) == 0)) bd = d, best = b;
  }
  if (a >= 448.0) best = 0x7e; /* saturating: beyond the largest finite value */
  return (uint8_t)(best | (signbit(f) ? 0x80 : 0));
}

static void check_decode(void) {
  int bad = 0;
  for (int b = 0; b < 256; b++) {
    double want = e4m3_def(b);
    float got = kern_fp8_e4m3_to_f32((uint8_t)b);
    int ok = isnan(want) ? isnan(got) : (double)got == want && !signbit(got) == !signbit(want);
    if (!ok && bad++ < 5) CHECK(0, "decode 0x%02x: got %.9g, want %.9g", b, got, want);
  }
  CHECK(kern_fp8_e4m3_to_f32(0x7e) == KERN_FP8_E4M3_MAX, "0x7e is not 448");
  CHECK(bad == 0, "decode: %d of 256 patterns wrong", bad);
}

static void check_encode_one(float f, int *bad) {
  uint8_t got = kern_f32_to_fp8_e4m3(f), want = e4m3_nearest(f);
  if (got != want && (*bad)++ < 5)
    CHECK(0, "encode %.9g: got 0x%02x, want 0x%02x", f, got, want);
}

static void check_encode(void) {
  int bad = 0;
  /* every code, and every midpoint between neighbouring codes (the ties) */
  for (int b = 0; b < 0x7e; b++) {
    double lo = e4m3_def(b), hi = e4m3_def(b + 1);
    for (int s = 0; s < 2; s++) {
      float sg = s ? -1.0f : 1.0f;
      check_encode_one(sg * (float)lo, &bad);
      check_encode_one(sg * (float)((lo + hi) / 2), &bad);
      check_encode_one(sg * nextafterf((float)((lo + hi) / 2), 0.0f), &bad);
      check_encode_one(sg * nextafterf((float)((lo + hi) / 2), 1e9f), &bad);
    }
  }
  const float special[] = {448.0f, 455.9f, 464.0f, 480.0f, 1e30f, INFINITY, -INFINITY, NAN,
                           0.0f,   -0.0f,  1e-30f, 0.0009765625f, 0.00097656f, 0.0009766f};
  for (size_t i = 0; i < sizeof special / sizeof *special; i++) check_encode_one(special[i], &bad);
  /* random values over the whole range and a little beyond */
  for (int i = 0; i < 200000; i++) {
    float f = (float)(sp_rand_normal() * pow(2.0, sp_rand_int(-14, 10)));
    check_encode_one(f, &bad);
  }
  for (int b = 0; b < 256; b++) /* decode then encode is the identity */
    if ((b & 0x7f) != 0x7f && kern_f32_to_fp8_e4m3(kern_fp8_e4m3_to_f32((uint8_t)b)) != b &&
        bad++ < 5)
      CHECK(0, "round trip of 0x%02x", b);
  CHECK(bad == 0, "encode: %d values wrong", bad);
}

/* Relative L2 of a quantised normal tensor: e4m3 keeps 3 mantissa bits, a
 * relative rounding error uniform in +-2^-4 for normal values, rms 2^-4 /
 * sqrt(3) = 3.6e-2 at worst and about 2.6e-2 averaged over the binade; the
 * bound 4e-2 holds for any normal-range data, and the tail below 2^-6
 * (subnormals, absolute error) is negligible for amax / 448 scaling of a
 * normal tensor. A broken rounding (truncation: twice the error) fails. */
static void check_quantize(size_t n) {
  float *x = sp_test_alloc((int64_t)n), *back = sp_test_alloc((int64_t)n);
  uint8_t *q = sp_test_malloc(n);
  double *ref = sp_test_dalloc((int64_t)n);
  double amax = 0;
  for (size_t i = 0; i < n; i++) {
    x[i] = (float)(sp_rand_normal() * 3.0);
    ref[i] = x[i];
    if (fabs(ref[i]) > amax) amax = fabs(ref[i]);
  }
  float scale = 0.0f;
  float got_amax = kern_fp8_quantize_n(x, n, q, &scale);
  CHECK((double)got_amax == amax, "quantize: amax %.9g, want %.9g", got_amax, amax);
  CHECK(fabs((double)scale - amax / 448.0) <= 1e-7 * amax / 448.0,
        "quantize: scale %.9g, want amax/448 = %.9g", scale, amax / 448.0);
  int top = 0;
  for (size_t i = 0; i < n; i++) {
    back[i] = kern_fp8_e4m3_to_f32(q[i]) * scale;
    top += (q[i] & 0x7f) == 0x7e;
  }
  CHECK(top >= 1, "quantize: no element on 448 (the largest should be)");
  double err = sp_test_rel_l2(back, ref, (int64_t)n);
  CHECK(err <= 4e-2 && err >= 1e-2, "quantize n=%zu: rel L2 %.3g outside [1e-2, 4e-2]", n, err);
  float zero[4] = {0, 0, -0.0f, 0}, s0 = 0;
  uint8_t qz[4];
  kern_fp8_quantize_n(zero, 4, qz, &s0);
  CHECK(s0 == 1.0f && (qz[0] | qz[1] | qz[3]) == 0 && qz[2] == 0x80, "quantize zeros: scale %g",
        s0);
  printf("quantize n=%zu: amax %.4g, scale %.4g, rel L2 %.3e\n", n, amax, scale, err);
  free(x), free(back), free(q), free(ref);
}

/* The per-row forms (MODEL.md "fp8 weights"): kern_fp8_quantize_rows is
 * kern_fp8_quantize_n on each row; kern_fp8_dequantize_rows is value x the
 * row's scale, one fp32 rounding; kern_fp8_fake_quant_rows equals the two
 * in turn, bit for bit. One row all zeros (scale 1), rows of very
 * different magnitudes; large enough to run on several threads. */
static void check_rows(int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  float *x = sp_test_alloc(n), *deq = sp_test_alloc(n), *fake = sp_test_alloc(n);
  float *scale = sp_test_alloc(rows);
  uint8_t *q = sp_test_malloc((size_t)n), *q1 = sp_test_malloc((size_t)cols);
  for (int64_t r = 0; r < rows; r++) {
    const double mag = r == 1 ? 0.0 : ldexp(1.0, (int)sp_rand_int(-20, 20));
    for (int64_t i = 0; i < cols; i++) x[r * cols + i] = (float)(sp_rand_normal() * mag);
  }
  memcpy(fake, x, (size_t)n * sizeof(float));
  kern_fp8_quantize_rows(x, rows, cols, q, scale);
  kern_fp8_dequantize_rows(q, scale, rows, cols, deq);
  kern_fp8_fake_quant_rows(fake, rows, cols);
  int bad = 0;
  for (int64_t r = 0; r < rows; r++) {
    float s1 = 0.0f;
    kern_fp8_quantize_n(x + r * cols, (size_t)cols, q1, &s1);
    bad += memcmp(q1, q + r * cols, (size_t)cols) != 0 || s1 != scale[r];
    for (int64_t i = 0; i < cols; i++)
      bad += deq[r * cols + i] != kern_fp8_e4m3_to_f32(q1[i]) * s1;
  }
  CHECK(bad == 0, "rows %lld x %lld: %d rows or values differ from kern_fp8_quantize_n",
        (long long)rows, (long long)cols, bad);
  CHECK(scale[1] == 1.0f, "an all-zero row has scale %g, want 1", scale[1]);
  CHECK(memcmp(fake, deq, (size_t)n * sizeof(float)) == 0,
        "fake quantisation differs from quantise then dequantise");
  CHECK(sp_test_guard_ok(deq, n) && sp_test_guard_ok(fake, n) && sp_test_guard_ok(scale, rows),
        "rows: a write past the end");
  free(x), free(deq), free(fake), free(scale), free(q), free(q1);
}

int main(void) {
  sp_test_begin("kernels/fp8");
  check_rows(3, 5);
  check_rows(300, 640);
  check_decode();
  check_encode();
  check_quantize(1 << 16);
  check_quantize(1000);
  return sp_test_end();
}
