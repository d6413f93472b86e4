/* kern_cpu_patchify / kern_cpu_unpatchify: every element checked against the
 * exact index formulas of MODEL.md "Forward, op by op" (step 1: value index c*4 + kh*2 + kw
 * reading x[c, f, 2h+kh, 2w+kw]; step 6: value index ((p*2+q)*2+r)*C + c
 * placed at x[c, f+p, 2h+q, 2w+r], channel fastest), all outputs written,
 * guard floats untouched. kern_cpu_time_sinusoid against the published
 * formula (cos first, then sin, t * 10000^(-j/half)). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_cpu.h"
#include "sp_test.h"

static void check_patch(int64_t C, int64_t F, int64_t H, int64_t W) {
  int64_t gh = H / 2, gw = W / 2, L = F * gh * gw, n = C * F * H * W;
  float *x = sp_test_alloc(n), *tok = sp_test_alloc(L * C * 4), *back = sp_test_alloc(n);
  sp_rand_fill(x, n, -1.0, 1.0);
  float s = sp_test_sentinel();

  kern_cpu_patchify(x, tok, C, F, H, W);
  int64_t bad = 0, t = 0;
  for (int64_t f = 0; f < F; f++)
    for (int64_t h = 0; h < gh; h++)
      for (int64_t w = 0; w < gw; w++, t++)
        for (int64_t c = 0; c < C; c++)
          for (int64_t kh = 0; kh < 2; kh++)
            for (int64_t kw = 0; kw < 2; kw++) {
              float want = x[((c * F + f) * H + 2 * h + kh) * W + 2 * w + kw];
              float got = tok[t * C * 4 + c * 4 + kh * 2 + kw];
              bad += memcmp(&want, &got, sizeof want) != 0;
            }
  CHECK(bad == 0, "patchify C=%lld F=%lld H=%lld W=%lld: %lld values misplaced", (long long)C,
           (long long)F, (long long)H, (long long)W, (long long)bad);
  CHECK(sp_test_guard_ok(tok, L * C * 4), "patchify: wrote past tokens");

  /* Fresh token values so the unpatchify check does not lean on patchify. */
  sp_rand_fill(tok, L * C * 4, -1.0, 1.0);
  kern_cpu_unpatchify(tok, back, C, F, H, W);
  bad = 0;
  int64_t unwritten = 0;
  for (int64_t i = 0; i < n; i++) unwritten += memcmp(&back[i], &s, sizeof s) == 0;
  t = 0;
  for (int64_t f = 0; f < F; f++)
    for (int64_t h = 0; h < gh; h++)
      for (int64_t w = 0; w < gw; w++, t++)
        for (int64_t p = 0; p < 1; p++)
          for (int64_t q = 0; q < 2; q++)
            for (int64_t r = 0; r < 2; r++)
              for (int64_t c = 0; c < C; c++) {
                float want = tok[t * 4 * C + ((p * 2 + q) * 2 + r) * C + c];
                float got = back[((c * F + f + p) * H + 2 * h + q) * W + 2 * w + r];
                bad += memcmp(&want, &got, sizeof want) != 0;
              }
  CHECK(bad == 0, "unpatchify C=%lld F=%lld H=%lld W=%lld: %lld values misplaced",
           (long long)C, (long long)F, (long long)H, (long long)W, (long long)bad);
  CHECK(unwritten == 0, "unpatchify: %lld outputs never written", (long long)unwritten);
  CHECK(sp_test_guard_ok(back, n), "unpatchify: wrote past x");
  printf("patchify/unpatchify C=%lld F=%lld H=%lld W=%lld: ok\n", (long long)C, (long long)F,
         (long long)H, (long long)W);
  free(x), free(tok), free(back);
}

static void check_time(double t, int64_t n) {
  int64_t half = n / 2;
  float *out = sp_test_alloc(n);
  double *ref = sp_test_dalloc(n);
  for (int64_t j = 0; j < half; j++) {
    /* 10000^(-j/half) as exp(-ln(10000) j / half): same value, other route. */
    double arg = t * exp(-log(10000.0) * (double)j / (double)half);
    ref[j] = cos(arg);
    ref[half + j] = sin(arg);
  }
  kern_cpu_time_sinusoid(t, n, out);
  double err = sp_test_rel_l2(out, ref, n);
  CHECK(err <= SP_TEST_TOL_F32, "time_sinusoid t=%g n=%lld: rel L2 %.3g", t, (long long)n, err);
  CHECK(sp_test_guard_ok(out, n), "time_sinusoid: wrote past out");
  /* Published facts: element 0 is cos(t) (frequency 1), element half is sin(t). */
  CHECK(fabs(out[0] - cos(t)) <= 1e-7 && fabs(out[half] - sin(t)) <= 1e-7,
           "time_sinusoid t=%g: not [cos, sin] with frequency 1 first", t);
  printf("time_sinusoid t=%g n=%lld: rel L2 %.2e\n", t, (long long)n, err);
  free(out), free(ref);
}

int main(void) {
  sp_test_begin("test_layout");
  check_patch(16, 1, 2, 2);
  check_patch(3, 2, 4, 6);
  check_patch(16, 3, 10, 14);
  check_patch(16, 3, 60, 64); /* large enough for the parallel path */
  check_time(0.0, 256);
  check_time(999.0, 256);
  check_time(floor(sp_rand_uniform(0.0, 1001.0)), 256);
  check_time(sp_rand_uniform(0.0, 1000.0), 256);
  check_time(sp_rand_uniform(0.0, 1000.0), 10);
  return sp_test_end();
}
