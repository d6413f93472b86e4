/* The quantized formats on the CPU (kernels/kern_quant.h), beside the
 * bit-exact comparison of the ggml types with gguf-py (test_quant_gguf.sh):
 * - the table: names and ggml codes round-trip, block sizes divide the
 *   decoder's group, the bytes of a tensor and each refusal of
 *   kern_qfmt_bytes (rows 0, cols not a multiple of the block, a size
 *   overflowing 64 bits), with a message naming the format;
 * - fp8_e4m3 rows: the dequantiser against the definition written out
 *   (sign, exponent bias 7, subnormal, times the row's scale, one fp32
 *   rounding) and against kern_fp8_dequantize_rows, every one of the 256
 *   codes in a row;
 * - int8 rows: the quantiser against the rule written out in double (m and
 *   s rounded to fp32, the product rounded to fp32, ties to even, clamp),
 *   the largest magnitude on +-127, an all-zero row (scale 1), the
 *   reconstruction error within half a step, the fake quantiser equal to
 *   quantise-then-dequantise, and every int8 code (including -128, which
 *   the quantiser never writes) dequantised as code x scale;
 * - the int8 W8A8 reference against a float64 evaluation of its formula
 *   and against an fp32 linear of the dequantised operands;
 * - 1, 2 and 3 threads give the same bits.
 * Fresh random inputs each run (SP_SEED=n replays). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_cpu.h"
#include "kern_quant.h"
#include "sp_test.h"

static void check_table(void) {
  for (int f = 0; f < KERN_QFMT_COUNT; f++) {
    const kern_qfmt_info *in = kern_qfmt_get((kern_qfmt)f);
    kern_qfmt g = KERN_QFMT_COUNT;
    CHECK(kern_qfmt_from_name(in->name, &g) == 0 && g == (kern_qfmt)f, "name %s", in->name);
    if (in->ggml_type >= 0)
      CHECK(kern_qfmt_from_ggml(in->ggml_type, &g) == 0 && g == (kern_qfmt)f, "ggml %d",
            in->ggml_type);
    CHECK(in->block == 1 || in->block % KQ_GROUP == 0, "%s: block %d", in->name, in->block);
    CHECK(in->row_scale == (f == KERN_QFMT_E4M3_ROW || f == KERN_QFMT_I8_ROW), "%s row scale",
          in->name);
    /* the model file's stored dtype of each format: the same name, its size per value */
    const kern_dtype dt = kern_qfmt_dtype((kern_qfmt)f);
    CHECK(dt != KERN_DTYPE_COUNT && kern_dtype_qfmt(dt) == (kern_qfmt)f &&
              strcmp(kern_dtype_name(dt), in->name) == 0 &&
              kern_dtype_size(dt) == (in->block == 1 ? (size_t)in->block_bytes : 0),
          "%s: stored dtype %d (%s)", in->name, (int)dt, kern_dtype_name(dt));
  }
  kern_qfmt g;
  CHECK(kern_qfmt_from_name("Q4_K", &g) == 0 && g == KERN_QFMT_Q4_K, "names are case-blind");
  CHECK(kern_qfmt_from_name("q8_1", &g) != 0 && kern_qfmt_from_ggml(9, &g) != 0,
        "q8_1 is not a format here");
  CHECK(kern_qfmt_get((kern_qfmt)KERN_QFMT_COUNT) == NULL, "out of range");

  uint64_t d = 0, s = 0;
  char err[256];
  /* Wan-14B's ffn.0 in Q4_K: 13824 rows of 5120 / 256 blocks of 144 bytes */
  CHECK(kern_qfmt_bytes(KERN_QFMT_Q4_K, 13824, 5120, &d, &s, err, sizeof err) == 0 &&
            d == 13824ull * 20 * 144 && s == 0, "q4_k bytes %llu", (unsigned long long)d);
  CHECK(kern_qfmt_bytes(KERN_QFMT_E4M3_ROW, 5120, 13824, &d, &s, err, sizeof err) == 0 &&
            d == 5120ull * 13824 && s == 5120ull * 4, "fp8 bytes");
  CHECK(kern_qfmt_bytes(KERN_QFMT_Q8_0, 3, 96, &d, &s, err, sizeof err) == 0 && d == 3 * 3 * 34,
        "q8_0 bytes");
  const struct { kern_qfmt f; int64_t rows, cols; const char *needle; } bad[] = {
      {KERN_QFMT_Q4_K, 3, 5121, "not a multiple of the q4_k block of 256"},
      {KERN_QFMT_Q8_0, 1, 48, "not a multiple of the q8_0 block of 32"},
      {KERN_QFMT_F16, 0, 8, "must be >= 1"},
      {KERN_QFMT_BF16, 4, -2, "must be >= 1"},
      {KERN_QFMT_Q6_K, INT64_MAX / 2, 256, "overflows"},
      {KERN_QFMT_F32, INT64_MAX / 4 + 1, 1, "overflows"},
      {KERN_QFMT_I8_ROW, INT64_MAX / 2, 1, "overflows"}, /* the codes fit, codes + scales not */
      {(kern_qfmt)99, 1, 1, "unknown"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    d = s = 7;
    err[0] = '\0';
    CHECK(kern_qfmt_bytes(bad[i].f, bad[i].rows, bad[i].cols, &d, &s, err, sizeof err) != 0 &&
              strstr(err, bad[i].needle) && d == 7 && s == 7,
          "case %zu (%lld x %lld): refused with '%s', want '%s'", i, (long long)bad[i].rows,
          (long long)bad[i].cols, err, bad[i].needle);
  }
}

/* The e4m3 definition: (-1)^s 2^(e-7) (1 + m/8), or 2^-6 m/8 when e is 0. */
static double e4m3_def(int b) {
  int sg = b >> 7, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return NAN;
  double v = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
  return sg ? -v : v;
}

static void check_fp8_rows(void) {
  const int64_t rows = 5, cols = 256;
  uint8_t *q = sp_test_malloc(rows * cols);
  float scale[5], *got = sp_test_malloc(rows * cols * 4), *alt = sp_test_malloc(rows * cols * 4);
  uint16_t *gb = sp_test_malloc(rows * cols * 2);
  for (int64_t r = 0; r < rows; r++) {
    scale[r] = (float)ldexp(sp_rand_uniform(0.5, 1.0), (int)sp_rand_int(-30, 10));
    for (int64_t c = 0; c < cols; c++) q[r * cols + c] = (uint8_t)((c + 37 * r) & 255);
  }
  const kern_qtensor t = {KERN_QFMT_E4M3_ROW, q, scale, rows, cols};
  kern_quant_dequant_rows_f32(&t, 0, rows, got);
  kern_quant_dequant_rows_bf16(&t, 0, rows, gb);
  kern_fp8_dequantize_rows(q, scale, rows, cols, alt);
  int64_t bad = 0, bad_alt = 0, bad_b = 0;
  for (int64_t i = 0; i < rows * cols; i++) {
    const double def = e4m3_def(q[i]);
    const float want = (float)(def * scale[i / cols]); /* exact product, one rounding */
    bad += isnan(def) ? !isnan(got[i]) : memcmp(&got[i], &want, 4) != 0;
    bad_alt += memcmp(&got[i], &alt[i], 4) != 0;
    bad_b += gb[i] != kern_f32_to_bf16(got[i]);
  }
  CHECK(bad == 0 && bad_alt == 0 && bad_b == 0,
        "fp8 rows: %lld values off the definition, %lld off kern_fp8_dequantize_rows, %lld bf16 "
        "not the rounded fp32", (long long)bad, (long long)bad_alt, (long long)bad_b);
  free(q), free(got), free(alt), free(gb);
}

/* The int8 rule in double: fp32(127 / amax), fp32(x m), nearest even, clamp. */
static int i8_rule(float x, float amax) {
  const double m = amax > 0 ? (double)(float)(127.0 / (double)amax) : 1.0;
  const double v = (double)(float)((double)x * m);
  double r = floor(v + 0.5);
  if (r - v == 0.5 && fmod(r, 2.0) != 0.0) r -= 1.0; /* a tie goes to the even neighbour */
  return r > 127 ? 127 : r < -127 ? -127 : (int)r;
}

static void check_i8_rows(void) {
  const int64_t rows = 9, cols = 333;
  float *x = sp_test_malloc(rows * cols * 4), *fq = sp_test_malloc(rows * cols * 4);
  float *deq = sp_test_malloc(rows * cols * 4), scale[9];
  int8_t *q = sp_test_malloc(rows * cols);
  for (int64_t r = 0; r < rows; r++) {
    const double mag = r == 1 ? 0.0 : ldexp(1.0, (int)sp_rand_int(-20, 20));
    for (int64_t c = 0; c < cols; c++) x[r * cols + c] = (float)(sp_rand_normal() * mag);
  }
  x[2 * cols + 7] = -1e3f * fabsf(x[2 * cols + 7]) - 1.0f; /* row 2's amax is negative */
  /* row 3: amax 127, so m = 1 and every odd multiple of 0.5 is a tie */
  for (int64_t c = 0; c < cols; c++) x[3 * cols + c] = (float)((c % 254) - 126) * 0.5f;
  x[3 * cols] = 127.0f;
  kern_i8_quantize_rows(x, rows, cols, q, scale);
  int64_t bad = 0, far = 0;
  for (int64_t r = 0; r < rows; r++) {
    float amax = 0;
    for (int64_t c = 0; c < cols; c++) amax = fmaxf(amax, fabsf(x[r * cols + c]));
    const float want_s = amax > 0 ? amax / 127.0f : 1.0f;
    CHECK(scale[r] == want_s, "int8 row %lld: scale %g, want %g", (long long)r, scale[r], want_s);
    int top = 0;
    for (int64_t c = 0; c < cols; c++) {
      const int8_t got = q[r * cols + c];
      bad += got != i8_rule(x[r * cols + c], amax);
      top |= got == 127 || got == -127;
      far += fabs((double)got * scale[r] - x[r * cols + c]) > 0.5001 * scale[r] + 1e-30;
    }
    CHECK(amax == 0 || top, "int8 row %lld: no value on +-127", (long long)r);
  }
  CHECK(bad == 0 && far == 0, "int8 quantiser: %lld codes off the rule, %lld values more than "
        "half a step away", (long long)bad, (long long)far);
  for (int64_t c = 0; c < cols; c++) CHECK(q[cols + c] == 0, "zero row code");
  CHECK(scale[1] == 1.0f, "an all-zero row has scale 1");
  /* fake quantisation = dequantise(quantise) */
  memcpy(fq, x, rows * cols * 4);
  kern_i8_fake_quant_rows(fq, rows, cols);
  const kern_qtensor t = {KERN_QFMT_I8_ROW, q, scale, rows, cols};
  kern_quant_dequant_rows_f32(&t, 0, rows, deq);
  CHECK(memcmp(fq, deq, rows * cols * 4) == 0, "fake quantisation differs from the dequantised "
        "codes");
  for (int64_t i = 0; i < rows * cols; i++)
    if (deq[i] != (float)q[i] * scale[i / cols]) {
      CHECK(0, "int8 dequantised value %lld", (long long)i);
      break;
    }
  /* every code, -128 included */
  int8_t all[256];
  float one = 0.375f, out[256];
  for (int i = 0; i < 256; i++) all[i] = (int8_t)(i - 128);
  const kern_qtensor ta = {KERN_QFMT_I8_ROW, all, &one, 1, 256};
  kern_quant_dequant_rows_f32(&ta, 0, 1, out);
  for (int i = 0; i < 256; i++) CHECK(out[i] == (float)(i - 128) * 0.375f, "code %d", i - 128);
  free(x), free(fq), free(deq), free(q);
}

static void check_w8a8_i8(void) {
  const int64_t M = 37, K = 1536, N = 70;
  float *x = sp_test_malloc(M * K * 4), *w = sp_test_malloc(N * K * 4);
  float *b = sp_test_malloc(N * 4), sx[37], *sw = sp_test_malloc(N * 4);
  int8_t *xq = sp_test_malloc(M * K), *wq = sp_test_malloc(N * K);
  float *y = sp_test_malloc(M * N * 4), *y2 = sp_test_malloc(M * N * 4);
  sp_rand_fill(x, M * K, -3, 3);
  sp_rand_fill(w, N * K, -0.05, 0.05);
  sp_rand_fill(b, N, -0.5, 0.5);
  kern_i8_quantize_rows(x, M, K, xq, sx);
  kern_i8_quantize_rows(w, N, K, wq, sw);
  kern_cpu_linear_w8a8_i8(xq, sx, wq, sw, b, y, M, K, N);
  double worst = 0;
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double acc = 0;
      for (int64_t k = 0; k < K; k++) acc += (double)xq[m * K + k] * wq[n * K + k];
      const double prod = acc * sx[m] * sw[n], want = prod + b[n];
      /* four fp32 roundings, each within 2^-24 of what it rounds */
      worst = fmax(worst, fabs(y[m * N + n] - want) / (fabs(prod) + fabs(b[n])));
    }
  CHECK(worst < 4.0 * 0x1p-24, "int8 W8A8: error %.3g of |product| + |bias| against float64 "
        "(4 fp32 roundings allow %.3g)", worst, 4.0 * 0x1p-24);
  /* the same as an fp32 linear of the dequantised operands, within fp32 sums */
  float *xd = sp_test_malloc(M * K * 4), *wd = sp_test_malloc(N * K * 4);
  const kern_qtensor tx = {KERN_QFMT_I8_ROW, xq, sx, M, K}, tw = {KERN_QFMT_I8_ROW, wq, sw, N, K};
  kern_quant_dequant_rows_f32(&tx, 0, M, xd);
  kern_quant_dequant_rows_f32(&tw, 0, N, wd);
  kern_cpu_linear(xd, wd, b, y2, M, K, N);
  const double rel = sp_test_rel_l2_f32(y, y2, M * N);
  CHECK(rel < 1e-5, "int8 W8A8 vs fp32 linear of the dequantised operands: %.3g", rel);
  printf("int8 W8A8 %lld x %lld x %lld: worst %.2e vs float64, %.2e vs dequantised fp32 linear\n",
         (long long)M, (long long)K, (long long)N, worst, rel);
  free(x), free(w), free(b), free(sw), free(xq), free(wq), free(y), free(y2), free(xd), free(wd);
}

/* A Q4_K tensor of random bytes (finite f16 scales) dequantised with 1, 2
 * and 3 threads gives the same bits. */
static void check_threads(void) {
  const int64_t rows = 301, cols = 512, bytes = rows * 2 * KQ_Q4_K_BYTES;
  uint8_t *q = sp_test_malloc(bytes);
  for (int64_t i = 0; i < bytes; i++) q[i] = (uint8_t)sp_rand_int(0, 255);
  for (int64_t blk = 0; blk < rows * 2; blk++) /* d, dmin: exponents below 31 */
    q[blk * KQ_Q4_K_BYTES + 1] &= 0xbf, q[blk * KQ_Q4_K_BYTES + 3] &= 0xbf;
  const kern_qtensor t = {KERN_QFMT_Q4_K, q, NULL, rows, cols};
  float *ref = sp_test_malloc(rows * cols * 4), *got = sp_test_malloc(rows * cols * 4);
  const int nt = omp_get_max_threads();
  omp_set_num_threads(1);
  kern_quant_dequant_rows_f32(&t, 0, rows, ref);
  for (int th = 2; th <= 3; th++) {
    omp_set_num_threads(th);
    kern_quant_dequant_rows_f32(&t, 0, rows, got);
    CHECK(memcmp(ref, got, rows * cols * 4) == 0, "%d threads differ from 1", th);
  }
  omp_set_num_threads(nt);
  free(q), free(ref), free(got);
}

int main(void) {
  sp_test_begin("test_quant");
  check_table();
  check_fp8_rows();
  check_i8_rows();
  check_w8a8_i8();
  check_threads();
  return sp_test_end();
}
