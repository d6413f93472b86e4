/* Small helpers shared by the kernel unit tests (tests/kernels/test_*.c):
 * a seeded random source, guarded output buffers, the relative L2 error
 * against a double reference, and a failure counter. Header-only so each
 * test stays one executable. */
#ifndef KT_H
#define KT_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* fp32 paths, STYLE.md 9. */
#define KT_TOL 1e-5
/* Floats after every output buffer that must survive the kernel. */
#define KT_GUARD 16

static int kt_failures;
static uint64_t kt_state;

#define KT_CHECK(cond, ...)                                                  \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                   \
      fprintf(stderr, __VA_ARGS__);                                          \
      fprintf(stderr, "\n");                                                 \
      kt_failures++;                                                         \
    }                                                                        \
  } while (0)

/* Seed from KT_SEED when set (to rerun a failure), else time and pid;
 * always printed so any run can be reproduced. */
static void kt_seed(const char *name) {
  const char *env = getenv("KT_SEED");
  uint64_t seed = env ? strtoull(env, NULL, 0)
                      : ((uint64_t)time(NULL) * 1000003u) ^ ((uint64_t)getpid() << 20);
  printf("%s: seed %llu (rerun with KT_SEED=%llu)\n", name, (unsigned long long)seed,
         (unsigned long long)seed);
  kt_state = seed;
}

/* splitmix64 */
static uint64_t kt_next(void) {
  uint64_t z = (kt_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static double kt_uniform(double lo, double hi) {
  return lo + (hi - lo) * ((double)(kt_next() >> 11) * (1.0 / 9007199254740992.0));
}

static void kt_fill(float *p, int64_t n, double lo, double hi) {
  for (int64_t i = 0; i < n; i++) p[i] = (float)kt_uniform(lo, hi);
}

/* The guard value: a NaN with a payload no kernel produces. */
static float kt_sentinel(void) {
  uint32_t u = 0x7fc0beefu;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* n floats plus KT_GUARD sentinels; aborts the test on allocation failure. */
static float *kt_alloc(int64_t n) {
  float *p = malloc((size_t)(n + KT_GUARD) * sizeof *p);
  if (!p) {
    fprintf(stderr, "FAIL: out of memory for %lld floats\n", (long long)n);
    exit(1);
  }
  float s = kt_sentinel();
  for (int64_t i = 0; i < n + KT_GUARD; i++) p[i] = s;
  return p;
}

/* 1 when the KT_GUARD floats after p[n) still hold the sentinel bits. */
static int kt_guard_ok(const float *p, int64_t n) {
  float s = kt_sentinel();
  for (int64_t i = n; i < n + KT_GUARD; i++)
    if (memcmp(&p[i], &s, sizeof s) != 0) return 0;
  return 1;
}

static double *kt_dalloc(int64_t n) {
  double *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
  if (!p) {
    fprintf(stderr, "FAIL: out of memory for %lld doubles\n", (long long)n);
    exit(1);
  }
  return p;
}

/* ||got - ref||_2 / ||ref||_2; the absolute norm when ref is all zero.
 * Any NaN or Inf in got gives +Inf so it always fails. */
static double kt_rel_l2(const float *got, const double *ref, int64_t n) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(got[i])) return INFINITY;
    double d = (double)got[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

static int kt_finish(const char *name) {
  if (kt_failures) {
    printf("%s: %d check(s) failed\n", name, kt_failures);
    return 1;
  }
  printf("%s: all checks passed\n", name);
  return 0;
}

#endif
