/* Small HDF5 helpers (see h5_util.h). */
#include "h5_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

void rank_h5_silence(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

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
  if (mt >= 0) H5Tclose(mt);
  if (t >= 0) H5Tclose(t);
  if (a >= 0) H5Aclose(a);
  return rc;
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
  if (t >= 0) H5Tclose(t);
  if (s >= 0) H5Sclose(s);
  if (a >= 0) H5Aclose(a);
  return rc;
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
  if (a >= 0) H5Aclose(a);
  if (s >= 0) H5Sclose(s);
  if (t >= 0) H5Tclose(t);
  return rc;
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
  if (a >= 0) H5Aclose(a);
  if (s >= 0) H5Sclose(s);
  return rc;
}

