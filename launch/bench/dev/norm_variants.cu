/* The row kernels' benchmark variants (norm_variants.h): the kernels of
 * kernels/cuda/row_kernels.cuh with a forced choice. Timings on the H200
 * are in launch/bench/RESULTS.md ("Row kernels"). */
#include "norm_variants.h"

#include <string.h>

#include "cuda_check.h"
#include "row_kernels.cuh"

/* A parsed variant: production (neither set), the scalar kernels, or the
 * vector kernels with nv chunks a thread. */
typedef struct norm_variant {
  int production, scalar, nv;
} norm_variant;

static int norm_variant_parse(const char *name, norm_variant *out) {
  memset(out, 0, sizeof *out);
  if (!name || strcmp(name, "default") == 0) {
    out->production = 1;
    return 1;
  }
  if (strcmp(name, "scalar") == 0) {
    out->scalar = 1;
    return 1;
  }
  if (strncmp(name, "vec:", 4) != 0 || name[4] < '1' || name[4] > '8' || name[5] != 0 ||
      name[4] == '6' || name[4] == '7')
    return 0;
  out->nv = name[4] - '0';
  return 1;
}

static norm_variant norm_variant_get(const char *op, const char *name) {
  norm_variant v;
  if (!norm_variant_parse(name, &v))
    sp_fatal("%s: kernel variant '%s' is not default, scalar or vec:N (N 1-5 or 8)", op, name);
  return v;
}

/* The split of the vector kernels for nv chunks a thread: 0 when the row
 * needs more than ROW_MAX_THREADS threads. */
static int row_split_forced(int64_t chunks, int nv, row_split *out) {
  const int64_t t = (chunks + nv - 1) / nv;
  if (t > ROW_MAX_THREADS) return 0;
  out->nv = nv;
  out->threads = (int)((t + 31) / 32 * 32);
  return 1;
}

/* The vector kernel for v when it can take p (returns 1), else 0. */
static int residual_row_forced(const norm_variant *v, const residual_row_params *p,
                               kern_dtype y_dtype, int64_t rows, cudaStream_t stream) {
  row_split s;
  if (v->scalar || p->dim % ROW_VEC != 0 || !row_split_forced(p->dim / ROW_VEC, v->nv, &s) ||
      !residual_row_aligned(p))
    return 0;
  residual_row_run(p, y_dtype, rows, &s, stream);
  return 1;
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
  const norm_variant v = norm_variant_get("layernorm_modulate", variant);
  if (v.production) {
    kern_cuda_layernorm_modulate(x, w, b, shift, scale, y, rows, dim, eps, stream);
    return;
  }
  check_residual("layernorm_modulate", rows, dim);
  check_norm_args("layernorm_modulate", w, b, shift, scale);
  if (rows == 0) return;
  const residual_row_params p = {(float *)x, NULL, NULL, (const __nv_bfloat16 *)w,
                                 (const __nv_bfloat16 *)b, shift, scale, (__nv_bfloat16 *)y,
                                 (int)dim, eps};
  if (!residual_row_forced(&v, &p, KERN_DTYPE_F32, rows, stream))
    layernorm_scalar(&p, rows, stream);
}

extern "C" void dev_norm_gated_add(const char *variant, float *x, const void *y,
                                   kern_dtype y_dtype, const float *gate, int64_t rows,
                                   int64_t dim, cudaStream_t stream) {
  const norm_variant v = norm_variant_get("gated_add", variant);
  if (v.production) {
    kern_cuda_gated_add(x, y, y_dtype, gate, rows, dim, stream);
    return;
  }
  check_residual("gated_add", rows, dim);
  check_dtype("gated_add", "y", y_dtype);
  if (rows == 0) return;
  const residual_row_params p = {x, y, gate, NULL, NULL, NULL, NULL, NULL, (int)dim, 0.0f};
  if (!residual_row_forced(&v, &p, y_dtype, rows, stream))
    gated_add_scalar(x, y, y_dtype, gate, rows, dim, stream);
}

extern "C" void dev_norm_gated_add_layernorm(const char *variant, float *x, const void *y,
                                             kern_dtype y_dtype, const float *gate,
                                             const uint16_t *w, const uint16_t *b,
                                             const float *shift, const float *scale, uint16_t *h,
                                             int64_t rows, int64_t dim, float eps,
                                             cudaStream_t stream) {
  const norm_variant v = norm_variant_get("gated_add_layernorm", variant);
  if (v.production) {
    kern_cuda_gated_add_layernorm(x, y, y_dtype, gate, w, b, shift, scale, h, rows, dim, eps,
                                  stream);
    return;
  }
  check_residual("gated_add_layernorm", rows, dim);
  check_dtype("gated_add_layernorm", "y", y_dtype);
  check_norm_args("gated_add_layernorm", w, b, shift, scale);
  if (!y || !h) sp_fatal("gated_add_layernorm: y and h are required");
  if (rows == 0) return;
  const residual_row_params p = {x, y, gate, (const __nv_bfloat16 *)w, (const __nv_bfloat16 *)b,
                                 shift, scale, (__nv_bfloat16 *)h, (int)dim, eps};
  if (residual_row_forced(&v, &p, y_dtype, rows, stream)) return;
  gated_add_scalar(x, y, y_dtype, gate, rows, dim, stream);
  layernorm_scalar(&p, rows, stream);
}

extern "C" void dev_norm_rmsnorm_rope(const char *variant, const void *x, kern_dtype x_dtype,
                                      const uint16_t *w, const float *cos_t, const float *sin_t,
                                      uint16_t *y, int64_t L, int64_t heads, int64_t hd,
                                      float eps, cudaStream_t stream) {
  const norm_variant v = norm_variant_get("rmsnorm_rope", variant);
  if (v.production) {
    kern_cuda_rmsnorm_rope(x, x_dtype, w, cos_t, sin_t, y, L, heads, hd, eps, stream);
    return;
  }
  check_rmsnorm_rope(x_dtype, w, cos_t, sin_t, L, heads, hd);
  if (L == 0) return;
  const int64_t dim = heads * hd;
  row_split s;
  const int vec = !v.scalar && hd % ROW_VEC == 0 && row_split_forced(dim / ROW_VEC, v.nv, &s) &&
                  aligned16(x) && aligned16(w) && aligned16(cos_t) && aligned16(sin_t) &&
                  aligned16(y);
  rmsnorm_rope_run(x, x_dtype, (const __nv_bfloat16 *)w, cos_t, sin_t, (__nv_bfloat16 *)y, L,
                   dim, hd, eps, vec ? &s : NULL, stream);
}
