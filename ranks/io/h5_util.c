/* Small HDF5 helpers (see h5_util.h). */
#define _GNU_SOURCE /* memfd_create */
#include "h5_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "atomic_file.h"
#include "log.h"

void rank_h5_silence(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

/* The end of an attribute access: closes what it opened (the identifiers
 * >= 0 of the attribute, its space, its type and a memory type) and
 * returns rc. */
static int attr_done(int rc, hid_t attr, hid_t space, hid_t type, hid_t mtype) {
  if (mtype >= 0) H5Tclose(mtype);
  if (type >= 0) H5Tclose(type);
  if (space >= 0) H5Sclose(space);
  if (attr >= 0) H5Aclose(attr);
  return rc;
}

int rank_h5_attr_read_str(hid_t loc, const char *name, char *out, size_t n) {
  int rc = -1;
  hid_t a = -1, t = -1, mt = -1;
  if (H5Aexists(loc, name) <= 0) return -1;
  if ((a = H5Aopen(loc, name, H5P_DEFAULT)) < 0) goto done;
  if ((t = H5Aget_type(a)) < 0 || H5Tget_class(t) != H5T_STRING) goto done;
  if (H5Tis_variable_str(t) > 0) {
    char *v = NULL;
    if ((mt = H5Tcopy(H5T_C_S1)) < 0 || H5Tset_size(mt, H5T_VARIABLE) < 0) goto done;
    if (H5Aread(a, mt, &v) < 0 || !v) goto done;
    snprintf(out, n, "%s", v);
    H5free_memory(v);
  } else {
    size_t sz = H5Tget_size(t);
    if (sz == 0 || sz > 65536) goto done;
    /* One byte more than stored, null-terminated: reads null-padded and
     * null-terminated strings of any writer (h5py writes them unterminated). */
    char *buf = sp_xcalloc(sz + 1, 1);
    if ((mt = H5Tcopy(H5T_C_S1)) < 0 || H5Tset_size(mt, sz + 1) < 0 ||
        H5Aread(a, mt, buf) < 0) {
      free(buf);
      goto done;
    }
    snprintf(out, n, "%s", buf);
    free(buf);
  }
  rc = 0;
done:
  return attr_done(rc, a, -1, t, mt);
}

/* Reads a scalar or 1-D numeric attribute of exactly count elements. */
int rank_h5_attr_read_num(hid_t loc, const char *name, hid_t memtype, void *out, hssize_t count) {
  int rc = -1;
  hid_t a = -1, s = -1, t = -1;
  if (H5Aexists(loc, name) <= 0) return -1;
  if ((a = H5Aopen(loc, name, H5P_DEFAULT)) < 0) goto done;
  if ((t = H5Aget_type(a)) < 0) goto done;
  H5T_class_t cls = H5Tget_class(t);
  if (cls != H5T_INTEGER && cls != H5T_FLOAT) goto done;
  if ((s = H5Aget_space(a)) < 0 || H5Sget_simple_extent_npoints(s) != count) goto done;
  if (H5Aread(a, memtype, out) < 0) goto done;
  rc = 0;
done:
  return attr_done(rc, a, s, t, -1);
}

int rank_h5_attr_write_str(hid_t loc, const char *name, const char *value) {
  int rc = -1;
  hid_t t = -1, s = -1, a = -1;
  if ((t = H5Tcopy(H5T_C_S1)) < 0 || H5Tset_size(t, strlen(value) + 1) < 0) goto done;
  if ((s = H5Screate(H5S_SCALAR)) < 0) goto done;
  if ((a = H5Acreate2(loc, name, t, s, H5P_DEFAULT, H5P_DEFAULT)) < 0) goto done;
  if (H5Awrite(a, t, value) < 0) goto done;
  rc = 0;
done:
  return attr_done(rc, a, s, t, -1);
}

int rank_h5_attr_write_num(hid_t loc, const char *name, hid_t filetype, hid_t memtype,
                          const void *v, hsize_t count) {
  int rc = -1;
  hid_t s = -1, a = -1;
  s = count == 1 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &count, NULL);
  if (s < 0) goto done;
  if ((a = H5Acreate2(loc, name, filetype, s, H5P_DEFAULT, H5P_DEFAULT)) < 0) goto done;
  if (H5Awrite(a, memtype, v) < 0) goto done;
  rc = 0;
done:
  return attr_done(rc, a, s, -1, -1);
}

int rank_h5_group_create(hid_t loc, const char *name) {
  hid_t g = H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (g < 0) return -1;
  H5Gclose(g);
  return 0;
}

/* ---- atomic outputs ------------------------------------------------------ */

int rank_h5_out_open(rank_h5_out *o, const char *path, const char *create_err) {
  rank_h5_silence();
  o->file = -1;
  snprintf(o->path, sizeof o->path, "%s", path);
  int rc = rank_atomic_begin(path, o->tmp, sizeof o->tmp);
  if (rc != SP_OK) {
    o->tmp[0] = '\0';
    return rc;
  }
  o->file = H5Fcreate(o->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (o->file < 0) {
    sp_log_error("%s: %s", path, create_err);
    rank_h5_out_abort(o);
    return SP_ERR_RUNTIME;
  }
  return SP_OK;
}

/* Every object identifier still open in file (a dataset, group, datatype
 * or attribute a failed write left), closed. */
static void close_objects(hid_t file) {
  const unsigned types = H5F_OBJ_DATASET | H5F_OBJ_GROUP | H5F_OBJ_DATATYPE | H5F_OBJ_ATTR |
                         H5F_OBJ_LOCAL;
  ssize_t n = H5Fget_obj_count(file, types);
  if (n <= 0) return;
  hid_t *ids = sp_xmalloc((size_t)n * sizeof *ids);
  n = H5Fget_obj_ids(file, types, (size_t)n, ids);
  for (ssize_t i = 0; i < n; i++) {
    H5I_type_t t = H5Iget_type(ids[i]);
    if (t == H5I_DATASET) H5Dclose(ids[i]);
    else if (t == H5I_GROUP) H5Gclose(ids[i]);
    else if (t == H5I_DATATYPE) H5Tclose(ids[i]);
    else if (t == H5I_ATTR) H5Aclose(ids[i]);
  }
  free(ids);
}

/* The descriptor HDF5 writes file through (the sec2 driver's), or -1. */
static int file_fd(hid_t file) {
  hid_t fapl = H5Fget_access_plist(file);
  void *handle = NULL;
  int fd = -1;
  if (fapl >= 0 && H5Pget_driver(fapl) == H5FD_SEC2 &&
      H5Fget_vfd_handle(file, fapl, &handle) >= 0 && handle)
    fd = *(int *)handle;
  if (fapl >= 0) H5Pclose(fapl);
  return fd;
}

/* Points the descriptor HDF5 writes file through (the sec2 driver's) at an
 * anonymous memory file, so whatever HDF5 still has to write of a file
 * being given up goes there instead of a disk that is full. */
static void divert_writes(hid_t file) {
  const int fd = file_fd(file);
  if (fd < 0) return;
  int mem = memfd_create("staticpipe-discarded", MFD_CLOEXEC);
  if (mem < 0) mem = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (mem < 0) return;
  dup2(mem, fd);
  close(mem);
}

/* Closes a file being given up (a write failed, or it is aborted) so that
 * HDF5 lets go of it: its open objects closed, its remaining writes
 * diverted (divert_writes). A close that fails on a full disk would leave
 * HDF5's handle half destroyed, and its clean-up at exit would crash on it. */
static void close_discarded(hid_t file) {
  close_objects(file);
  divert_writes(file);
  H5Fclose(file);
}

/* Allocates on disk every byte of file HDF5 has placed something at, so
 * that the flush which follows writes only into space the file holds: a
 * flush that fails part way leaves HDF5 1.10's metadata cache unable to
 * close the file at all. 0, or -1 when the disk has no room for it; a file
 * system that cannot allocate ahead (fallocate unsupported) counts as 0. */
static int reserve_space(hid_t file) {
  hsize_t size = 0;
  const int fd = file_fd(file);
  if (fd < 0 || H5Fget_filesize(file, &size) < 0 || size == 0) return 0;
  if (fallocate(fd, 0, 0, (off_t)size) == 0) return 0;
  return errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL ? 0 : -1;
}

int rank_h5_out_close(rank_h5_out *o) {
  /* The flush is what fails on a full disk; after it the close has nothing
   * left to write. With no room for the flush the file is given up
   * (close_discarded) before HDF5 tries. */
  close_objects(o->file);
  herr_t e = reserve_space(o->file) == 0 ? H5Fflush(o->file, H5F_SCOPE_LOCAL) : -1;
  if (e >= 0) e = H5Fclose(o->file);
  else close_discarded(o->file);
  o->file = -1;
  return e < 0 ? -1 : 0;
}

int rank_h5_out_commit(rank_h5_out *o, const char *close_err) {
  if (rank_h5_out_close(o) != 0) {
    sp_log_error("%s: %s", o->path, close_err);
    rank_h5_out_abort(o);
    return SP_ERR_RUNTIME;
  }
  int rc = rank_atomic_commit(o->tmp, o->path);
  o->tmp[0] = '\0'; /* renamed, or removed by the failed rename */
  return rc;
}

void rank_h5_out_abort(rank_h5_out *o) {
  if (o->file >= 0) close_discarded(o->file);
  o->file = -1;
  if (o->tmp[0]) rank_atomic_abort(o->tmp);
  o->tmp[0] = '\0';
}
