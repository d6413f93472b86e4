/* ComfyUI latent files (see latent_file.h): a small safetensors writer for
 * the one layout ComfyUI's SaveLatent produces, and a reader on top of the
 * hostile-input safetensors parser (ranks/import/safetensors.h). */
#include "latent_file.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "log.h"
#include "path_check.h"
#include "safetensors.h"
#include "wan_vae.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this code copies float32 values as they lie in memory"
#endif

#define LATENT_TENSOR "latent_tensor"
#define LATENT_MARKER "latent_format_version_0"
#define LATENT_EXT ".latent"
#define LATENT_NUMEL_MAX (INT64_C(1) << 40)

int rank_latent_path_is(const char *path) {
  size_t n = strlen(path), e = strlen(LATENT_EXT);
  return n > e && strcmp(path + n - e, LATENT_EXT) == 0;
}

/* {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]} */
static json_object *tensor_entry(const int64_t *shape, int ndim, int64_t begin, int64_t end) {
  json_object *t = json_object_new_object(), *s = json_object_new_array(),
              *o = json_object_new_array();
  for (int i = 0; i < ndim; i++) json_object_array_add(s, json_object_new_int64(shape[i]));
  json_object_array_add(o, json_object_new_int64(begin));
  json_object_array_add(o, json_object_new_int64(end));
  json_object_object_add(t, "dtype", json_object_new_string("F32"));
  json_object_object_add(t, "shape", s);
  json_object_object_add(t, "data_offsets", o);
  return t;
}

/* The header: metadata, the empty marker, then the latent (ComfyUI's
 * writer orders tensors by name, which puts the marker first as well). */
static json_object *header_json(const int64_t dims[4], int64_t data_bytes,
                                const rank_latent_meta *meta, int nmeta) {
  json_object *root = json_object_new_object();
  if (nmeta > 0) {
    json_object *m = json_object_new_object();
    for (int i = 0; i < nmeta; i++)
      json_object_object_add(m, meta[i].key, json_object_new_string(meta[i].value));
    json_object_object_add(root, "__metadata__", m);
  }
  const int64_t empty[1] = {0};
  const int64_t shape[5] = {1, dims[0], dims[1], dims[2], dims[3]};
  json_object_object_add(root, LATENT_MARKER, tensor_entry(empty, 1, 0, 0));
  json_object_object_add(root, LATENT_TENSOR, tensor_entry(shape, 5, 0, data_bytes));
  return root;
}

int rank_latent_write(const char *path, const int64_t dims[4], const float *z,
                      const rank_latent_meta *meta, int nmeta) {
  if (dims[0] != WAN_VAE_Z_DIM) {
    sp_log_error("%s: a latent of %lld channels cannot be written as a Wan latent file (%d "
                 "channels)",
                 path, (long long)dims[0], WAN_VAE_Z_DIM);
    return SP_ERR_INPUT;
  }
  const int64_t plane = dims[1] * dims[2] * dims[3];
  const int64_t data_bytes = dims[0] * plane * (int64_t)sizeof(float);
  json_object *root = header_json(dims, data_bytes, meta, nmeta);
  const char *text =
      json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
  /* The header is padded with spaces so the data starts 8-byte aligned. */
  const size_t hlen = strlen(text), padded = (hlen + 7) & ~(size_t)7;
  unsigned char len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)padded >> (8 * i));

  char tmp[4096];
  int rc = rank_atomic_begin(path, tmp, sizeof tmp);
  if (rc != SP_OK) {
    json_object_put(root);
    return rc;
  }
  FILE *f = fopen(tmp, "wb");
  float *buf = sp_xmalloc((size_t)plane * sizeof(float));
  int ok = f && fwrite(len8, 1, 8, f) == 8 && fwrite(text, 1, hlen, f) == hlen;
  for (size_t i = hlen; ok && i < padded; i++) ok = fputc(' ', f) != EOF;
  /* x = z / (1 / std) + mean: the decoder's un-normalisation, VAE.md step 1. */
  for (int64_t c = 0; ok && c < dims[0]; c++) {
    const float inv_std = 1.0f / wan_vae_latent_std[c], mean = wan_vae_latent_mean[c];
    const float *src = z + c * plane;
    for (int64_t p = 0; p < plane; p++) buf[p] = src[p] / inv_std + mean;
    ok = fwrite(buf, sizeof(float), (size_t)plane, f) == (size_t)plane;
  }
  free(buf);
  json_object_put(root);
  if (f && fclose(f) != 0) ok = 0;
  if (!ok) {
    sp_log_error("%s: writing the latent file failed (disk full?)", path);
    rank_atomic_abort(tmp);
    return SP_ERR_RUNTIME;
  }
  return rank_atomic_commit(tmp, path);
}

static const rank_st_tensor *find_tensor(const rank_st_file *f, const char *name) {
  for (int i = 0; i < f->h.count; i++)
    if (strcmp(f->h.t[i].name, name) == 0) return &f->h.t[i];
  return NULL;
}

/* The checks of the latent tensor's entry; one logged line on failure. */
static int check_entry(const char *path, const rank_st_file *f, const rank_st_tensor **out) {
  const rank_st_tensor *t = find_tensor(f, LATENT_TENSOR);
  if (!t) {
    sp_log_error("%s: no tensor '" LATENT_TENSOR "': not a ComfyUI latent file", path);
    return SP_ERR_INPUT;
  }
  if (!find_tensor(f, LATENT_MARKER)) {
    sp_log_error("%s: no '" LATENT_MARKER "' marker: an old-format latent file (values scaled "
                 "by 0.18215 for Stable Diffusion), not a Wan latent",
                 path);
    return SP_ERR_INPUT;
  }
  if (t->dtype != RANK_ST_F32) {
    sp_log_error("%s: '" LATENT_TENSOR "' is %s; float32 (F32) is read", path,
                 rank_st_dtype_name(t->dtype));
    return SP_ERR_INPUT;
  }
  char shape[256] = "";
  for (int i = 0, w = 0; i < t->ndim && w < (int)sizeof shape - 24; i++)
    w += snprintf(shape + w, sizeof shape - (size_t)w, "%s%lld", i ? ", " : "",
                  (long long)t->shape[i]);
  if (t->ndim != 5 || t->shape[0] != 1 || t->shape[1] != WAN_VAE_Z_DIM) {
    sp_log_error("%s: '" LATENT_TENSOR "' is [%s]; a Wan latent is [1, %d, F, H, W]", path, shape,
                 WAN_VAE_Z_DIM);
    return SP_ERR_INPUT;
  }
  if (t->numel == 0 || t->numel > (uint64_t)LATENT_NUMEL_MAX) {
    sp_log_error("%s: '" LATENT_TENSOR "' is [%s]: empty or too large", path, shape);
    return SP_ERR_INPUT;
  }
  *out = t;
  return SP_OK;
}

int rank_latent_read(const char *path, rank_tensor *out) {
  memset(out, 0, sizeof *out);
  if (rank_path_check_input(NULL, path, RANK_PATH_FILE) != SP_OK) return SP_ERR_INPUT;
  rank_st_file *f = NULL;
  int rc = rank_st_open(path, &f);
  if (rc != SP_OK) return rc;
  const rank_st_tensor *t = NULL;
  float *data = NULL;
  if ((rc = check_entry(path, f, &t)) != SP_OK) goto done;
  data = malloc((size_t)t->numel * sizeof(float));
  if (!data) {
    sp_log_error("%s: out of host memory for %llu floats", path, (unsigned long long)t->numel);
    rc = SP_ERR_RUNTIME;
    goto done;
  }
  if ((rc = rank_st_read(f, t, 0, data, (size_t)t->numel * sizeof(float))) != SP_OK) goto done;
  /* z = (x - mean) * (1 / std): the inverse of the write above. */
  const int64_t plane = t->shape[2] * t->shape[3] * t->shape[4];
  for (int64_t c = 0; c < WAN_VAE_Z_DIM; c++) {
    const float inv_std = 1.0f / wan_vae_latent_std[c], mean = wan_vae_latent_mean[c];
    float *x = data + c * plane;
    for (int64_t p = 0; p < plane; p++) {
      if (!isfinite(x[p])) {
        sp_log_error("%s: '" LATENT_TENSOR "' holds a non-finite value (NaN or Inf) at element "
                     "%lld",
                     path, (long long)(c * plane + p));
        rc = SP_ERR_INPUT;
        goto done;
      }
      x[p] = (x[p] - mean) * inv_std;
    }
  }
  out->ndim = 4;
  out->dims[0] = WAN_VAE_Z_DIM;
  for (int i = 1; i < 4; i++) out->dims[i] = t->shape[i + 1];
  out->numel = (int64_t)t->numel;
  out->data = data;
  data = NULL;
done:
  free(data);
  rank_st_close(f);
  return rc;
}
