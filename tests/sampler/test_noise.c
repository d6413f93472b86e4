/* Noise tests: Philox-4x32-10 against the published Random123 known-answer
 * vectors, the normal values against a libm Box-Muller on the same Philox
 * words, moments of 1e6 samples, slices equal to the whole, thread-count
 * independence. The seed is fresh each run and printed (SP_SEED=n replays). */
#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "noise.h"

#include "sp_test.h"

static void test_philox_kat(void) {
  /* Random123 kat_vectors, "philox4x32 10": counter[4] key[2] -> out[4]. */
  static const uint32_t kat[3][10] = {
      {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
       0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
       0x94fdcceb, 0x5001e420, 0x24126ea1},
  };
  for (int t = 0; t < 3; t++) {
    uint32_t out[4];
    noise_philox4x32_10(kat[t], kat[t] + 4, out);
    for (int k = 0; k < 4; k++)
      CHECK(out[k] == kat[t][6 + k], "philox kat %d word %d: %08x != %08x", t, k, out[k],
            kat[t][6 + k]);
  }
}

/* The documented recipe, with libm's log and cos. */
static double libm_normal(uint64_t seed, uint64_t idx) {
  uint32_t ctr[4] = {(uint32_t)idx, (uint32_t)(idx >> 32), 0, 0};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint32_t w[4];
  noise_philox4x32_10(ctr, key, w);
  uint64_t a = ((uint64_t)w[0] << 32) | w[1], b = ((uint64_t)w[2] << 32) | w[3];
  double u1 = ldexp((double)((a >> 11) + 1), -53), u2 = ldexp((double)(b >> 11), -53);
  return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

int main(void) {
  const uint64_t seed = sp_test_begin("test_noise");

  test_philox_kat();

  const size_t n = 1000000;
  float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
  noise_fill(seed, x, n);

  /* Same values as the recipe computed with libm (within float rounding:
   * the series and libm agree to ~1e-16, so at most one float ulp). */
  size_t bad = 0;
  for (size_t i = 0; i < n; i += 97) {
    double want = libm_normal(seed, i);
    if (fabs((double)x[i] - want) > 1.2e-7 * fabs(want) + 1e-30) bad++;
  }
  CHECK(bad == 0, "%zu values differ from the libm Box-Muller", bad);

  /* Moments; bounds are 6 standard errors of each estimator. */
  double s1 = 0, s2 = 0, s3 = 0, s4 = 0, in1 = 0, in2 = 0;
  for (size_t i = 0; i < n; i++) {
    double v = x[i];
    s1 += v;
    s2 += v * v;
    s3 += v * v * v;
    s4 += v * v * v * v;
    in1 += fabs(v) < 1.0;
    in2 += fabs(v) < 2.0;
    if (!isfinite(v)) bad++;
  }
  CHECK(bad == 0, "non-finite noise");
  const double N = (double)n, mean = s1 / N, var = s2 / N - mean * mean;
  const double skew = s3 / N / pow(var, 1.5), kurt = s4 / N / (var * var) - 3.0;
  const double p1 = 0.6826894921370859, p2 = 0.9544997361036416; /* P(|Z|<1), P(|Z|<2) */
  printf("mean %.5f var %.5f skew %.5f excess kurtosis %.5f P(|z|<1) %.5f P(|z|<2) %.5f\n",
         mean, var, skew, kurt, in1 / N, in2 / N);
  CHECK(fabs(mean) < 6.0 / sqrt(N), "mean %g", mean);
  CHECK(fabs(var - 1.0) < 6.0 * sqrt(2.0 / N), "variance %g", var);
  CHECK(fabs(skew) < 6.0 * sqrt(6.0 / N), "skewness %g", skew);
  CHECK(fabs(kurt) < 6.0 * sqrt(24.0 / N), "excess kurtosis %g", kurt);
  CHECK(fabs(in1 / N - p1) < 6.0 * sqrt(p1 * (1 - p1) / N), "P(|z|<1) %g", in1 / N);
  CHECK(fabs(in2 / N - p2) < 6.0 * sqrt(p2 * (1 - p2) / N), "P(|z|<2) %g", in2 / N);
  /* Neighbouring elements are uncorrelated. */
  double c = 0;
  for (size_t i = 0; i + 1 < n; i++) c += (double)x[i] * x[i + 1];
  CHECK(fabs(c / N) < 6.0 / sqrt(N), "lag-1 correlation %g", c / N);

  /* Any slice equals the same slice of the whole. */
  const size_t offs[3] = {0, 1, 777777};
  const size_t lens[3] = {5, 333333, n - 777777};
  for (int k = 0; k < 3; k++) {
    noise_fill_range(seed, offs[k], y, lens[k]);
    CHECK(memcmp(y, x + offs[k], lens[k] * sizeof *y) == 0, "slice at %zu differs", offs[k]);
  }
  /* Thread count does not matter. */
  omp_set_num_threads(1);
  noise_fill(seed, y, n);
  CHECK(memcmp(x, y, n * sizeof *y) == 0, "1 thread differs");
  omp_set_num_threads(3);
  noise_fill(seed, y, n);
  CHECK(memcmp(x, y, n * sizeof *y) == 0, "3 threads differ");
  /* Both halves of the 64-bit seed matter; far indices work. */
  noise_fill(seed ^ (1ull << 40), y, 1000);
  CHECK(memcmp(x, y, 1000 * sizeof *y) != 0, "seed high bits ignored");
  noise_fill(seed ^ 1ull, y, 1000);
  CHECK(memcmp(x, y, 1000 * sizeof *y) != 0, "seed low bits ignored");
  noise_fill_range(seed, (1ull << 33) + 5, y, 4);
  for (int k = 0; k < 4; k++)
    CHECK(fabs(y[k] - libm_normal(seed, (1ull << 33) + 5 + k)) < 1e-6, "index above 2^32");

  free(y);
  free(x);
  return sp_test_end();
}
