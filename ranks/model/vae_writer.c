/* The VAE file's writer (see vae_file.h): a temporary file beside the final
 * path, the container's root attributes and the config, one dataset per
 * table tensor under /decoder, the model checksum at commit, the rename. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "container_io.h"
#include "h5_util.h"
#include "log.h"
#include "model_container.h"
#include "vae_file_impl.h"

struct vae_model_writer {
  rank_h5_out out;
  kern_dtype dtype;
  wan_vae_weights w; /* structure only: the table's slots point here */
  wan_vae_table table;
  uint32_t crc[WAN_VAE_MAX_TENSORS];
  uint8_t done[WAN_VAE_MAX_TENSORS];
  uint16_t *bf;  /* bf16 staging of the largest tensor */
};

int vae_model_writer_open(const char *path, const wan_vae_config *c, kern_dtype dtype,
                          const char *preset, vae_model_writer **out) {
  char err[256];
  if (wan_vae_config_check(c, err, sizeof err) != 0) {
    sp_log_error("%s: %s", path, err);
    return SP_ERR_INPUT;
  }
  vae_model_writer *w = sp_xcalloc(1, sizeof *w);
  w->dtype = dtype;
  wan_vae_table_make(c, &w->w, &w->table);
  if (dtype == KERN_DTYPE_BF16) {
    int64_t most = 0;
    for (int i = 0; i < w->table.count; i++)
      if (w->table.t[i].numel > most) most = w->table.t[i].numel;
    w->bf = sp_xmalloc((size_t)most * sizeof *w->bf);
  }
  int rc = rank_container_out_open(&w->out, path, VAE_MODEL_ARCH, preset, dtype);
  if (rc == SP_OK && (vae_file_config_write(w->out.file, c) != 0 ||
                      rank_h5_group_create(w->out.file, "/" VAE_FILE_GROUP) != 0))
    rc = rank_container_out_fail(&w->out, "cannot write the root attributes and groups");
  if (rc != SP_OK) {
    vae_model_writer_abort(w);
    return rc;
  }
  *out = w;
  return SP_OK;
}

int vae_model_writer_attr(vae_model_writer *w, const char *key, const char *value) {
  return rank_container_out_meta(&w->out, key, value);
}

int vae_model_writer_put(vae_model_writer *w, const char *name, const float *data,
                         int64_t numel) {
  int i = wan_vae_table_find(&w->table, name);
  char ds[128];
  vae_file_dataset_path(name, ds, sizeof ds);
  if (i < 0) {
    sp_log_error("%s: %s is not a tensor of this VAE decoder", w->out.path, name);
    return SP_ERR_INPUT;
  }
  const wan_vae_tensor *t = &w->table.t[i];
  if (numel != t->numel) {
    sp_log_error("%s: %s: %lld values given, the table needs %lld", w->out.path, ds,
                 (long long)numel, (long long)t->numel);
    return SP_ERR_INPUT;
  }
  if (w->done[i]) {
    sp_log_error("%s: %s written twice", w->out.path, ds);
    return SP_ERR_INPUT;
  }
  const void *stored = data;
  if (w->dtype == KERN_DTYPE_BF16) {
    kern_f32_to_bf16_n(data, w->bf, (size_t)numel);
    stored = w->bf;
  }
  int rc = rank_container_out_dataset(&w->out, ds, w->dtype, t->ndim, t->shape, stored,
                                      (size_t)numel * kern_dtype_size(w->dtype), &w->crc[i]);
  if (rc == SP_OK) w->done[i] = 1;
  return rc;
}

int vae_model_writer_commit(vae_model_writer *w) {
  int rc = SP_OK;
  uint32_t acc = 0;
  for (int i = 0; i < w->table.count && rc == SP_OK; i++) {
    if (!w->done[i]) {
      sp_log_error("%s: /%s/%s was never written", w->out.path, VAE_FILE_GROUP,
                   w->table.t[i].name);
      rc = SP_ERR_INPUT;
    }
    acc = rank_container_checksum_add(acc, w->crc[i]);
  }
  if (rc == SP_OK) rc = rank_container_out_commit(&w->out, acc);
  vae_model_writer_abort(w);
  return rc;
}

void vae_model_writer_abort(vae_model_writer *w) {
  if (!w) return;
  rank_h5_out_abort(&w->out);
  free(w->bf);
  free(w);
}
