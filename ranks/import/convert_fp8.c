/* fp8 checkpoints as ComfyUI distributes them (see convert_impl.h):
 * "fp8_e4m3fn" weights stored as F8_E4M3, and "fp8_e4m3fn_scaled" ones
 * with a float scale per weight tensor (KEY.scale_weight beside
 * KEY.weight), dequantised at convert time to value x scale, or kept in
 * fp8 with --dtype fp8 (convert.c, copy_fp8). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "convert_impl.h"
#include "log.h"

/* float8 e5m2: the top byte of an IEEE half, so every value is exact. */
float rank_convert_e5m2_to_f32(uint8_t b) { return kern_f16_to_f32((uint16_t)(b << 8)); }

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), k = strlen(tail);
  return n >= k && strcmp(s + n - k, tail) == 0;
}

int rank_convert_fp8_aux(const char *key) {
  /* scale_input is the activation scale of fp8 matmuls: not needed once
   * the weights are dequantised. scaled_fp8 is ComfyUI's marker of the
   * format (its dtype says which fp8). */
  return ends_with(key, ".scale_weight") || ends_with(key, ".scale_input") ||
         strcmp(key, "scaled_fp8") == 0 || ends_with(key, ".scaled_fp8");
}

/* The tensor named key in any of the files, or NULL. */
static const rank_st_tensor *find_key(rank_st_file *const *f, int nf, const char *key,
                                      const rank_st_file **file) {
  for (int s = 0; s < nf; s++)
    for (int i = 0; i < f[s]->h.count; i++)
      if (strcmp(f[s]->h.t[i].name, key) == 0) {
        *file = f[s];
        return &f[s]->h.t[i];
      }
  return NULL;
}

/* A one-element float tensor's value (F32, F16, BF16). */
static int read_scalar(const rank_st_file *f, const rank_st_tensor *t, float *out, problems *p) {
  uint64_t numel = 1;
  for (int d = 0; d < t->ndim; d++) numel *= (uint64_t)t->shape[d];
  if (numel != 1 || (t->dtype != RANK_ST_F32 && t->dtype != RANK_ST_F16 &&
                     t->dtype != RANK_ST_BF16)) {
    rank_convert_problem(p, "%s: tensor '%s': a scale must be one F32, F16 or BF16 value (it "
                            "holds %llu of %s)",
                         f->path, t->name, (unsigned long long)numel,
                         rank_st_dtype_name(t->dtype));
    return -1;
  }
  unsigned char raw[4];
  if (rank_st_read(f, t, 0, raw, rank_st_dtype_size(t->dtype)) != SP_OK) return -1;
  float v;
  uint16_t h;
  if (t->dtype == RANK_ST_F32) {
    memcpy(&v, raw, 4);
  } else {
    memcpy(&h, raw, 2);
    v = t->dtype == RANK_ST_F16 ? kern_f16_to_f32(h) : kern_bf16_to_f32(h);
  }
  if (!isfinite(v)) {
    rank_convert_problem(p, "%s: tensor '%s': the scale is %s", f->path, t->name,
                         isnan(v) ? "NaN" : "infinite");
    return -1;
  }
  *out = v;
  return 0;
}

int rank_convert_fp8_scale(rank_st_file *const *f, int nf, const rank_st_file *wf,
                           const rank_st_tensor *w, float *scale, problems *p) {
  *scale = 1.0f;
  const char *name = w->name;
  if (!ends_with(name, ".weight")) {
    if (w->dtype == RANK_ST_F8_E4M3)
      rank_convert_problem(p, "%s: tensor '%s': fp8 only for weights (KEY.weight)", wf->path,
                           name);
    return w->dtype == RANK_ST_F8_E4M3 ? -1 : 0;
  }
  char key[RANK_ST_MAX_NAME + 32];
  snprintf(key, sizeof key, "%.*s.scale_weight", (int)(strlen(name) - 7), name);
  const rank_st_file *sf = NULL;
  const rank_st_tensor *st = find_key(f, nf, key, &sf);
  if (!st) return 0; /* plain fp8_e4m3fn, or not fp8 at all */
  if (w->dtype != RANK_ST_F8_E4M3) {
    rank_convert_problem(p, "%s: tensor '%s' has a scale '%s' but is %s, not F8_E4M3", wf->path,
                         name, key, rank_st_dtype_name(w->dtype));
    return -1;
  }
  return read_scalar(sf, st, scale, p);
}

void rank_convert_fp8_check_scales(rank_st_file *const *f, int nf, problems *p) {
  for (int s = 0; s < nf; s++)
    for (int i = 0; i < f[s]->h.count; i++) {
      const char *name = f[s]->h.t[i].name;
      if (!ends_with(name, ".scale_weight")) continue;
      char key[RANK_ST_MAX_NAME + 32];
      snprintf(key, sizeof key, "%.*s.weight", (int)(strlen(name) - 13), name);
      const rank_st_file *wf = NULL;
      if (!find_key(f, nf, key, &wf))
        rank_convert_problem(p, "%s: tensor '%s': a scale without its weight '%s'", f[s]->path,
                             name, key);
    }
}
