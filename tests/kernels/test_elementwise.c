/* kern_cpu_modulate, kern_cpu_gated_add (with and without gate),
 * kern_cpu_gelu_tanh and kern_cpu_silu against naive float64 formulas on
 * fresh random data, with guard floats after every output, including sizes
 * large enough for the parallel path. */
#include "kern_cpu.h"
#include "kt.h"

static void check_modulate(int64_t rows, int64_t dim) {
  float *x = kt_alloc(rows * dim), *sh = kt_alloc(dim), *sc = kt_alloc(dim);
  float *y = kt_alloc(rows * dim);
  double *ref = kt_dalloc(rows * dim);
  kt_fill(x, rows * dim, -3.0, 3.0);
  kt_fill(sh, dim, -1.0, 1.0);
  kt_fill(sc, dim, -1.0, 1.0);
  kern_cpu_modulate(x, sh, sc, y, rows, dim);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t i = 0; i < dim; i++)
      ref[r * dim + i] = (double)x[r * dim + i] * (1.0 + sc[i]) + sh[i];
  double err = kt_rel_l2(y, ref, rows * dim);
  KT_CHECK(err <= KT_TOL, "modulate rows=%lld dim=%lld: rel L2 %.3g", (long long)rows,
           (long long)dim, err);
  KT_CHECK(kt_guard_ok(y, rows * dim), "modulate rows=%lld dim=%lld: wrote past y",
           (long long)rows, (long long)dim);
  /* In place. */
  kern_cpu_modulate(x, sh, sc, x, rows, dim);
  KT_CHECK(memcmp(x, y, (size_t)(rows * dim) * sizeof *x) == 0,
           "modulate rows=%lld dim=%lld: in-place result differs", (long long)rows,
           (long long)dim);
  printf("modulate rows=%lld dim=%lld: rel L2 %.2e\n", (long long)rows, (long long)dim, err);
  free(x), free(sh), free(sc), free(y), free(ref);
}

static void check_gated_add(int64_t rows, int64_t dim, int with_gate) {
  float *x = kt_alloc(rows * dim), *y = kt_alloc(rows * dim), *g = kt_alloc(dim);
  double *ref = kt_dalloc(rows * dim);
  kt_fill(x, rows * dim, -3.0, 3.0);
  kt_fill(y, rows * dim, -3.0, 3.0);
  kt_fill(g, dim, -2.0, 2.0);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t i = 0; i < dim; i++)
      ref[r * dim + i] = (double)x[r * dim + i] + (double)y[r * dim + i] * (with_gate ? g[i] : 1.0);
  kern_cpu_gated_add(x, y, with_gate ? g : NULL, rows, dim);
  double err = kt_rel_l2(x, ref, rows * dim);
  KT_CHECK(err <= KT_TOL, "gated_add rows=%lld dim=%lld gate=%d: rel L2 %.3g", (long long)rows,
           (long long)dim, with_gate, err);
  KT_CHECK(kt_guard_ok(x, rows * dim), "gated_add rows=%lld dim=%lld: wrote past x",
           (long long)rows, (long long)dim);
  printf("gated_add rows=%lld dim=%lld gate=%d: rel L2 %.2e\n", (long long)rows, (long long)dim,
         with_gate, err);
  free(x), free(y), free(g), free(ref);
}

/* which: 0 GELU (tanh approximation), 1 SiLU. */
static void check_act(int which, int64_t n) {
  const double pi = acos(-1.0);
  float *x = kt_alloc(n);
  double *ref = kt_dalloc(n);
  kt_fill(x, n, -8.0, 8.0);
  for (int64_t i = 0; i < n; i++) {
    double v = x[i];
    ref[i] = which == 0 ? 0.5 * v * (1.0 + tanh(sqrt(2.0 / pi) * (v + 0.044715 * pow(v, 3.0))))
                        : v * (1.0 / (1.0 + exp(-v)));
  }
  if (which == 0)
    kern_cpu_gelu_tanh(x, n);
  else
    kern_cpu_silu(x, n);
  double err = kt_rel_l2(x, ref, n), worst = 0.0;
  KT_CHECK(err <= KT_TOL, "%s n=%lld: rel L2 %.3g", which ? "silu" : "gelu_tanh", (long long)n,
           err);
  /* Evaluated in double and rounded once, each element is within 2^-24
   * relative of the formula; 1e-6 leaves a wide margin yet still catches a
   * wrong constant that the L2 tolerance would average away. */
  for (int64_t i = 0; i < n; i++)
    if (ref[i] != 0.0) worst = fmax(worst, fabs((x[i] - ref[i]) / ref[i]));
  KT_CHECK(worst <= 1e-6, "%s n=%lld: max element rel error %.3g", which ? "silu" : "gelu_tanh",
           (long long)n, worst);
  KT_CHECK(kt_guard_ok(x, n), "%s n=%lld: wrote past x", which ? "silu" : "gelu_tanh",
           (long long)n);
  printf("%s n=%lld: rel L2 %.2e\n", which ? "silu" : "gelu_tanh", (long long)n, err);
  free(x), free(ref);
}

int main(void) {
  kt_seed("test_elementwise");
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
  return kt_finish("test_elementwise");
}
