/* Variants of the residual stream's row kernels, for benchmarks and their
 * checks (tests/gpu/test_ops: the op table's rows with a kernel name, and
 * --bench), kept apart from the production kernels as llm.c keeps
 * dev/cuda/. Production (kernels/cuda/cuda_norm.cu) runs the vector kernels
 * with the split it picks from the row width, and the scalar kernels only
 * for rows the vector kernels cannot take. A variant here forces a choice:
 *   NULL or "default"  the production call itself (kern_cuda.h);
 *   "scalar"           the scalar kernels (the first version) at any width;
 *   "vec:N"            the vector kernels with N chunks of 8 elements a
 *                      thread (N = 1, 2, 3, 4, 5, 8); a row that split
 *                      cannot take (over 512 threads, a width not a
 *                      multiple of 8, a pointer not 16-byte aligned) runs
 *                      the scalar kernels.
 * Any other name is fatal. The arguments and their checks are those of the
 * kern_cuda.h function of the same name. */
#ifndef DEV_NORM_VARIANTS_H
#define DEV_NORM_VARIANTS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "kern_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when name is a variant this file knows (NULL included), else 0. */
int dev_norm_variant_valid(const char *name);

void dev_norm_layernorm_modulate(const char *variant, const float *x, const uint16_t *w,
                                 const uint16_t *b, const float *shift, const float *scale,
                                 uint16_t *y, int64_t rows, int64_t dim, float eps,
                                 cudaStream_t stream);
void dev_norm_gated_add(const char *variant, float *x, const void *y, kern_dtype y_dtype,
                        const float *gate, int64_t rows, int64_t dim, cudaStream_t stream);
void dev_norm_gated_add_layernorm(const char *variant, float *x, const void *y,
                                  kern_dtype y_dtype, const float *gate, const uint16_t *w,
                                  const uint16_t *b, const float *shift, const float *scale,
                                  uint16_t *h, int64_t rows, int64_t dim, float eps,
                                  cudaStream_t stream);
void dev_norm_rmsnorm_rope(const char *variant, const void *x, kern_dtype x_dtype,
                           const uint16_t *w, const float *cos_t, const float *sin_t, uint16_t *y,
                           int64_t L, int64_t heads, int64_t hd, float eps, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
