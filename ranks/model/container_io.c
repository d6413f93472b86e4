/* The container steps every model file reader and writer share (see
 * container_io.h). */
#include "container_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "log.h"

/* ---- reading ------------------------------------------------------------- */

int rank_container_open_id(const char *path, const char *want_arch, model_file_id *id, int *fp8,
                           hid_t *file) {
  hid_t f;
  int rc = rank_container_open(path, &f);
  if (rc != SP_OK) return rc;
  rank_container_root root;
  if ((rc = rank_container_read_root(f, path, want_arch, &root)) != SP_OK) {
    H5Fclose(f);
    return rc;
  }
  snprintf(id->arch, sizeof id->arch, "%s", root.arch);
  snprintf(id->preset, sizeof id->preset, "%s", root.preset);
  snprintf(id->checksum, sizeof id->checksum, "%s", root.checksum);
  id->dtype = root.dtype;
  if (fp8) *fp8 = root.fp8;
  *file = f;
  return SP_OK;
}

int rank_table_reader_start(rank_table_reader *r, model_file_id *id, const char *spec,
                            int verify) {
  r->fd = -1;
  r->verify = verify;
  return model_file_id_start(id, spec);
}

int rank_table_reader_end(rank_table_reader *r, hid_t file, const char *path, const char *stored,
                          uint32_t acc, int rc) {
  if (rc == SP_OK && r->verify) rc = rank_container_checksum_check(path, stored, acc);
  return rank_container_open_end(file, path, rc, &r->fd);
}

int rank_table_reader_read(const rank_table_reader *r, const model_file_id *id, const char *group,
                           int count, const rank_container_f32 *t, const char *const *names,
                           uint16_t *stage) {
  int err_no = 0;
  uint32_t got = 0;
  int bad = rank_container_read_f32(r->fd, id->dtype, count, t, r->verify, stage, &err_no, &got);
  if (bad < 0) return SP_OK;
  char ds[128];
  snprintf(ds, sizeof ds, "/%s/%s", group, names[bad]);
  rank_container_report_read(id->source, ds, t[bad].crc, err_no, got);
  return SP_ERR_INPUT;
}

void rank_table_reader_close(rank_table_reader *r) {
  if (r->fd >= 0) close(r->fd);
  r->fd = -1;
  free(r->offset);
  free(r->crc);
  r->offset = NULL;
  r->crc = NULL;
}

/* ---- writing ------------------------------------------------------------- */

int rank_container_out_fail(const rank_h5_out *o, const char *what) {
  sp_log_error("%s: cannot write the model file (%s)", o->path, what);
  return SP_ERR_RUNTIME;
}

int rank_container_out_open(rank_h5_out *o, const char *path, const char *arch,
                            const char *preset, kern_dtype dtype) {
  int rc = rank_h5_out_open(o, path, "cannot write the model file (cannot create the temporary "
                                     "file)");
  if (rc == SP_OK && rank_container_write_root(o->file, arch, preset, dtype) != 0) {
    rc = rank_container_out_fail(o, "cannot write the root attributes and groups");
    rank_h5_out_abort(o);
  }
  return rc;
}

int rank_container_out_meta(rank_h5_out *o, const char *key, const char *value) {
  if (rank_container_write_meta(o->file, key, value) != 0)
    return rank_container_out_fail(o, "metadata attribute");
  return SP_OK;
}

int rank_container_out_dataset(rank_h5_out *o, const char *ds, kern_dtype dtype, int ndim,
                               const int64_t *shape, const void *data, size_t bytes,
                               uint32_t *crc) {
  if (rank_container_write_dataset(o->file, ds, dtype, ndim, shape, data, bytes, crc) != 0) {
    sp_log_error("%s: %s: HDF5 write failed (disk full?)", o->path, ds);
    return SP_ERR_RUNTIME;
  }
  return SP_OK;
}

int rank_container_out_commit(rank_h5_out *o, uint32_t acc) {
  int rc = rank_container_commit(o, acc);
  if (rc == SP_OK)
    o->tmp[0] = '\0'; /* renamed into place: nothing to remove */
  else
    rank_h5_out_abort(o);
  return rc;
}
