/* The VAE file's writer (see vae_file.h): a temporary file beside the final
 * path, the container's root attributes and the config, one dataset per
 * table tensor under /decoder, the model checksum at commit, the rename. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "h5_util.h"
#include "log.h"
#include "model_container.h"
#include "vae_file_impl.h"

struct vae_model_writer {
  char path[4096];
  char tmp[4096];
  hid_t file;
  kern_dtype dtype;
  wan_vae_weights w; /* structure only: the table's slots point here */
  wan_vae_table table;
  uint32_t crc[WAN_VAE_MAX_TENSORS];
  uint8_t done[WAN_VAE_MAX_TENSORS];
  uint16_t *bf;  /* bf16 staging of the largest tensor */
};

static int writer_fail(vae_model_writer *w, const char *what) {
  sp_log_error("%s: cannot write the model file (%s)", w->path, what);
  return SP_ERR_RUNTIME;
}

int vae_model_writer_open(const char *path, const wan_vae_config *c, kern_dtype dtype,
                          const char *preset, vae_model_writer **out) {
  rank_h5_silence();
  char err[256];
  if (wan_vae_config_check(c, err, sizeof err) != 0) {
    sp_log_error("%s: %s", path, err);
    return SP_ERR_INPUT;
  }
  vae_model_writer *w = sp_xcalloc(1, sizeof *w);
  w->file = -1;
  w->dtype = dtype;
  snprintf(w->path, sizeof w->path, "%s", path);
  int rc = rank_atomic_begin(path, w->tmp, sizeof w->tmp);
  if (rc != SP_OK) {
    free(w);
    return rc;
  }
  wan_vae_table_make(c, &w->w, &w->table);
  if (dtype == KERN_DTYPE_BF16) {
    int64_t most = 0;
    for (int i = 0; i < w->table.count; i++)
      if (w->table.t[i].numel > most) most = w->table.t[i].numel;
    w->bf = sp_xmalloc((size_t)most * sizeof *w->bf);
  }
  w->file = H5Fcreate(w->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (w->file < 0) {
    rc = writer_fail(w, "cannot create the temporary file");
    goto fail;
  }
  hid_t g = -1;
  int ok = rank_container_write_root(w->file, VAE_MODEL_ARCH, preset, dtype) == 0 &&
           vae_file_config_write(w->file, c) == 0 &&
           (g = H5Gcreate2(w->file, "/" VAE_FILE_GROUP, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) >= 0;
  if (g >= 0) H5Gclose(g);
  if (!ok) {
    rc = writer_fail(w, "cannot write the root attributes and groups");
    goto fail;
  }
  *out = w;
  return SP_OK;
fail:
  vae_model_writer_abort(w);
  return rc;
}

int vae_model_writer_attr(vae_model_writer *w, const char *key, const char *value) {
  if (rank_container_write_meta(w->file, key, value) != 0) return writer_fail(w, "metadata attribute");
  return SP_OK;
}

int vae_model_writer_put(vae_model_writer *w, const char *name, const float *data,
                         int64_t numel) {
  int i = wan_vae_table_find(&w->table, name);
  char ds[128];
  vae_file_dataset_path(name, ds, sizeof ds);
  if (i < 0) {
    sp_log_error("%s: %s is not a tensor of this VAE decoder", w->path, name);
    return SP_ERR_INPUT;
  }
  const wan_vae_tensor *t = &w->table.t[i];
  if (numel != t->numel) {
    sp_log_error("%s: %s: %lld values given, the table needs %lld", w->path, ds, (long long)numel,
                 (long long)t->numel);
    return SP_ERR_INPUT;
  }
  if (w->done[i]) {
    sp_log_error("%s: %s written twice", w->path, ds);
    return SP_ERR_INPUT;
  }
  const void *stored = data;
  if (w->dtype == KERN_DTYPE_BF16) {
    kern_f32_to_bf16_n(data, w->bf, (size_t)numel);
    stored = w->bf;
  }
  if (rank_container_write_dataset(w->file, ds, w->dtype, t->ndim, t->shape, stored,
                                   (size_t)numel * kern_dtype_size(w->dtype), &w->crc[i]) != 0) {
    sp_log_error("%s: %s: HDF5 write failed (disk full?)", w->path, ds);
    return SP_ERR_RUNTIME;
  }
  w->done[i] = 1;
  return SP_OK;
}

int vae_model_writer_commit(vae_model_writer *w) {
  int rc = SP_OK;
  uint32_t acc = 0;
  for (int i = 0; i < w->table.count && rc == SP_OK; i++) {
    if (!w->done[i]) {
      sp_log_error("%s: /%s/%s was never written", w->path, VAE_FILE_GROUP, w->table.t[i].name);
      rc = SP_ERR_INPUT;
    }
    acc = rank_container_checksum_add(acc, w->crc[i]);
  }
  if (rc == SP_OK) {
    rc = rank_container_commit(&w->file, w->tmp, w->path, acc);
    w->tmp[0] = '\0';
  }
  vae_model_writer_abort(w);
  return rc;
}

void vae_model_writer_abort(vae_model_writer *w) {
  if (!w) return;
  if (w->file >= 0) H5Fclose(w->file);
  if (w->tmp[0]) rank_atomic_abort(w->tmp);
  free(w->bf);
  free(w);
}
