/* The C tests' helper library (sp_testlib): one check macro family, one
 * seeded random generator, guarded host buffers and the relative L2 error.
 *
 * A test calls sp_test_begin(name) first (it seeds the generator from
 * SP_SEED when set, else from the clock and pid, and prints the seed),
 * asserts with CHECK, and returns sp_test_end(): 0 when every check held,
 * 1 otherwise, with the seed to replay printed again.
 *
 *   CHECK(cond, fmt, ...)   records a failure (file:line, the condition and
 *                           the message) and goes on
 *   CHECK_CUDA(call)        (with SP_TEST_CUDA defined before the include)
 *                           ends the test at once when a CUDA call fails;
 *                           sp_test_no_cuda(name) says when to skip
 *
 * Tolerances follow STYLE.md 9; SP_TEST_TOL_F32 is the fp32 per-op one. */
#ifndef SP_TEST_H
#define SP_TEST_H

#include <stddef.h>
#include <stdint.h>

/* fp32 paths: relative error per op (STYLE.md 9). */
#define SP_TEST_TOL_F32 1e-5
/* Floats after every sp_test_alloc buffer that must survive the code under test. */
#define SP_TEST_GUARD 16

/* ---- checks -------------------------------------------------------------- */

/* Prints "FAIL file:line: cond: message" and counts the failure. */
void sp_test_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Failures so far. */
int sp_test_failures(void);

#define CHECK(cond, ...)                                       \
  do {                                                         \
    if (!(cond)) sp_test_fail(__FILE__, __LINE__, #cond, __VA_ARGS__); \
  } while (0)

#ifdef SP_TEST_CUDA
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#define CHECK_CUDA(call)                                                            \
  do {                                                                              \
    cudaError_t e_ = (call);                                                        \
    if (e_ != cudaSuccess) {                                                        \
      fprintf(stderr, "FAIL %s:%d: %s: %s (seed %llu)\n", __FILE__, __LINE__, #call, \
              cudaGetErrorString(e_), (unsigned long long)sp_test_seed());          \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)
/* 1, with one line "name: skipped: no CUDA device (...)", when the machine
 * has no CUDA device: the test then returns 77 (ctest's skip). */
static inline int sp_test_no_cuda(const char *name) {
  int ndev = 0;
  const cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e == cudaSuccess && ndev > 0) return 0;
  printf("%s: skipped: no CUDA device (cudaGetDeviceCount: %s, %d devices)\n", name,
         e != cudaSuccess ? cudaGetErrorString(e) : "ok", ndev);
  return 1;
}
#endif

/* ---- the run ------------------------------------------------------------- */

/* Seeds the generator (SP_SEED=n replays a run, decimal or 0x hex; else the
 * clock and pid), prints "name: seed n (replay with SP_SEED=n)" and
 * returns the seed. */
uint64_t sp_test_begin(const char *name);
/* The seed sp_test_begin chose. */
uint64_t sp_test_seed(void);
/* Prints "name: all checks passed" or the failure count and the seed;
 * returns the exit status (0 or 1). */
int sp_test_end(void);

/* ---- the random generator (splitmix64) ------------------------------------ */

uint64_t sp_rand_u64(void);
/* Uniform in [0, 1), 53 bits. */
double sp_rand_unit(void);
/* Uniform in [lo, hi). */
double sp_rand_uniform(double lo, double hi);
/* Uniform integer in [lo, hi], both ends included. */
int64_t sp_rand_int(int64_t lo, int64_t hi);
/* Standard normal (Box-Muller on two sp_rand_unit draws). */
double sp_rand_normal(void);
/* p[0..n) uniform in [lo, hi). */
void sp_rand_fill(float *p, int64_t n, double lo, double hi);
/* The generator's state, to draw the same numbers again (set) after
 * saving it (get). */
uint64_t sp_rand_state_get(void);
void sp_rand_state_set(uint64_t state);

/* Seconds of a monotonic clock, for timing a step. */
double sp_test_seconds(void);

/* ---- host buffers ---------------------------------------------------------- */

/* malloc that ends the test on failure (bytes 0 allocates 1). */
void *sp_test_malloc(size_t bytes);
/* n floats followed by SP_TEST_GUARD sentinels, every one the sentinel. */
float *sp_test_alloc(int64_t n);
/* n zeroed doubles. */
double *sp_test_dalloc(int64_t n);
/* The sentinel: a NaN with a payload no kernel produces. */
float sp_test_sentinel(void);
/* 1 when the SP_TEST_GUARD floats after p[n) still hold the sentinel bits. */
int sp_test_guard_ok(const float *p, int64_t n);

/* ---- errors ---------------------------------------------------------------- */

/* ||got - ref||_2 / ||ref||_2, the absolute norm when ref is all zero;
 * +Inf when got holds a NaN or Inf (an unwritten or broken output always
 * fails). */
double sp_test_rel_l2(const float *got, const double *ref, int64_t n);
double sp_test_rel_l2_f32(const float *got, const float *ref, int64_t n);

/* ---- references ------------------------------------------------------------ */

/* One head of exact attention in float64: out = softmax(q k^T / sqrt(d)) v
 * for Lq queries over Lk keys of width d. Element c of query (and output
 * row) i is at [i * q_tok + c * ch], of key or value j at
 * [j * kv_tok + c * ch]: token-major heads (tok = heads * hd, ch = 1) and
 * channel-major frames (tok = 1, ch = frames * pixels) alike. */
void sp_test_attention_ref(const float *q, const float *k, const float *v, double *out,
                           int64_t Lq, int64_t Lk, int64_t d, int64_t q_tok, int64_t kv_tok,
                           int64_t ch);

#endif
