/* Helpers of the VAE tests (tests/vae/test_*.c): a printed, replayable seed
 * (SP_SEED), a splitmix64 source, output buffers with guard floats, and
 * the relative L2 error against a double reference. Failures go through
 * CHECK (tests/common/sp_check.h). Header-only: each test is one program. */
#ifndef VAE_TEST_H
#define VAE_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sp_check.h"

/* fp32 paths, STYLE.md 9. */
#define VT_TOL 1e-5
/* Floats after every output buffer that must survive the kernel. */
#define VT_GUARD 16

static uint64_t vt_state __attribute__((unused));

/* Seed from SP_SEED when set, else time and pid; printed either way. */
static inline uint64_t vt_seed(const char *name) {
  const char *env = getenv("SP_SEED");
  uint64_t seed = env ? strtoull(env, NULL, 0)
                      : ((uint64_t)time(NULL) * 1000003u) ^ ((uint64_t)getpid() << 20);
  printf("%s: seed %llu (rerun with SP_SEED=%llu)\n", name, (unsigned long long)seed,
         (unsigned long long)seed);
  vt_state = seed;
  return seed;
}

/* splitmix64 */
static inline uint64_t vt_next(void) {
  uint64_t z = (vt_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static inline double vt_uniform(double lo, double hi) {
  return lo + (hi - lo) * ((double)(vt_next() >> 11) * (1.0 / 9007199254740992.0));
}

static inline void vt_fill(float *p, int64_t n, double lo, double hi) {
  for (int64_t i = 0; i < n; i++) p[i] = (float)vt_uniform(lo, hi);
}

/* A NaN with a payload no kernel produces. */
static inline float vt_sentinel(void) {
  uint32_t u = 0x7fc0beefu;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* n floats and VT_GUARD sentinels after them; ends the test when out of
 * memory. */
static inline float *vt_alloc(int64_t n) {
  float *p = malloc((size_t)(n + VT_GUARD) * sizeof *p);
  if (!p) {
    fprintf(stderr, "FAIL: out of memory for %lld floats\n", (long long)n);
    exit(1);
  }
  float s = vt_sentinel();
  for (int64_t i = 0; i < n + VT_GUARD; i++) p[i] = s;
  return p;
}

/* 1 when the guard after p[n) is intact. */
static inline int vt_guard_ok(const float *p, int64_t n) {
  float s = vt_sentinel();
  for (int64_t i = n; i < n + VT_GUARD; i++)
    if (memcmp(&p[i], &s, sizeof s) != 0) return 0;
  return 1;
}

static inline double *vt_dalloc(int64_t n) {
  double *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
  if (!p) {
    fprintf(stderr, "FAIL: out of memory for %lld doubles\n", (long long)n);
    exit(1);
  }
  return p;
}

/* ||got - ref|| / ||ref|| (absolute when ref is zero); +Inf on any NaN/Inf. */
static inline double vt_rel_l2(const float *got, const double *ref, int64_t n) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(got[i])) return INFINITY;
    double d = (double)got[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

static inline int vt_finish(const char *name) {
  if (g_fail) {
    printf("%s: FAILED\n", name);
    return 1;
  }
  printf("%s: all checks passed\n", name);
  return 0;
}

#endif
