/* Counter-based normal noise (see noise.h). */
#include "noise.h"

#include <math.h>
#include <string.h>

/* Philox-4x32 round multipliers and Weyl key increments (Random123). */
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void noise_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    if (r > 0) { /* the key advances before every round but the first */
      k0 += PHILOX_W0;
      k1 += PHILOX_W1;
    }
    uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
    uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/* ln(u) for u in [2^-53, 1]: u = m 2^e with m in [sqrt(1/2), sqrt(2)),
 * ln m = 2 atanh(s), s = (m-1)/(m+1), |s| <= 0.1716, series to s^25
 * (the next term is below 1e-21 of the value). ln 2 split in a high part
 * with trailing zero bits (e * LN2_HI is exact) and the rest. */
static double det_log(double u) {
  const double LN2_HI = 6.93147180369123816490e-01;
  const double LN2_LO = 1.90821492927058770002e-10;
  uint64_t bits;
  memcpy(&bits, &u, sizeof bits);
  int e = (int)((bits >> 52) & 0x7ff) - 1023;
  bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
  double m;
  memcpy(&m, &bits, sizeof m);
  if (m > 1.41421356237309504880) {
    m = m * 0.5;
    e += 1;
  }
  double s = (m - 1.0) / (m + 1.0);
  double z = s * s;
  double p = 1.0 / 25.0;
  for (int k = 11; k >= 0; k--) p = 1.0 / (double)(2 * k + 1) + z * p;
  double ln_m = 2.0 * s * p;
  double de = (double)e;
  return de * LN2_HI + (de * LN2_LO + ln_m);
}

/* cos(2 pi u) for u in [0, 1): the quadrant comes from 4u (exact), the
 * angle left over is theta in [0, pi/2), and sin / cos of theta are Taylor
 * series to degree 25 in nested form (error below 1e-20). */
static double det_cos_2pi(double u) {
  const double HALF_PI = 1.57079632679489661923;
  double q = u * 4.0;
  int k = (int)q;
  if (k > 3) k = 3;
  double f = q - (double)k;
  double th = f * HALF_PI;
  double t = th * th;
  double c = 1.0, sn = 1.0;
  for (int j = 12; j >= 1; j--) {
    c = 1.0 - t / (double)((2 * j - 1) * (2 * j)) * c;
    sn = 1.0 - t / (double)((2 * j) * (2 * j + 1)) * sn;
  }
  sn = th * sn;
  switch (k) {
    case 0: return c;
    case 1: return -sn;
    case 2: return -c;
    default: return sn;
  }
}

static float normal_at(uint64_t seed, uint64_t idx) {
  const uint32_t ctr[4] = {(uint32_t)idx, (uint32_t)(idx >> 32), 0u, 0u};
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint32_t w[4];
  noise_philox4x32_10(ctr, key, w);
  const double two_m53 = 1.0 / 9007199254740992.0; /* 2^-53 */
  uint64_t a = ((uint64_t)w[0] << 32) | w[1];
  uint64_t b = ((uint64_t)w[2] << 32) | w[3];
  double u1 = (double)((a >> 11) + 1) * two_m53; /* (0, 1]: ln never sees 0 */
  double u2 = (double)(b >> 11) * two_m53;       /* [0, 1) */
  double r = sqrt(-2.0 * det_log(u1));
  return (float)(r * det_cos_2pi(u2));
}

void noise_fill_range(uint64_t seed, uint64_t first, float *x, size_t n) {
  const int64_t nn = (int64_t)n;
#pragma omp parallel for schedule(static) if (nn > 16384)
  for (int64_t j = 0; j < nn; j++) x[j] = normal_at(seed, first + (uint64_t)j);
}

void noise_fill(uint64_t seed, float *x, size_t n) { noise_fill_range(seed, 0, x, n); }
