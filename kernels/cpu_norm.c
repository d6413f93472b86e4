/* CPU LayerNorm and RMSNorm over the last dim.
 *
 * Rows are independent, so threads split rows. The row statistics are
 * accumulated in double in increasing index order: the outputs stay fp32,
 * but the mean/variance of a 5120-wide row then carry no fp32 summation
 * error, which keeps the reference close to a float64 model. The variance
 * is the two-pass form (mean first, then the mean of squared deviations),
 * which does not cancel catastrophically for rows with a large mean. */
#include "kern_cpu.h"

#include <math.h>

/* Rows below which a parallel region costs more than it saves. */
#define NORM_PAR_MIN_ELEMS ((int64_t)1 << 15)

/* The reciprocal root of a row's mean square, 1 / sqrt(ss / dim + eps),
 * in double: centred (LayerNorm), the squares are of the deviations from
 * the row's mean (two passes, the mean into *mean); else (RMSNorm) of the
 * values themselves (*mean untouched). Sums in increasing index order. */
static inline double row_rstd(const float *xr, int64_t dim, float eps, int centred,
                              double *mean) {
  double ss = 0.0;
  if (centred) {
    double sum = 0.0;
    for (int64_t i = 0; i < dim; i++) sum += (double)xr[i];
    const double m = sum / (double)dim;
    for (int64_t i = 0; i < dim; i++) {
      double d = (double)xr[i] - m;
      ss += d * d;
    }
    *mean = m;
  } else {
    for (int64_t i = 0; i < dim; i++) ss += (double)xr[i] * (double)xr[i];
  }
  return 1.0 / sqrt(ss / (double)dim + (double)eps);
}

void kern_cpu_layernorm(const float *x, const float *w, const float *b, float *y, int64_t rows,
                        int64_t dim, float eps) {
  if (rows <= 0 || dim <= 0) return;
#pragma omp parallel for schedule(static) if (rows > 1 && rows * dim > NORM_PAR_MIN_ELEMS)
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * dim; /* (dim) */
    float *yr = y + r * dim;       /* (dim), may be xr */
    /* Biased variance, as torch.nn.LayerNorm. */
    double mean;
    const double rstd = row_rstd(xr, dim, eps, 1, &mean);
    if (w) {
      for (int64_t i = 0; i < dim; i++)
        yr[i] = (float)(((double)xr[i] - mean) * rstd) * w[i] + b[i];
    } else {
      for (int64_t i = 0; i < dim; i++) yr[i] = (float)(((double)xr[i] - mean) * rstd);
    }
  }
}

void kern_cpu_rmsnorm(const float *x, const float *w, float *y, int64_t rows, int64_t dim,
                      float eps) {
  if (rows <= 0 || dim <= 0) return;
#pragma omp parallel for schedule(static) if (rows > 1 && rows * dim > NORM_PAR_MIN_ELEMS)
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * dim; /* (dim) */
    float *yr = y + r * dim;       /* (dim), may be xr */
    const double rs = row_rstd(xr, dim, eps, 0, NULL);
    /* The published WanRMSNorm normalises, rounds to the input dtype, then
     * multiplies by the weight: same here (one fp32 rounding each). */
    for (int64_t i = 0; i < dim; i++) yr[i] = (float)((double)xr[i] * rs) * w[i];
  }
}
