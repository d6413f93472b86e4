/* The model file's writer (see model_file.h): a temporary file beside the
 * final path, contiguous datasets with their checksum attributes, the model
 * checksum over them all at commit, then the rename. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "crc32c.h"
#include "h5_util.h"
#include "log.h"
#include "model_file_impl.h"

struct rank_model_writer {
  char path[4096];
  char tmp[4096];
  hid_t file;
  wan_config config;
  kern_dtype dtype;
  wan_layout layout[3];
  uint32_t *crc;   /* per instance and tensor */
  uint8_t *done;   /* written flags, same indexing */
};

static int writer_fail(rank_model_writer *w, const char *what) {
  sp_log_error("%s: cannot write the model file (%s)", w->path, what);
  return SP_ERR_RUNTIME;
}

int rank_model_writer_open(const char *path, const wan_config *c, kern_dtype dtype,
                           const char *preset, rank_model_writer **out) {
  rank_h5_silence();
  char err[256];
  if (wan_config_check(c, err, sizeof err) != 0) {
    sp_log_error("%s: %s", path, err);
    return SP_ERR_INPUT;
  }
  rank_model_writer *w = sp_xcalloc(1, sizeof *w);
  w->file = -1;
  w->config = *c;
  w->dtype = dtype;
  snprintf(w->path, sizeof w->path, "%s", path);
  int rc = rank_atomic_begin(path, w->tmp, sizeof w->tmp);
  if (rc != SP_OK) {
    free(w);
    return rc;
  }
  for (int g = 0; g < 3; g++) wan_layout_make(c, (wan_group)g, dtype, &w->layout[g]);
  size_t slots = (size_t)rank_model_instances(c) * WAN_MAX_TENSORS;
  w->crc = sp_xcalloc(slots, sizeof *w->crc);
  w->done = sp_xcalloc(slots, 1);
  w->file = H5Fcreate(w->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (w->file < 0) {
    rc = writer_fail(w, "cannot create the temporary file");
    goto fail;
  }
  int64_t version = RANK_MODEL_FORMAT_VERSION;
  int ok = rank_h5_attr_write_str(w->file, "format", RANK_MODEL_FORMAT) == 0 &&
           rank_h5_attr_write_num(w->file, "format_version", H5T_STD_I64LE, H5T_NATIVE_INT64, &version,
                          1) == 0 &&
           rank_h5_attr_write_str(w->file, "arch", WAN_ARCH) == 0 &&
           rank_h5_attr_write_str(w->file, "preset", preset ? preset : "") == 0 &&
           rank_h5_attr_write_str(w->file, "dtype", kern_dtype_name(dtype)) == 0;
  struct {
    const char *name;
    const int64_t *v;
    hsize_t n;
  } ints[] = {{"dim", &c->dim, 1},           {"ffn_dim", &c->ffn_dim, 1},
              {"heads", &c->heads, 1},       {"layers", &c->layers, 1},
              {"in_dim", &c->in_dim, 1},     {"out_dim", &c->out_dim, 1},
              {"patch", c->patch, 3},        {"text_len", &c->text_len, 1},
              {"text_dim", &c->text_dim, 1}, {"freq_dim", &c->freq_dim, 1}};
  for (size_t i = 0; ok && i < sizeof ints / sizeof ints[0]; i++)
    ok = rank_h5_attr_write_num(w->file, ints[i].name, H5T_STD_I64LE, H5T_NATIVE_INT64, ints[i].v,
                        ints[i].n) == 0;
  ok = ok && rank_h5_attr_write_num(w->file, "eps", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &c->eps, 1) == 0;
  hid_t g;
  const char *groups[] = {"/embed", "/blocks", "/head"};
  for (int i = 0; ok && i < 3; i++) {
    ok = (g = H5Gcreate2(w->file, groups[i], H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) >= 0;
    if (ok) H5Gclose(g);
  }
  for (int b = 0; ok && b < (int)c->layers; b++) {
    char name[64];
    snprintf(name, sizeof name, "/blocks/%04d", b);
    ok = (g = H5Gcreate2(w->file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) >= 0;
    if (ok) H5Gclose(g);
  }
  if (!ok) {
    rc = writer_fail(w, "cannot write the root attributes and groups");
    goto fail;
  }
  *out = w;
  return SP_OK;
fail:
  rank_model_writer_abort(w);
  return rc;
}

int rank_model_writer_attr(rank_model_writer *w, const char *key, const char *value) {
  char name[300];
  /* Foreign metadata is namespaced so it can never shadow our attributes. */
  snprintf(name, sizeof name, "meta.%s", key);
  if (H5Aexists(w->file, name) > 0) return SP_OK;
  if (rank_h5_attr_write_str(w->file, name, value) != 0) return writer_fail(w, "metadata attribute");
  return SP_OK;
}

int rank_model_writer_put(rank_model_writer *w, wan_group g, int block, const char *name,
                          const void *data, size_t bytes) {
  const wan_layout *l = &w->layout[g];
  int i = wan_layout_find(l, name);
  char path[256];
  rank_model_dataset_path(g, block, name, path, sizeof path);
  if (i < 0 || (g == WAN_GROUP_BLOCK && (block < 0 || block >= w->config.layers))) {
    sp_log_error("%s: %s is not a tensor of this model", w->path, path);
    return SP_ERR_INPUT;
  }
  const wan_tensor *t = &l->t[i];
  if (bytes != t->bytes) {
    sp_log_error("%s: %s: %zu bytes given, the table needs %zu", w->path, path, bytes, t->bytes);
    return SP_ERR_INPUT;
  }
  size_t slot = (size_t)rank_model_instance(&w->config, g, block) * WAN_MAX_TENSORS + (size_t)i;
  if (w->done[slot]) {
    sp_log_error("%s: %s written twice", w->path, path);
    return SP_ERR_INPUT;
  }
  hsize_t dims[5];
  for (int k = 0; k < t->ndim; k++) dims[k] = (hsize_t)t->shape[k];
  int bf16 = w->dtype == KERN_DTYPE_BF16;
  hid_t ftype = bf16 ? H5T_STD_U16LE : H5T_IEEE_F32LE;
  hid_t mtype = bf16 ? H5T_NATIVE_UINT16 : H5T_NATIVE_FLOAT;
  hid_t s = -1, dcpl = -1, d = -1;
  int ok = (s = H5Screate_simple(t->ndim, dims, NULL)) >= 0 &&
           (dcpl = H5Pcreate(H5P_DATASET_CREATE)) >= 0 &&
           H5Pset_layout(dcpl, H5D_CONTIGUOUS) >= 0 &&
           H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) >= 0 &&
           (d = H5Dcreate2(w->file, path, ftype, s, H5P_DEFAULT, dcpl, H5P_DEFAULT)) >= 0 &&
           H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0;
  uint32_t crc = crc32c(0, data, bytes);
  ok = ok && rank_h5_attr_write_str(d, "dtype", kern_dtype_name(w->dtype)) == 0 &&
       rank_h5_attr_write_num(d, "checksum", H5T_STD_U32LE, H5T_NATIVE_UINT32, &crc, 1) == 0;
  if (d >= 0) H5Dclose(d);
  if (dcpl >= 0) H5Pclose(dcpl);
  if (s >= 0) H5Sclose(s);
  if (!ok) {
    sp_log_error("%s: %s: HDF5 write failed (disk full?)", w->path, path);
    return SP_ERR_RUNTIME;
  }
  w->crc[slot] = crc;
  w->done[slot] = 1;
  return SP_OK;
}

int rank_model_writer_commit(rank_model_writer *w) {
  const wan_config *c = &w->config;
  int rc = SP_OK;
  uint32_t model_crc = 0;
  for (int g = 0; g < 3 && rc == SP_OK; g++) {
    int nb = g == WAN_GROUP_BLOCK ? (int)c->layers : 1;
    for (int b = 0; b < nb && rc == SP_OK; b++) {
      const wan_layout *l = &w->layout[g];
      for (int i = 0; i < l->count; i++) {
        size_t slot = (size_t)rank_model_instance(c, (wan_group)g, b) * WAN_MAX_TENSORS + (size_t)i;
        if (!w->done[slot]) {
          char path[256];
          rank_model_dataset_path((wan_group)g, b, l->t[i].name, path, sizeof path);
          sp_log_error("%s: %s was never written", w->path, path);
          rc = SP_ERR_INPUT;
          break;
        }
        uint8_t le[4] = {(uint8_t)w->crc[slot], (uint8_t)(w->crc[slot] >> 8),
                         (uint8_t)(w->crc[slot] >> 16), (uint8_t)(w->crc[slot] >> 24)};
        model_crc = crc32c(model_crc, le, 4);
      }
    }
  }
  if (rc == SP_OK) {
    char sum[32];
    snprintf(sum, sizeof sum, "crc32c:%08x", model_crc);
    if (rank_h5_attr_write_str(w->file, "checksum", sum) != 0) rc = writer_fail(w, "checksum attribute");
  }
  if (rc == SP_OK) {
    herr_t e = H5Fclose(w->file);
    w->file = -1;
    if (e < 0) rc = writer_fail(w, "closing the file failed (disk full?)");
  }
  if (rc == SP_OK) {
    rc = rank_atomic_commit(w->tmp, w->path);
    w->tmp[0] = '\0';
  }
  rank_model_writer_abort(w);
  return rc;
}

void rank_model_writer_abort(rank_model_writer *w) {
  if (!w) return;
  if (w->file >= 0) H5Fclose(w->file);
  if (w->tmp[0]) rank_atomic_abort(w->tmp);
  free(w->crc);
  free(w->done);
  free(w);
}

