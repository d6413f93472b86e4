/* fp32 -> TF32 rounding on the CPU (kern_f32_round_tf32, kern_dtype.h), the
 * emulation of the TF32 tensor cores' inputs behind the VAE's tf32 bound:
 * - random values over the whole exponent range, both signs, against the
 *   definition in float64: the result is one of the two TF32 values (10
 *   mantissa bits) around the input; truncation takes the one nearer zero,
 *   nearest takes the nearer one and, on an exact midpoint, the one away
 *   from zero;
 * - hand-picked values: exact TF32 values stay, midpoints go away from
 *   zero, the largest finite fp32 rounds to inf (nearest) or stays finite
 *   (truncation), inf and NaN stay, subnormals round like the rest. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kern_dtype.h"
#include "sp_test.h"

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static uint32_t bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* The TF32 values around finite x: lo toward zero, hi the next one away
 * from zero (the step is 2^13 in the bits of the magnitude), as doubles. */
static void around(float x, double *lo, double *hi) {
  const uint32_t sign = bits(x) & 0x80000000u, mag = bits(x) & 0x7fffffffu;
  const uint32_t down = mag & ~0x1fffu;
  *lo = (double)from_bits(sign | down);
  const uint32_t up = down + 0x2000u; /* may be the inf pattern */
  *hi = up >= 0x7f800000u ? (sign ? -INFINITY : INFINITY) : (double)from_bits(sign | up);
}

/* The definition's choice for finite x. */
static double want(float x, int truncate) {
  double lo, hi;
  around(x, &lo, &hi);
  if (truncate || (double)x == lo) return lo;
  if (isinf(hi)) { /* the midpoint to the inf step is 2^128 - 2^(127-11) */
    const double mid = ldexp(1.0, 128) - ldexp(1.0, 127 - 11);
    return fabs((double)x) >= mid ? hi : lo;
  }
  const double dl = fabs((double)x - lo), dh = fabs(hi - (double)x);
  return dh <= dl ? hi : lo; /* a tie goes away from zero */
}

int main(void) {
  sp_test_begin("test_tf32");
  int bad = 0;
  for (int i = 0; i < 2000000 && bad < 5; i++) {
    uint32_t u = (uint32_t)sp_rand_u64();
    if ((u & 0x7f800000u) == 0x7f800000u) continue; /* inf and NaN: below */
    const float x = from_bits(u);
    for (int tr = 0; tr < 2; tr++) {
      const float got = kern_f32_round_tf32(x, tr);
      const double w = want(x, tr);
      if ((double)got != w || (bits(got) & 0x1fffu)) {
        printf("FAIL %s of %a (0x%08x): got %a, want %a\n", tr ? "truncation" : "nearest", x,
               u, got, w);
        bad++;
      }
    }
  }
  CHECK(bad == 0, "%d random values rounded against the definition", bad);

  /* exact TF32 values */
  CHECK(kern_f32_round_tf32(1.5f, 0) == 1.5f && kern_f32_round_tf32(-1.5f, 1) == -1.5f,
        "1.5 not kept");
  /* 1 + 2^-11 is the midpoint between 1 and 1 + 2^-10: away from zero */
  const float mid = 1.0f + ldexpf(1.0f, -11);
  CHECK(kern_f32_round_tf32(mid, 0) == 1.0f + ldexpf(1.0f, -10), "midpoint not rounded up");
  CHECK(kern_f32_round_tf32(-mid, 0) == -(1.0f + ldexpf(1.0f, -10)),
        "negative midpoint not rounded away from zero");
  CHECK(kern_f32_round_tf32(mid, 1) == 1.0f, "midpoint not truncated");
  /* just below the midpoint rounds down */
  CHECK(kern_f32_round_tf32(nextafterf(mid, 0.0f), 0) == 1.0f, "below the midpoint not down");
  const float big = from_bits(0x7f7fffffu);
  CHECK(isinf(kern_f32_round_tf32(big, 0)), "the largest finite value does not round to inf");
  CHECK(kern_f32_round_tf32(big, 1) == from_bits(0x7f7fe000u), "the largest value truncated");
  CHECK(isinf(kern_f32_round_tf32(INFINITY, 0)) && kern_f32_round_tf32(-INFINITY, 1) < 0,
        "inf not kept");
  CHECK(isnan(kern_f32_round_tf32(NAN, 0)) && isnan(kern_f32_round_tf32(NAN, 1)),
        "NaN not kept");
  const float sub = from_bits(0x00001fffu); /* a subnormal below the first TF32 step */
  CHECK(kern_f32_round_tf32(sub, 1) == 0.0f && kern_f32_round_tf32(sub, 0) == from_bits(0x2000u),
        "subnormal rounding");
  printf("kern_f32_round_tf32: random values and the edge cases as defined\n");
  return sp_test_end();
}
