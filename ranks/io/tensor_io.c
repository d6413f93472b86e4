/* Float32 tensors in HDF5 files (see tensor_io.h). */
#include "tensor_io.h"

#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5_util.h"
#include "log.h"
#include "file_read.h"

/* path opened read-only; messages name what. */
static hid_t open_ro(const char *what, const char *path) {
  rank_h5_silence();
  /* A regular file only: HDF5 would block on a FIFO or read a device forever. */
  if (rank_file_check_regular_as(what, path) != SP_OK) return -1;
  if (H5Fis_hdf5(path) <= 0) {
    sp_log_error("%s: not an HDF5 file", what);
    return -1;
  }
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) sp_log_error("%s: HDF5 cannot open the file (damaged?)", what);
  return f;
}

int rank_tensor_exists(const char *path, const char *name, int *exists) {
  hid_t f = open_ro(path, path);
  if (f < 0) return SP_ERR_INPUT;
  *exists = H5Lexists(f, name, H5P_DEFAULT) > 0;
  H5Fclose(f);
  return SP_OK;
}

int rank_tensor_read(const char *path, const char *name, int ndim, rank_tensor *out) {
  return rank_tensor_read_checked(path, name, ndim, NULL, NULL, out);
}

int rank_tensor_read_checked(const char *path, const char *name, int ndim,
                             rank_tensor_shape_check check, void *ctx, rank_tensor *out) {
  return rank_tensor_read_as(path, path, name, ndim, check, ctx, out);
}

int rank_tensor_read_as(const char *what, const char *path, const char *name, int ndim,
                        rank_tensor_shape_check check, void *ctx, rank_tensor *out) {
  memset(out, 0, sizeof *out);
  hid_t f = open_ro(what, path);
  if (f < 0) return SP_ERR_INPUT;
  int rc = SP_ERR_INPUT;
  hid_t d = -1, s = -1, t = -1;
  float *data = NULL;
  if (H5Lexists(f, name, H5P_DEFAULT) <= 0) {
    sp_log_error("%s: dataset '%s' is missing", what, name);
    goto done;
  }
  H5O_info_t oi;
  if (H5Oget_info_by_name(f, name, &oi, H5P_DEFAULT) < 0 || oi.type != H5O_TYPE_DATASET ||
      (d = H5Dopen2(f, name, H5P_DEFAULT)) < 0) {
    sp_log_error("%s: '%s' is not a dataset", what, name);
    goto done;
  }
  if ((t = H5Dget_type(d)) < 0 || H5Tget_class(t) != H5T_FLOAT ||
      (H5Tget_size(t) != 4 && H5Tget_size(t) != 8)) {
    sp_log_error("%s: dataset '%s' is not float32 (or float64)", what, name);
    goto done;
  }
  if ((s = H5Dget_space(d)) < 0) goto done;
  int nd = H5Sget_simple_extent_ndims(s);
  if (nd < 1 || nd > RANK_TENSOR_MAX_DIMS || (ndim > 0 && nd != ndim)) {
    if (ndim > 0)
      sp_log_error("%s: dataset '%s' has %d dimensions, expected %d", what, name, nd, ndim);
    else
      sp_log_error("%s: dataset '%s' has %d dimensions (a scalar has none), expected 1..%d",
                   what, name, nd, RANK_TENSOR_MAX_DIMS);
    goto done;
  }
  hsize_t dims[RANK_TENSOR_MAX_DIMS];
  H5Sget_simple_extent_dims(s, dims, NULL);
  int64_t n = 1;
  for (int i = 0; i < nd; i++) {
    if (dims[i] == 0 || dims[i] > (1ull << 40) || n > (INT64_C(1) << 40) / (int64_t)dims[i]) {
      sp_log_error("%s: dataset '%s' dimension %d of size %llu is empty or too large", what,
                   name, i, (unsigned long long)dims[i]);
      goto done;
    }
    n *= (int64_t)dims[i];
    out->dims[i] = (int64_t)dims[i];
  }
  if (check && check(what, name, nd, out->dims, ctx) != SP_OK) goto done;
  data = malloc((size_t)n * sizeof(float));
  if (!data) {
    sp_log_error("%s: dataset '%s': out of host memory for %lld floats", what, name,
                 (long long)n);
    rc = SP_ERR_RUNTIME;
    goto done;
  }
  if (H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
    sp_log_error("%s: dataset '%s' could not be read (damaged file?)", what, name);
    goto done;
  }
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(data[i])) {
      sp_log_error("%s: dataset '%s' holds a non-finite value (NaN or Inf) at element %lld",
                   what, name, (long long)i);
      goto done;
    }
  }
  out->ndim = nd;
  out->numel = n;
  out->data = data;
  data = NULL;
  rc = SP_OK;
done:
  free(data);
  if (rc != SP_OK) memset(out, 0, sizeof *out);
  if (t >= 0) H5Tclose(t);
  if (s >= 0) H5Sclose(s);
  if (d >= 0) H5Dclose(d);
  H5Fclose(f);
  return rc;
}

void rank_tensor_free(rank_tensor *t) {
  free(t->data);
  t->data = NULL;
}

struct rank_outfile {
  rank_h5_out h5;
};

int rank_outfile_open(const char *path, rank_outfile **out) {
  rank_outfile *o = sp_xcalloc(1, sizeof *o);
  int rc = rank_h5_out_open(&o->h5, path, "cannot create the output file");
  if (rc != SP_OK) {
    free(o);
    return rc;
  }
  *out = o;
  return SP_OK;
}

int rank_outfile_create(rank_outfile *o, const char *name, int ndim, const int64_t *dims) {
  if (ndim < 1 || ndim > RANK_TENSOR_MAX_DIMS) {
    sp_log_error("%s: dataset '%s': %d dimensions, 1 to %d allowed", o->h5.path, name, ndim,
                 RANK_TENSOR_MAX_DIMS);
    return SP_ERR_RUNTIME;
  }
  hsize_t hd[RANK_TENSOR_MAX_DIMS];
  for (int i = 0; i < ndim; i++) hd[i] = (hsize_t)dims[i];
  hid_t s = H5Screate_simple(ndim, hd, NULL), d = -1;
  int ok = s >= 0 && (d = H5Dcreate2(o->h5.file, name, H5T_IEEE_F32LE, s, H5P_DEFAULT,
                                     H5P_DEFAULT, H5P_DEFAULT)) >= 0;
  if (d >= 0) H5Dclose(d);
  if (s >= 0) H5Sclose(s);
  if (!ok) {
    sp_log_error("%s: creating dataset '%s' failed", o->h5.path, name);
    return SP_ERR_RUNTIME;
  }
  return SP_OK;
}

int rank_outfile_put_box(rank_outfile *o, const char *name, const int64_t *start,
                         const int64_t *count, const float *data) {
  hid_t d = H5Dopen2(o->h5.file, name, H5P_DEFAULT), fs = -1, ms = -1;
  int ok = 0;
  if (d >= 0 && (fs = H5Dget_space(d)) >= 0) {
    int nd = H5Sget_simple_extent_ndims(fs);
    hsize_t hs[RANK_TENSOR_MAX_DIMS], hc[RANK_TENSOR_MAX_DIMS];
    for (int i = 0; i < nd && i < RANK_TENSOR_MAX_DIMS; i++) {
      hs[i] = (hsize_t)start[i];
      hc[i] = (hsize_t)count[i];
    }
    ok = nd >= 1 && nd <= RANK_TENSOR_MAX_DIMS &&
         H5Sselect_hyperslab(fs, H5S_SELECT_SET, hs, NULL, hc, NULL) >= 0 &&
         H5Sselect_valid(fs) > 0 && (ms = H5Screate_simple(nd, hc, NULL)) >= 0 &&
         H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, data) >= 0;
  }
  if (ms >= 0) H5Sclose(ms);
  if (fs >= 0) H5Sclose(fs);
  if (d >= 0) H5Dclose(d);
  if (!ok) {
    sp_log_error("%s: writing dataset '%s' failed (box outside the dataset, or disk full?)",
                 o->h5.path, name);
    return SP_ERR_RUNTIME;
  }
  return SP_OK;
}

int rank_outfile_put(rank_outfile *o, const char *name, int ndim, const int64_t *dims,
                     const float *data) {
  int64_t start[RANK_TENSOR_MAX_DIMS] = {0};
  int rc = rank_outfile_create(o, name, ndim, dims);
  return rc != SP_OK ? rc : rank_outfile_put_box(o, name, start, dims, data);
}

static int attr_status(rank_outfile *o, const char *key, int rc) {
  if (rc != 0) {
    sp_log_error("%s: writing attribute '%s' failed", o->h5.path, key);
    return SP_ERR_RUNTIME;
  }
  return SP_OK;
}

int rank_outfile_attr_str(rank_outfile *o, const char *key, const char *value) {
  return attr_status(o, key, rank_h5_attr_write_str(o->h5.file, key, value));
}

int rank_outfile_attr_i64(rank_outfile *o, const char *key, int64_t value) {
  return attr_status(o, key, rank_h5_attr_write_num(o->h5.file, key, H5T_STD_I64LE,
                                                    H5T_NATIVE_INT64, &value, 1));
}

int rank_outfile_attr_f64(rank_outfile *o, const char *key, double value) {
  return attr_status(o, key, rank_h5_attr_write_num(o->h5.file, key, H5T_IEEE_F64LE,
                                                    H5T_NATIVE_DOUBLE, &value, 1));
}

int rank_outfile_commit(rank_outfile *o) {
  int rc = rank_h5_out_commit(&o->h5, "closing the output failed (disk full?)");
  free(o);
  return rc;
}

void rank_outfile_abort(rank_outfile *o) {
  if (!o) return;
  rank_h5_out_abort(&o->h5);
  free(o);
}
