/* The norms that quantise their own output (kern_cuda_norm_quant, the
 * W8A8 path of the CUDA block: stage_cuda_block.c's norm_chunk) against
 * the two steps they replace: the norm writing h (kern_cuda_layernorm_
 * modulate, kern_cuda_gated_add_layernorm), then the separate per-token
 * quantiser reading h back (kern_cuda_quantize_fp8_rows,
 * kern_cuda_quantize_i8_rows). Codes and row scales must be equal bit for
 * bit, and so must h (when the fused call writes it too) and the updated
 * residual x.
 *
 * Both norms (modulation; affine; gated add with a bf16 or fp32 residual,
 * with a gate or gate 1), both formats, at the Wan widths 5120, 3072 and
 * 1536, at 8 x 129 and 8 x 387 (the last warp partly idle), at 1004 (not a
 * multiple of 8: the scalar kernels), with h written and without. Rows of
 * every case: random magnitudes 2^-8..2^8, constant rows (all-zero h where
 * the shift is zero, else h = shift), a row with one value 2^12 times the
 * rest (the small codes subnormal in e4m3), and, in the large cases, shifts
 * near 10^35 (the scale's factor far below 1, the largest value landing on
 * the format's limit). Fresh random inputs each run (SP_SEED=n replays).
 * Exit 77 with one line when there is no CUDA device. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_cuda.h"
#include "kern_cuda_quant.h"
#include "kern_dtype.h"

#define SP_TEST_CUDA
#include "sp_test.h"
#include "sp_test_dev.h"

#define EPS 1e-6f

typedef struct nq_case {
  int64_t rows, dim;
  int add;        /* 1: the gated add before the norm (kern_cuda_gated_add_layernorm) */
  kern_dtype yt;  /* the residual's dtype, with add */
  int gate;       /* a gate, with add; else gate 1 */
  int affine;     /* w, b */
  int modulate;   /* shift, scale */
  int zero_shift; /* the shift all zero (constant rows give h = 0) */
  int large;      /* shifts near 1e35 */
  int write_h;    /* the fused call writes h too */
  kern_qfmt fmt;
} nq_case;

/* The operands of a case, on the host. */
typedef struct nq_host {
  float *x, *y32, *gate, *shift, *scale;
  uint16_t *y16, *w, *b;
} nq_host;

static float bf16_valued(double v) { return kern_bf16_to_f32(kern_f32_to_bf16((float)v)); }

/* x: each row normal of magnitude 2^-8..2^8, row 1 constant zero, row 2
 * constant 3 (h = shift, or b), row 3 one value 2^12 times the rest; y
 * (with add) the same kind of values, zero in rows 1 and 2. */
static void fill_case(const nq_case *c, nq_host *h) {
  const int64_t R = c->rows, D = c->dim, n = R * D;
  h->x = sp_test_malloc((size_t)n * 4);
  h->y32 = sp_test_malloc((size_t)n * 4);
  h->y16 = sp_test_malloc((size_t)n * 2);
  for (int64_t r = 0; r < R; r++) {
    const double mag = ldexp(1.0, (int)sp_rand_int(-8, 8));
    for (int64_t i = 0; i < D; i++) {
      double xv = sp_rand_normal() * mag, yv = sp_rand_normal() * mag;
      if (r == 1 || r == 2) xv = r == 1 ? 0.0 : 3.0, yv = 0.0;
      if (r == 3) xv = i == D / 3 ? 4096.0 * mag : sp_rand_uniform(-mag, mag);
      h->x[r * D + i] = (float)xv;
      h->y32[r * D + i] = c->yt == KERN_DTYPE_BF16 ? bf16_valued(yv) : (float)yv;
    }
  }
  kern_f32_to_bf16_n(h->y32, h->y16, (size_t)n);
  h->gate = sp_test_malloc((size_t)D * 4);
  h->shift = sp_test_malloc((size_t)D * 4);
  h->scale = sp_test_malloc((size_t)D * 4);
  h->w = sp_test_malloc((size_t)D * 2);
  h->b = sp_test_malloc((size_t)D * 2);
  const double big = c->large ? 1e35 : 1.0;
  for (int64_t i = 0; i < D; i++) {
    h->gate[i] = (float)sp_rand_uniform(-2.0, 2.0);
    h->shift[i] = c->zero_shift ? 0.0f : (float)(sp_rand_normal() * big);
    h->scale[i] = (float)sp_rand_uniform(-0.9, 3.0);
    h->w[i] = kern_f32_to_bf16((float)sp_rand_uniform(0.5, 1.5));
    h->b[i] = kern_f32_to_bf16((float)(sp_rand_normal() * 0.1 * big));
  }
}

static void free_host(nq_host *h) {
  free(h->x), free(h->y32), free(h->y16), free(h->gate), free(h->shift), free(h->scale);
  free(h->w), free(h->b);
}

static void *dev_copy(const void *src, size_t bytes) {
  void *d = sp_dev(bytes);
  sp_up(d, src, bytes);
  return d;
}

/* The device operands both paths read (x is each path's own copy). */
typedef struct nq_dev {
  const void *y;
  const float *gate, *shift, *scale;
  const uint16_t *w, *b;
} nq_dev;

/* The two steps: the norm into h, then the separate quantiser of h. */
static void run_reference(const nq_case *c, const nq_dev *d, float *x, uint16_t *h, void *q,
                          float *qs) {
  const int64_t R = c->rows, D = c->dim;
  const uint16_t *w = c->affine ? d->w : NULL, *b = c->affine ? d->b : NULL;
  const float *shift = c->modulate ? d->shift : NULL, *scale = c->modulate ? d->scale : NULL;
  if (c->add)
    kern_cuda_gated_add_layernorm(x, d->y, c->yt, c->gate ? d->gate : NULL, w, b, shift, scale,
                                  h, R, D, EPS, 0);
  else
    kern_cuda_layernorm_modulate(x, w, b, shift, scale, h, R, D, EPS, 0);
  if (c->fmt == KERN_QFMT_E4M3_ROW)
    kern_cuda_quantize_fp8_rows(h, KERN_DTYPE_BF16, R, D, q, qs, 0);
  else
    kern_cuda_quantize_i8_rows(h, KERN_DTYPE_BF16, R, D, q, qs, 0);
}

static void run_fused(const nq_case *c, const nq_dev *d, float *x, uint16_t *h, void *q,
                      float *qs) {
  const kern_cuda_norm_quant_params p = {
      .x = x, .y = c->add ? d->y : NULL, .y_dtype = c->yt,
      .gate = c->add && c->gate ? d->gate : NULL, .w = c->affine ? d->w : NULL,
      .b = c->affine ? d->b : NULL, .shift = c->modulate ? d->shift : NULL,
      .scale = c->modulate ? d->scale : NULL, .h = c->write_h ? h : NULL, .qfmt = c->fmt,
      .q = q, .qscale = qs, .rows = c->rows, .dim = c->dim, .eps = EPS};
  kern_cuda_norm_quant(&p, 0);
}

/* Bytes that differ between a and b. */
static int64_t diff_bytes(const void *a, const void *b, size_t n) {
  const uint8_t *p = a, *q = b;
  int64_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += p[i] != q[i];
  return bad;
}

static void check_case(const nq_case *c) {
  const int64_t R = c->rows, D = c->dim, n = R * D;
  nq_host hs;
  fill_case(c, &hs);
  const size_t yb = (size_t)n * (c->yt == KERN_DTYPE_BF16 ? 2 : 4);
  const nq_dev d = {dev_copy(c->yt == KERN_DTYPE_BF16 ? (void *)hs.y16 : (void *)hs.y32, yb),
                    dev_copy(hs.gate, (size_t)D * 4), dev_copy(hs.shift, (size_t)D * 4),
                    dev_copy(hs.scale, (size_t)D * 4), dev_copy(hs.w, (size_t)D * 2),
                    dev_copy(hs.b, (size_t)D * 2)};
  float *x_ref = dev_copy(hs.x, (size_t)n * 4), *x_got = dev_copy(hs.x, (size_t)n * 4);
  uint16_t *h_ref = sp_dev((size_t)n * 2), *h_got = sp_dev((size_t)n * 2);
  uint8_t *q_ref = sp_dev((size_t)n), *q_got = sp_dev((size_t)n);
  float *s_ref = sp_dev((size_t)R * 4), *s_got = sp_dev((size_t)R * 4);
  run_reference(c, &d, x_ref, h_ref, q_ref, s_ref);
  run_fused(c, &d, x_got, h_got, q_got, s_got);
  uint8_t *a = sp_test_malloc((size_t)n * 4), *b = sp_test_malloc((size_t)n * 4);
  sp_down(a, q_ref, (size_t)n), sp_down(b, q_got, (size_t)n);
  const int64_t bad_q = diff_bytes(a, b, (size_t)n);
  int64_t zeros = 0; /* codes 0: a case whose codes are all zero would prove little */
  for (int64_t i = 0; i < n; i++) zeros += a[i] == 0;
  sp_down(a, s_ref, (size_t)R * 4), sp_down(b, s_got, (size_t)R * 4);
  const int64_t bad_s = diff_bytes(a, b, (size_t)R * 4);
  const float scale1 = ((float *)a)[1], scale2 = ((float *)a)[2];
  sp_down(a, x_ref, (size_t)n * 4), sp_down(b, x_got, (size_t)n * 4);
  const int64_t bad_x = diff_bytes(a, b, (size_t)n * 4);
  int64_t bad_h = 0;
  if (c->write_h) {
    sp_down(a, h_ref, (size_t)n * 2), sp_down(b, h_got, (size_t)n * 2);
    bad_h = diff_bytes(a, b, (size_t)n * 2);
  }
  const char *fmt = c->fmt == KERN_QFMT_E4M3_ROW ? "e4m3" : "int8";
  printf("%s %lld x %lld add %d (%s, gate %d) affine %d modulate %d zero_shift %d large %d "
         "h %d: %lld codes, %lld scale bytes, %lld h bytes, %lld x bytes differ (%lld zero "
         "codes)\n",
         fmt, (long long)R, (long long)D, c->add, c->yt == KERN_DTYPE_BF16 ? "bf16" : "fp32",
         c->gate, c->affine, c->modulate, c->zero_shift, c->large, c->write_h,
         (long long)bad_q, (long long)bad_s, (long long)bad_h, (long long)bad_x,
         (long long)zeros);
  CHECK(bad_q == 0 && bad_s == 0 && bad_h == 0 && bad_x == 0,
        "%s %lld x %lld: %lld codes, %lld scale bytes, %lld h bytes, %lld x bytes differ from "
        "the norm then the quantiser", fmt, (long long)R, (long long)D, (long long)bad_q,
        (long long)bad_s, (long long)bad_h, (long long)bad_x);
  CHECK(zeros < n / 2, "%s %lld x %lld: %lld of %lld codes are zero", fmt, (long long)R,
        (long long)D, (long long)zeros, (long long)n);
  /* Rows 1 and 2 are constant: h = shift (b with the affine, no modulation). */
  if (c->zero_shift && !c->affine)
    CHECK(scale1 == 1.0f && scale2 == 1.0f, "%s: the all-zero rows' scales are %g and %g, not 1",
          fmt, (double)scale1, (double)scale2);
  CHECK(sp_dev_release(), "%s %lld x %lld: a device buffer's guard was overwritten", fmt,
        (long long)R, (long long)D);
  free(a), free(b);
  free_host(&hs);
}

int main(void) {
  if (sp_test_no_cuda("test_norm_quant")) return 77;
  sp_test_begin("test_norm_quant");
  const int64_t dims[] = {5120, 3072, 1536, 8 * 129, 8 * 387, 1004};
  const kern_qfmt fmts[] = {KERN_QFMT_E4M3_ROW, KERN_QFMT_I8_ROW};
  for (int f = 0; f < 2; f++)
    for (int di = 0; di < 6; di++) {
      const int64_t D = dims[di], R = di < 3 ? 64 : 37;
      /* norm1/norm2's form: modulation, no affine; norm3's: affine, no modulation */
      const nq_case cases[] = {
          {R, D, 0, KERN_DTYPE_BF16, 0, 0, 1, 0, 0, 0, fmts[f]},
          {R, D, 0, KERN_DTYPE_BF16, 0, 0, 1, 1, 0, 1, fmts[f]},
          {R, D, 0, KERN_DTYPE_BF16, 0, 1, 0, 0, 0, 0, fmts[f]},
          {R, D, 0, KERN_DTYPE_BF16, 0, 1, 1, 0, 1, 1, fmts[f]},
          {R, D, 1, KERN_DTYPE_BF16, 1, 1, 0, 0, 0, 0, fmts[f]},
          {R, D, 1, KERN_DTYPE_BF16, 0, 0, 1, 0, 0, 1, fmts[f]},
          {R, D, 1, KERN_DTYPE_BF16, 1, 0, 1, 1, 0, 0, fmts[f]},
          {R, D, 1, KERN_DTYPE_F32, 1, 0, 1, 0, 1, 0, fmts[f]},
      };
      for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
    }
  return sp_test_end();
}
