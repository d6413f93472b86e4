/* CPU elementwise ops: modulate, gated residual add, GELU-tanh, SiLU.
 *
 * Each output element depends only on its own inputs, so any split over
 * threads gives the same bits. GELU and SiLU are evaluated in double and
 * rounded once to fp32: cheap next to the GEMMs around them, and the
 * transcendental then adds no error of its own beyond the final rounding. */
#include "kern_cpu.h"

#include <math.h>

/* Element counts below which a parallel region costs more than it saves. */
#define EW_PAR_MIN_ELEMS ((int64_t)1 << 16)

void kern_cpu_modulate(const float *x, const float *shift, const float *scale, float *y,
                       int64_t rows, int64_t dim) {
  if (rows <= 0 || dim <= 0) return;
#pragma omp parallel for schedule(static) if (rows * dim > EW_PAR_MIN_ELEMS)
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * dim; /* (dim) */
    float *yr = y + r * dim;       /* (dim), may be xr */
    /* fp32 as published: x * (1 + scale) + shift, (1 + scale) rounded first. */
    for (int64_t i = 0; i < dim; i++) yr[i] = xr[i] * (1.0f + scale[i]) + shift[i];
  }
}

void kern_cpu_gated_add(float *x, const float *y, const float *gate, int64_t rows, int64_t dim) {
  if (rows <= 0 || dim <= 0) return;
#pragma omp parallel for schedule(static) if (rows * dim > EW_PAR_MIN_ELEMS)
  for (int64_t r = 0; r < rows; r++) {
    float *xr = x + r * dim;       /* (dim) */
    const float *yr = y + r * dim; /* (dim) */
    if (gate) {
      for (int64_t i = 0; i < dim; i++) xr[i] += yr[i] * gate[i];
    } else {
      for (int64_t i = 0; i < dim; i++) xr[i] += yr[i];
    }
  }
}

void kern_cpu_gelu_tanh(float *x, int64_t n) {
  /* sqrt(2/pi), written out so it does not depend on M_PI (not C11). */
  const double k0 = 0.7978845608028654, k1 = 0.044715;
#pragma omp parallel for schedule(static) if (n > EW_PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++) {
    double v = (double)x[i];
    x[i] = (float)(0.5 * v * (1.0 + tanh(k0 * (v + k1 * v * v * v))));
  }
}

void kern_cpu_silu(float *x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > EW_PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++) {
    double v = (double)x[i];
    x[i] = (float)(v / (1.0 + exp(-v)));
  }
}
