/* sp_testlib: see sp_test.h. */
#include "sp_test.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_failures;
static const char *g_name = "test";
static uint64_t g_seed;
static uint64_t g_state;

/* ---- checks -------------------------------------------------------------- */

void sp_test_fail(const char *file, int line, const char *cond, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "FAIL %s:%d: %s: ", file, line, cond);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
  g_failures++;
}

int sp_test_failures(void) { return g_failures; }

/* ---- the run ------------------------------------------------------------- */

double sp_test_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

uint64_t sp_test_begin(const char *name) {
  g_name = name;
  const char *env = getenv("SP_SEED");
  if (env && *env) {
    g_seed = strtoull(env, NULL, 0);
  } else {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    g_seed = ((uint64_t)t.tv_sec * 1000000007ull + (uint64_t)t.tv_nsec) ^
             ((uint64_t)getpid() << 32);
  }
  g_state = g_seed;
  printf("%s: seed %llu (replay with SP_SEED=%llu)\n", name, (unsigned long long)g_seed,
         (unsigned long long)g_seed);
  fflush(stdout);
  return g_seed;
}

uint64_t sp_test_seed(void) { return g_seed; }

int sp_test_end(void) {
  if (g_failures) {
    fprintf(stderr, "%s: %d check(s) failed (replay with SP_SEED=%llu)\n", g_name, g_failures,
            (unsigned long long)g_seed);
    printf("%s: %d check(s) failed\n", g_name, g_failures);
    return 1;
  }
  printf("%s: all checks passed\n", g_name);
  return 0;
}

/* ---- the random generator (splitmix64) ------------------------------------ */

uint64_t sp_rand_u64(void) {
  uint64_t z = (g_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double sp_rand_unit(void) { return (double)(sp_rand_u64() >> 11) * (1.0 / 9007199254740992.0); }

double sp_rand_uniform(double lo, double hi) { return lo + (hi - lo) * sp_rand_unit(); }

int64_t sp_rand_int(int64_t lo, int64_t hi) {
  return lo + (int64_t)(sp_rand_u64() % (uint64_t)(hi - lo + 1));
}

double sp_rand_normal(void) {
  const double u1 = 1.0 - sp_rand_unit(), u2 = sp_rand_unit(); /* u1 in (0, 1] */
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void sp_rand_fill(float *p, int64_t n, double lo, double hi) {
  for (int64_t i = 0; i < n; i++) p[i] = (float)sp_rand_uniform(lo, hi);
}

uint64_t sp_rand_state_get(void) { return g_state; }
void sp_rand_state_set(uint64_t state) { g_state = state; }

/* ---- host buffers ---------------------------------------------------------- */

void *sp_test_malloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "FAIL: out of host memory (%zu bytes, seed %llu)\n", bytes,
            (unsigned long long)g_seed);
    exit(1);
  }
  return p;
}

float sp_test_sentinel(void) {
  const uint32_t u = 0x7fc0beefu;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

float *sp_test_alloc(int64_t n) {
  float *p = sp_test_malloc((size_t)(n + SP_TEST_GUARD) * sizeof *p);
  const float s = sp_test_sentinel();
  for (int64_t i = 0; i < n + SP_TEST_GUARD; i++) p[i] = s;
  return p;
}

double *sp_test_dalloc(int64_t n) {
  double *p = sp_test_malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
  memset(p, 0, (size_t)(n > 0 ? n : 1) * sizeof *p);
  return p;
}

int sp_test_guard_ok(const float *p, int64_t n) {
  const float s = sp_test_sentinel();
  for (int64_t i = n; i < n + SP_TEST_GUARD; i++)
    if (memcmp(&p[i], &s, sizeof s) != 0) return 0;
  return 1;
}

/* ---- errors ---------------------------------------------------------------- */

double sp_test_rel_l2(const float *got, const double *ref, int64_t n) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(got[i])) return INFINITY;
    const double d = (double)got[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

void sp_test_attention_ref(const float *q, const float *k, const float *v, double *out,
                           int64_t Lq, int64_t Lk, int64_t d, int64_t q_tok, int64_t kv_tok,
                           int64_t ch) {
  double *s = sp_test_dalloc(Lk);
  for (int64_t i = 0; i < Lq; i++) {
    double mx = -INFINITY, sum = 0.0;
    for (int64_t j = 0; j < Lk; j++) {
      double dot = 0.0;
      for (int64_t c = 0; c < d; c++) dot += (double)q[i * q_tok + c * ch] * k[j * kv_tok + c * ch];
      s[j] = dot / sqrt((double)d);
      mx = fmax(mx, s[j]);
    }
    for (int64_t j = 0; j < Lk; j++) sum += s[j] = exp(s[j] - mx);
    for (int64_t c = 0; c < d; c++) {
      double o = 0.0;
      for (int64_t j = 0; j < Lk; j++) o += s[j] * v[j * kv_tok + c * ch];
      out[i * q_tok + c * ch] = o / sum;
    }
  }
  free(s);
}

double sp_test_rel_l2_f32(const float *got, const float *ref, int64_t n) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(got[i])) return INFINITY;
    const double d = (double)got[i] - (double)ref[i];
    num += d * d;
    den += (double)ref[i] * (double)ref[i];
  }
  return den > 0.0 ? sqrt(num / den) : sqrt(num);
}
