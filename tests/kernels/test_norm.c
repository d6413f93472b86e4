/* kern_cpu_layernorm (with and without affine) and kern_cpu_rmsnorm
 * against naive float64 formulas on fresh random data; in-place use gives
 * the same bits; layernorm is bit-identical for 1, 2 and 3 threads; guard
 * floats after every output. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_cpu.h"
#include "sp_test.h"

#include <omp.h>

/* torch.nn.LayerNorm: biased variance, (x - mean) / sqrt(var + eps) * w + b. */
static void ref_layernorm(const float *x, const float *w, const float *b, double *y,
                          int64_t rows, int64_t dim, double eps) {
  for (int64_t r = 0; r < rows; r++) {
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < dim; i++) mean += x[r * dim + i];
    mean /= (double)dim;
    for (int64_t i = 0; i < dim; i++) var += (x[r * dim + i] - mean) * (x[r * dim + i] - mean);
    var /= (double)dim;
    for (int64_t i = 0; i < dim; i++) {
      double v = (x[r * dim + i] - mean) / sqrt(var + eps);
      y[r * dim + i] = w ? v * w[i] + b[i] : v;
    }
  }
}

/* x / sqrt(mean(x^2) + eps) * w */
static void ref_rmsnorm(const float *x, const float *w, double *y, int64_t rows, int64_t dim,
                        double eps) {
  for (int64_t r = 0; r < rows; r++) {
    double ms = 0.0;
    for (int64_t i = 0; i < dim; i++) ms += (double)x[r * dim + i] * x[r * dim + i];
    ms /= (double)dim;
    for (int64_t i = 0; i < dim; i++) y[r * dim + i] = x[r * dim + i] / sqrt(ms + eps) * w[i];
  }
}

/* kind: 0 layernorm no affine, 1 layernorm affine, 2 rmsnorm. */
static void run_kind(int kind, const float *x, const float *w, const float *b, float *y,
                     int64_t rows, int64_t dim, float eps) {
  if (kind == 2)
    kern_cpu_rmsnorm(x, w, y, rows, dim, eps);
  else
    kern_cpu_layernorm(x, kind ? w : NULL, kind ? b : NULL, y, rows, dim, eps);
}

static void check(int kind, int64_t rows, int64_t dim, double offset, int threads_check) {
  static const char *names[] = {"layernorm", "layernorm_affine", "rmsnorm"};
  const float eps = 1e-6f;
  float *x = sp_test_alloc(rows * dim), *w = sp_test_alloc(dim), *b = sp_test_alloc(dim);
  float *y = sp_test_alloc(rows * dim), *y2 = sp_test_alloc(rows * dim);
  double *ref = sp_test_dalloc(rows * dim);
  /* offset shifts every row's mean: the variance must not cancel. */
  sp_rand_fill(x, rows * dim, offset - 2.0, offset + 2.0);
  sp_rand_fill(w, dim, 0.5, 1.5);
  sp_rand_fill(b, dim, -1.0, 1.0);

  run_kind(kind, x, w, b, y, rows, dim, eps);
  if (kind == 2)
    ref_rmsnorm(x, w, ref, rows, dim, eps);
  else
    ref_layernorm(x, kind ? w : NULL, kind ? b : NULL, ref, rows, dim, eps);
  double err = sp_test_rel_l2(y, ref, rows * dim);
  /* dim = 1 layernorm without affine is exactly 0: sp_test_rel_l2 is absolute. */
  CHECK(err <= SP_TEST_TOL_F32, "%s rows=%lld dim=%lld offset=%g: rel L2 %.3g > %g", names[kind],
           (long long)rows, (long long)dim, offset, err, SP_TEST_TOL_F32);
  CHECK(sp_test_guard_ok(y, rows * dim), "%s rows=%lld dim=%lld: wrote past y", names[kind],
           (long long)rows, (long long)dim);

  /* In place (y aliases x) must give the same bits. */
  memcpy(y2, x, (size_t)(rows * dim) * sizeof *x);
  run_kind(kind, y2, w, b, y2, rows, dim, eps);
  CHECK(memcmp(y, y2, (size_t)(rows * dim) * sizeof *y) == 0,
           "%s rows=%lld dim=%lld: in-place result differs", names[kind], (long long)rows,
           (long long)dim);

  if (threads_check) {
    int nthreads = omp_get_max_threads();
    for (int t = 1; t <= 3; t++) {
      omp_set_num_threads(t);
      run_kind(kind, x, w, b, y2, rows, dim, eps);
      CHECK(memcmp(y, y2, (size_t)(rows * dim) * sizeof *y) == 0,
               "%s rows=%lld dim=%lld: %d threads differ from %d", names[kind], (long long)rows,
               (long long)dim, t, nthreads);
    }
    omp_set_num_threads(nthreads);
  }
  printf("%s rows=%lld dim=%lld offset=%g: rel L2 %.2e\n", names[kind], (long long)rows,
         (long long)dim, offset, err);
  free(x), free(w), free(b), free(y), free(y2), free(ref);
}

int main(void) {
  sp_test_begin("test_norm");
  static const int64_t shapes[][2] = {{1, 1}, {1, 5}, {3, 64}, {17, 1536}, {5, 1537}, {2, 5120}};
  for (int kind = 0; kind < 3; kind++) {
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
      check(kind, shapes[i][0], shapes[i][1], 0.0, 0);
      check(kind, shapes[i][0], shapes[i][1], 100.0, 0);
    }
    /* Enough elements for the parallel path. */
    check(kind, 97, 1537, 0.5, 1);
  }
  return sp_test_end();
}
