/* kern_cpu_modulate, kern_cpu_gated_add (with and without gate),
 * kern_cpu_gelu_tanh and kern_cpu_silu against naive float64 formulas on
 * fresh random data, with guard floats after every output, including sizes
 * large enough for the parallel path. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_cpu.h"
#include "sp_test.h"

static void check_modulate(int64_t rows, int64_t dim) {
  float *x = sp_test_alloc(rows * dim), *sh = sp_test_alloc(dim), *sc = sp_test_alloc(dim);
  float *y = sp_test_alloc(rows * dim);
  double *ref = sp_test_dalloc(rows * dim);
  sp_rand_fill(x, rows * dim, -3.0, 3.0);
  sp_rand_fill(sh, dim, -1.0, 1.0);
  sp_rand_fill(sc, dim, -1.0, 1.0);
  kern_cpu_modulate(x, sh, sc, y, rows, dim);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t i = 0; i < dim; i++)
      ref[r * dim + i] = (double)x[r * dim + i] * (1.0 + sc[i]) + sh[i];
  double err = sp_test_rel_l2(y, ref, rows * dim);
  CHECK(err <= SP_TEST_TOL_F32, "modulate rows=%lld dim=%lld: rel L2 %.3g", (long long)rows,
           (long long)dim, err);
  CHECK(sp_test_guard_ok(y, rows * dim), "modulate rows=%lld dim=%lld: wrote past y",
           (long long)rows, (long long)dim);
  /* In place. */
  kern_cpu_modulate(x, sh, sc, x, rows, dim);
  CHECK(memcmp(x, y, (size_t)(rows * dim) * sizeof *x) == 0,
           "modulate rows=%lld dim=%lld: in-place result differs", (long long)rows,
           (long long)dim);
  printf("modulate rows=%lld dim=%lld: rel L2 %.2e\n", (long long)rows, (long long)dim, err);
  free(x), free(sh), free(sc), free(y), free(ref);
}

static void check_gated_add(int64_t rows, int64_t dim, int with_gate) {
  float *x = sp_test_alloc(rows * dim), *y = sp_test_alloc(rows * dim), *g = sp_test_alloc(dim);
  double *ref = sp_test_dalloc(rows * dim);
  sp_rand_fill(x, rows * dim, -3.0, 3.0);
  sp_rand_fill(y, rows * dim, -3.0, 3.0);
  sp_rand_fill(g, dim, -2.0, 2.0);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t i = 0; i < dim; i++)
      ref[r * dim + i] = (double)x[r * dim + i] + (double)y[r * dim + i] * (with_gate ? g[i] : 1.0);
  kern_cpu_gated_add(x, y, with_gate ? g : NULL, rows, dim);
  double err = sp_test_rel_l2(x, ref, rows * dim);
  CHECK(err <= SP_TEST_TOL_F32, "gated_add rows=%lld dim=%lld gate=%d: rel L2 %.3g", (long long)rows,
           (long long)dim, with_gate, err);
  CHECK(sp_test_guard_ok(x, rows * dim), "gated_add rows=%lld dim=%lld: wrote past x",
           (long long)rows, (long long)dim);
  printf("gated_add rows=%lld dim=%lld gate=%d: rel L2 %.2e\n", (long long)rows, (long long)dim,
         with_gate, err);
  free(x), free(y), free(g), free(ref);
}

/* which: 0 GELU (tanh approximation), 1 SiLU. */
static void check_act(int which, int64_t n) {
  const double pi = acos(-1.0);
  float *x = sp_test_alloc(n);
  double *ref = sp_test_dalloc(n);
  sp_rand_fill(x, n, -8.0, 8.0);
  for (int64_t i = 0; i < n; i++) {
    double v = x[i];
    ref[i] = which == 0 ? 0.5 * v * (1.0 + tanh(sqrt(2.0 / pi) * (v + 0.044715 * pow(v, 3.0))))
                        : v * (1.0 / (1.0 + exp(-v)));
  }
  if (which == 0)
    kern_cpu_gelu_tanh(x, n);
  else
    kern_cpu_silu(x, n);
  double err = sp_test_rel_l2(x, ref, n), worst = 0.0;
  CHECK(err <= SP_TEST_TOL_F32, "%s n=%lld: rel L2 %.3g", which ? "silu" : "gelu_tanh", (long long)n,
           err);
  /* Evaluated in double and rounded once, each element is within 2^-24
   * relative of the formula; 1e-6 leaves a wide margin yet still catches a
   * wrong constant that the L2 tolerance would average away. */
  for (int64_t i = 0; i < n; i++)
    if (ref[i] != 0.0) worst = fmax(worst, fabs((x[i] - ref[i]) / ref[i]));
  CHECK(worst <= 1e-6, "%s n=%lld: max element rel error %.3g", which ? "silu" : "gelu_tanh",
           (long long)n, worst);
  CHECK(sp_test_guard_ok(x, n), "%s n=%lld: wrote past x", which ? "silu" : "gelu_tanh",
           (long long)n);
  printf("%s n=%lld: rel L2 %.2e\n", which ? "silu" : "gelu_tanh", (long long)n, err);
  free(x), free(ref);
}

int main(void) {
  sp_test_begin("test_elementwise");
  static const int64_t shapes[][2] = {{1, 1}, {1, 7}, {3, 1536}, {300, 257}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    check_modulate(shapes[i][0], shapes[i][1]);
    check_gated_add(shapes[i][0], shapes[i][1], 1);
    check_gated_add(shapes[i][0], shapes[i][1], 0);
  }
  static const int64_t sizes[] = {1, 3, 1000, 100003};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    check_act(0, sizes[i]);
    check_act(1, sizes[i]);
  }
  return sp_test_end();
}
