/* kern_cpu_linear against a naive float64 y = x w^T + b, on fresh random
 * data; bit-identity across thread counts; guard floats after y; and the
 * throughput of two tiny-model shapes, text embedding and FFN (printed, not asserted:
 * it depends on the machine). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kern_cpu.h"
#include "sp_test.h"

#include <omp.h>

static void ref_linear(const float *x, const float *w, const float *b, double *y, int64_t M,
                       int64_t K, int64_t N) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double s = b ? (double)b[n] : 0.0;
      for (int64_t k = 0; k < K; k++) s += (double)x[m * K + k] * (double)w[n * K + k];
      y[m * N + n] = s;
    }
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One shape: accuracy, guard, and (when threads_check) 1/2/3-thread bits. */
static void check_shape(int64_t M, int64_t K, int64_t N, int with_bias, int threads_check,
                        int bench) {
  float *x = sp_test_alloc(M * K), *w = sp_test_alloc(N * K), *b = sp_test_alloc(N);
  float *y = sp_test_alloc(M * N), *y2 = sp_test_alloc(M * N);
  double *ref = sp_test_dalloc(M * N);
  sp_rand_fill(x, M * K, -1.0, 1.0);
  sp_rand_fill(w, N * K, -1.0, 1.0);
  sp_rand_fill(b, N, -1.0, 1.0);
  const float *bp = with_bias ? b : NULL;

  int nthreads = omp_get_max_threads();
  kern_cpu_linear(x, w, bp, y, M, K, N);
  ref_linear(x, w, bp, ref, M, K, N);
  double err = sp_test_rel_l2(y, ref, M * N);
  CHECK(err <= SP_TEST_TOL_F32, "linear M=%lld K=%lld N=%lld bias=%d: rel L2 %.3g > %g", (long long)M,
           (long long)K, (long long)N, with_bias, err, SP_TEST_TOL_F32);
  CHECK(sp_test_guard_ok(y, M * N), "linear M=%lld K=%lld N=%lld: wrote past y", (long long)M,
           (long long)K, (long long)N);

  if (threads_check) {
    for (int t = 1; t <= 3; t++) {
      omp_set_num_threads(t);
      kern_cpu_linear(x, w, bp, y2, M, K, N);
      CHECK(memcmp(y, y2, (size_t)(M * N) * sizeof *y) == 0,
               "linear M=%lld K=%lld N=%lld: %d threads differ from %d", (long long)M,
               (long long)K, (long long)N, t, nthreads);
    }
    omp_set_num_threads(nthreads);
  }
  if (bench) {
    int reps = 0;
    double t0 = now_s(), t1;
    do {
      kern_cpu_linear(x, w, bp, y2, M, K, N);
      reps++;
      t1 = now_s();
    } while (t1 - t0 < 0.5);
    printf("linear M=%lld K=%lld N=%lld, %d threads: %.1f GFLOP/s\n", (long long)M,
           (long long)K, (long long)N, nthreads,
           2.0 * (double)M * (double)K * (double)N * reps / (t1 - t0) * 1e-9);
  }
  printf("linear M=%lld K=%lld N=%lld bias=%d: rel L2 %.2e\n", (long long)M, (long long)K,
         (long long)N, with_bias, err);
  free(x), free(w), free(b), free(y), free(y2), free(ref);
}

int main(void) {
  sp_test_begin("test_linear");
  /* Tile sizes are MR=4, NR=8, KC=256, NC=32, MC=64: include rows = 1,
   * non-multiples of each, K across several K blocks, and M tails. */
  static const int64_t shapes[][3] = {
      {1, 1, 1},    {1, 7, 3},     {3, 5, 9},     {4, 8, 8},     {5, 300, 17},
      {33, 257, 41}, {64, 256, 32}, {67, 520, 100}, {1, 4096, 256}, {130, 1000, 70},
      {2, 13824, 9},
  };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    check_shape(shapes[i][0], shapes[i][1], shapes[i][2], 1, 0, 0);
    check_shape(shapes[i][0], shapes[i][1], shapes[i][2], 0, 0, 0);
  }
  /* Thread-count independence on shapes with many tiles and ragged edges. */
  check_shape(67, 520, 100, 1, 1, 0);
  check_shape(200, 300, 77, 0, 1, 0);
  /* The two shapes whose throughput is reported. */
  check_shape(512, 4096, 256, 1, 1, 1);
  check_shape(80, 256, 640, 1, 1, 1);
  return sp_test_end();
}
