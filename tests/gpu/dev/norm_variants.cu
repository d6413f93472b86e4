/* The row kernels' benchmark variants (norm_variants.h): the kernels of
 * kernels/cuda/row_kernels.cuh with a forced choice. Timings on the H200
 * are in launch/bench/RESULTS.md ("Row kernels"). */
#include "norm_variants.h"

#include <string.h>

#include "cuda_check.h"
#include "row_kernels.cuh"

/* A parsed variant: production, or a forced choice of kernels. */
typedef struct norm_variant {
  int production;
  row_choice choice;
} norm_variant;

static int norm_variant_parse(const char *name, norm_variant *out) {
  memset(out, 0, sizeof *out);
  if (!name || strcmp(name, "default") == 0) {
    out->production = 1;
    return 1;
  }
  if (strcmp(name, "scalar") == 0) {
    out->choice.scalar = 1;
    return 1;
  }
  if (strncmp(name, "vec:", 4) != 0 || name[4] < '1' || name[4] > '8' || name[5] != 0 ||
      name[4] == '6' || name[4] == '7')
    return 0;
  out->choice.nv = name[4] - '0';
  return 1;
}

/* The choice of variant `name` for op: NULL for production. */
static const row_choice *norm_choice(const char *op, const char *name, norm_variant *v) {
  if (!norm_variant_parse(name, v))
    sp_fatal("%s: kernel variant '%s' is not default, scalar or vec:N (N 1-5 or 8)", op, name);
  return v->production ? NULL : &v->choice;
}

extern "C" int dev_norm_variant_valid(const char *name) {
  norm_variant v;
  return norm_variant_parse(name, &v);
}

extern "C" void dev_norm_layernorm_modulate(const char *variant, const float *x,
                                            const uint16_t *w, const uint16_t *b,
                                            const float *shift, const float *scale, uint16_t *y,
                                            int64_t rows, int64_t dim, float eps,
                                            cudaStream_t stream) {
  norm_variant v;
  row_layernorm_modulate(norm_choice("layernorm_modulate", variant, &v), x, w, b, shift, scale,
                         y, rows, dim, eps, stream);
}

extern "C" void dev_norm_gated_add(const char *variant, float *x, const void *y,
                                   kern_dtype y_dtype, const float *gate, int64_t rows,
                                   int64_t dim, cudaStream_t stream) {
  norm_variant v;
  row_gated_add(norm_choice("gated_add", variant, &v), x, y, y_dtype, gate, rows, dim, stream);
}

extern "C" void dev_norm_gated_add_layernorm(const char *variant, float *x, const void *y,
                                             kern_dtype y_dtype, const float *gate,
                                             const uint16_t *w, const uint16_t *b,
                                             const float *shift, const float *scale, uint16_t *h,
                                             int64_t rows, int64_t dim, float eps,
                                             cudaStream_t stream) {
  norm_variant v;
  row_gated_add_layernorm(norm_choice("gated_add_layernorm", variant, &v), x, y, y_dtype, gate,
                          w, b, shift, scale, h, rows, dim, eps, stream);
}

extern "C" void dev_norm_rmsnorm_rope(const char *variant, const void *x, kern_dtype x_dtype,
                                      const uint16_t *w, const float *cos_t, const float *sin_t,
                                      uint16_t *y, int64_t L, int64_t heads, int64_t hd,
                                      float eps, cudaStream_t stream) {
  norm_variant v;
  row_rmsnorm_rope(norm_choice("rmsnorm_rope", variant, &v), x, x_dtype, w, cos_t, sin_t, y, L,
                   heads, hd, eps, stream);
}
