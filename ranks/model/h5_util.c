/* Small HDF5 helpers (see h5_util.h). */
#include "h5_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int rank_h5_out_commit(rank_h5_out *o, const char *close_err) {
  herr_t e = H5Fclose(o->file);
  o->file = -1;
  if (e < 0) {
    sp_log_error("%s: %s", o->path, close_err);
    rank_h5_out_abort(o);
    return SP_ERR_RUNTIME;
  }
  int rc = rank_atomic_commit(o->tmp, o->path);
  o->tmp[0] = '\0'; /* renamed, or removed by the failed rename */
  return rc;
}

void rank_h5_out_abort(rank_h5_out *o) {
  if (o->file >= 0) H5Fclose(o->file);
  o->file = -1;
  if (o->tmp[0]) rank_atomic_abort(o->tmp);
  o->tmp[0] = '\0';
}
