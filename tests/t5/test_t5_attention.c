/* kern_cpu_attention_relbias against a direct float64 formula,
 * out_i = sum_j softmax_j(scale q_i.k_j + table[bucket[j - i + Lq - 1]]) v_j,
 * on fresh random data: Lq != Lk, lengths across the 64-key tile, one key,
 * peaked scores, T5's scale 1; bit-identity for 1, 2 and 3 threads; guard
 * floats after out. Then umt5_rel_bucket for every offset a 600-token
 * sequence has against the published float32 computation (UMT5.md
 * "Position buckets"). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "kern_cpu.h"
#include "sp_test.h"
#include "umt5.h"

static void ref_relbias(const float *q, const float *k, const float *v, const float *table,
                        const int32_t *bucket, double scale, double *out, int64_t Lq, int64_t Lk,
                        int64_t H, int64_t hd) {
  double *s = malloc((size_t)Lk * sizeof *s);
  for (int64_t i = 0; i < Lq; i++)
    for (int64_t h = 0; h < H; h++) {
      double m = -INFINITY, sum = 0.0;
      for (int64_t j = 0; j < Lk; j++) {
        double d = 0.0;
        for (int64_t c = 0; c < hd; c++)
          d += (double)q[(i * H + h) * hd + c] * (double)k[(j * H + h) * hd + c];
        s[j] = scale * d + (double)table[bucket[j - i + Lq - 1] * H + h];
        if (s[j] > m) m = s[j];
      }
      for (int64_t j = 0; j < Lk; j++) sum += s[j] = exp(s[j] - m);
      for (int64_t c = 0; c < hd; c++) {
        double a = 0.0;
        for (int64_t j = 0; j < Lk; j++) a += s[j] * (double)v[(j * H + h) * hd + c];
        out[(i * H + h) * hd + c] = a / sum;
      }
    }
  free(s);
}

static void check(int64_t Lq, int64_t Lk, int64_t H, int64_t hd, int64_t nb, double amp,
                  float scale) {
  int64_t nq = Lq * H * hd, nk = Lk * H * hd, nr = Lq + Lk - 1;
  float *q = sp_test_alloc(nq), *k = sp_test_alloc(nk), *v = sp_test_alloc(nk);
  float *table = sp_test_alloc(nb * H), *out = sp_test_alloc(nq), *out2 = sp_test_alloc(nq);
  int32_t *bucket = sp_test_malloc((size_t)nr * sizeof *bucket);
  double *ref = sp_test_dalloc(nq);
  sp_rand_fill(q, nq, -amp, amp);
  sp_rand_fill(k, nk, -amp, amp);
  sp_rand_fill(v, nk, -1.0, 1.0);
  sp_rand_fill(table, nb * H, -3.0, 3.0);
  for (int64_t r = 0; r < nr; r++) bucket[r] = (int32_t)sp_rand_int(0, nb - 1);

  kern_cpu_attention_relbias(q, k, v, table, bucket, scale, out, Lq, Lk, H, hd);
  ref_relbias(q, k, v, table, bucket, scale, ref, Lq, Lk, H, hd);
  double err = sp_test_rel_l2(out, ref, nq);
  CHECK(err <= SP_TEST_TOL_F32, "relbias Lq=%lld Lk=%lld H=%lld hd=%lld amp=%g: rel L2 %.3g",
        (long long)Lq, (long long)Lk, (long long)H, (long long)hd, amp, err);
  CHECK(sp_test_guard_ok(out, nq), "relbias Lq=%lld Lk=%lld: wrote past out", (long long)Lq,
        (long long)Lk);
  for (int t = 1; t <= 3; t++) {
    omp_set_num_threads(t);
    kern_cpu_attention_relbias(q, k, v, table, bucket, scale, out2, Lq, Lk, H, hd);
    CHECK(memcmp(out, out2, (size_t)nq * sizeof *out) == 0, "relbias Lq=%lld: %d threads differ",
          (long long)Lq, t);
  }
  printf("relbias Lq=%lld Lk=%lld H=%lld hd=%lld amp=%g scale=%g: rel L2 %.2e\n", (long long)Lq,
         (long long)Lk, (long long)H, (long long)hd, amp, (double)scale, err);
  free(q), free(k), free(v), free(table), free(out), free(out2), free(bucket), free(ref);
}

/* The published bucket: float32 log of rel / max_exact, divided by the
 * float32 log(max_dist / max_exact), times the float32 count, truncated. */
static int32_t bucket_f32(int64_t rel, int64_t nb, int64_t max_dist) {
  int64_t half = nb / 2, exact = half / 2, b = rel > 0 ? half : 0, a = rel < 0 ? -rel : rel;
  if (a < exact) return (int32_t)(b + a);
  float f = logf((float)a / (float)exact) / (float)log((double)max_dist / (double)exact) *
            (float)(half - exact);
  int64_t large = exact + (int64_t)f;
  return (int32_t)(b + (large < half - 1 ? large : half - 1));
}

int main(void) {
  sp_test_begin("test_t5_attention");
  const int nthreads = omp_get_max_threads();
  check(1, 1, 1, 16, 32, 1.0, 1.0f);
  check(7, 7, 4, 16, 32, 1.0, 1.0f);
  check(65, 65, 2, 64, 32, 0.6, 1.0f);
  check(130, 70, 3, 8, 32, 2.0, 1.0f);  /* peaked: the running max moves between tiles */
  check(20, 129, 2, 24, 8, 1.0, 0.25f); /* another scale and table */
  omp_set_num_threads(nthreads);
  int bad = 0;
  for (int64_t r = -600; r <= 600; r++)
    if (umt5_rel_bucket(r, 32, 128) != bucket_f32(r, 32, 128)) bad++;
  CHECK(bad == 0, "umt5_rel_bucket differs from the float32 formula at %d offsets", bad);
  CHECK(umt5_rel_bucket(0, 32, 128) == 0 && umt5_rel_bucket(1, 32, 128) == 17 &&
            umt5_rel_bucket(-1, 32, 128) == 1 && umt5_rel_bucket(16, 32, 128) == 26 &&
            umt5_rel_bucket(-128, 32, 128) == 15 && umt5_rel_bucket(511, 32, 128) == 31,
        "umt5_rel_bucket: hand-checked values");
  return sp_test_end();
}
