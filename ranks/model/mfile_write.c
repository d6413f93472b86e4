/* The model-file layer's writer (see mfile.h): a temporary file beside the
 * final path with the root attributes, the config, the groups and what the
 * hooks add; one dataset per tensor (in parts, one tensor at a time), a
 * scaled format's scales beside it; the model checksum at commit, then the
 * rename. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "h5_util.h"
#include "log.h"
#include "mfile_impl.h"
#include "model_container.h"

struct mfile_writer {
  rank_h5_out out;
  const net_schema *schema;
  const mfile_root *root;
  int ngroups, ntensors;
  net_group *g;
  net_tensor *t;
  kern_dtype *fmt;    /* (ntensors) the format each is stored in */
  uint32_t *crc;      /* (ntensors) */
  uint32_t *scale_crc; /* (ntensors) a scaled format's scales' */
  uint8_t *done;      /* (ntensors) */
  uint32_t extra_crc[MFILE_MAX_EXTRA];
  int nextra;
  int part;           /* the tensor being written in parts, or -1 */
  hid_t part_d;       /* its dataset */
  int64_t part_at;    /* values written so far */
  uint32_t part_crc;  /* their CRC so far */
  void *tmp;          /* narrowed values */
  size_t tmp_bytes;
  float *scales;      /* a quantised tensor's scales */
  size_t scales_n;
};

/* ---- opening -------------------------------------------------------------- */

/* Logs "PATH: cannot write the model file (what)"; SP_ERR_RUNTIME. */
static int fail(const mfile_writer *w, const char *what) {
  sp_log_error("%s: cannot write the model file (%s)", w->out.path, what);
  return SP_ERR_RUNTIME;
}

/* The root attributes, the config and the groups of a fresh file. */
static int start(mfile_writer *w, const void *config, const char *preset) {
  hid_t f = w->out.file;
  if (rank_container_write_root(f, w->schema->arch, preset, w->root->name) != 0 ||
      mfile_attrs_write(f, w->schema, config) != 0)
    return -1;
  for (int i = 0; i < w->ngroups; i++)
    if (!w->g[i].foreign && rank_h5_group_create(f, w->g[i].path) != 0) return -1;
  return 0;
}

int mfile_writer_open(const char *path, const net_schema *s, const void *config,
                      const char *root, const char *preset, const mfile_hooks *hooks,
                      mfile_writer **out) {
  char err[256];
  const mfile_root *r = mfile_root_named(root);
  int takes = 0;
  for (int i = 0; r && s->root_dtypes[i]; i++) takes |= strcmp(s->root_dtypes[i], root) == 0;
  if (s->check(config, err, sizeof err) != 0 || !takes) {
    if (!takes)
      snprintf(err, sizeof err, "root dtype %s is not one a %s file takes", root, s->what);
    sp_log_error("%s: %s", path, err);
    return SP_ERR_INPUT;
  }
  mfile_writer *w = sp_xcalloc(1, sizeof *w);
  w->schema = s;
  w->root = r;
  w->part = -1;
  w->part_d = -1;
  mfile_tables(s, config, &w->g, &w->ngroups, &w->t, &w->ntensors);
  w->fmt = sp_xcalloc((size_t)w->ntensors + 1, sizeof *w->fmt);
  w->crc = sp_xcalloc((size_t)w->ntensors + 1, sizeof *w->crc);
  w->scale_crc = sp_xcalloc((size_t)w->ntensors + 1, sizeof *w->scale_crc);
  w->done = sp_xcalloc((size_t)w->ntensors + 1, 1);
  for (int i = 0; i < w->ntensors; i++) w->fmt[i] = mfile_root_format(r, &w->t[i]);
  int rc = rank_h5_out_open(&w->out, path, "cannot write the model file (cannot create the "
                                           "temporary file)");
  if (rc == SP_OK && start(w, config, preset) != 0)
    rc = fail(w, "cannot write the root attributes and groups");
  if (rc == SP_OK && hooks && hooks->write &&
      hooks->write(hooks->ctx, w->out.file, w->extra_crc, &w->nextra) != 0) {
    snprintf(err, sizeof err, "cannot write %s", hooks->what);
    rc = fail(w, err);
  }
  if (rc != SP_OK) {
    mfile_writer_abort(w);
    return rc;
  }
  *out = w;
  return SP_OK;
}

int mfile_writer_meta(mfile_writer *w, const char *key, const char *value) {
  if (rank_container_write_meta(w->out.file, key, value) != 0) return fail(w, "metadata attribute");
  return SP_OK;
}

int mfile_writer_count(const mfile_writer *w) { return w->ntensors; }
const net_tensor *mfile_writer_tensor(const mfile_writer *w, int i) { return &w->t[i]; }
kern_dtype mfile_writer_format(const mfile_writer *w, int i) { return w->fmt[i]; }

int mfile_writer_allows(const mfile_writer *w, int i, kern_dtype fmt) {
  const mfile_format *f = mfile_format_of(fmt);
  if (i < 0 || i >= w->ntensors || !f || !mfile_format_fits(f, &w->t[i])) return 0;
  const kern_dtype *allowed;
  const int n = mfile_root_allowed(w->root, &w->t[i], &allowed);
  for (int k = 0; k < n; k++)
    if (allowed[k] == fmt) return 1;
  return 0;
}

int mfile_writer_set_format(mfile_writer *w, int i, kern_dtype fmt) {
  if (i < 0 || i >= w->ntensors) {
    sp_log_error("%s: tensor %d is not one of the model's %d", w->out.path, i, w->ntensors);
    return SP_ERR_INPUT;
  }
  char ds[NET_PATH_MAX + NET_NAME_MAX + 16];
  mfile_tensor_path(&w->t[i], ds, sizeof ds);
  const kern_dtype *allowed;
  const int n = mfile_root_allowed(w->root, &w->t[i], &allowed);
  const mfile_format *f = mfile_format_of(fmt);
  int ok = 0;
  for (int k = 0; k < n && f; k++) ok |= allowed[k] == fmt;
  if (!ok || w->done[i] || w->part == i) {
    sp_log_error("%s: %s: %s is not a format it may take in a %s file%s", w->out.path, ds,
                 kern_dtype_name(fmt), w->root->name, ok ? " (it is written already)" : "");
    return SP_ERR_INPUT;
  }
  if (!mfile_format_fits(f, &w->t[i])) {
    sp_log_error("%s: %s: its rows of %lld values are not whole %s blocks of %d", w->out.path,
                 ds, (long long)mfile_tensor_cols(&w->t[i]), f->name, mfile_format_block(f));
    return SP_ERR_INPUT;
  }
  w->fmt[i] = fmt;
  return SP_OK;
}

int mfile_writer_set_quant(mfile_writer *w, kern_dtype fmt) {
  for (int i = 0; i < w->ntensors; i++) {
    if (!w->t[i].quant || !mfile_writer_allows(w, i, fmt)) continue;
    const int rc = mfile_writer_set_format(w, i, fmt);
    if (rc != SP_OK) return rc;
  }
  return SP_OK;
}

int mfile_writer_find(const mfile_writer *w, const char *group, const char *name) {
  for (int i = 0; i < w->ntensors; i++)
    if (strcmp(w->t[i].group, group) == 0 && strcmp(w->t[i].name, name) == 0) return i;
  return -1;
}

/* ---- tensors ---------------------------------------------------------------- */

/* Room for bytes in w->tmp. */
static void *tmp_room(mfile_writer *w, size_t bytes) {
  if (bytes > w->tmp_bytes) {
    free(w->tmp);
    w->tmp = sp_xmalloc(bytes);
    w->tmp_bytes = bytes;
  }
  return w->tmp;
}

/* A whole dataset ds of tensor t stored as f from data, its CRC in *crc. */
static int write_whole(mfile_writer *w, const char *ds, const mfile_format *f, const net_tensor *t,
                       const void *data, uint32_t *crc) {
  int64_t dims[NET_MAX_NDIM];
  const int nd = mfile_format_dims(f, t, dims);
  const uint64_t bytes = mfile_format_bytes(f, t);
  const int64_t units = (int64_t)(bytes / (f->elem ? f->elem : 1));
  hid_t d = rank_container_create_dataset(w->out.file, ds, f, nd, dims);
  const uint32_t c = crc32c(0, data, (size_t)bytes);
  int ok = d >= 0 && rank_container_write_values(d, f, data, 0, units, units) == 0;
  if (d >= 0) ok = rank_container_finish_dataset(d, f, t, c) == 0 && ok;
  if (!ok) {
    sp_log_error("%s: %s: HDF5 write failed (disk full?)", w->out.path, ds);
    return SP_ERR_RUNTIME;
  }
  *crc = c;
  return SP_OK;
}

/* Tensor i of a scaled format, whole: q as stored with scale (rows), or
 * from fp32 values quantised per row. */
static int put_scaled(mfile_writer *w, int i, const mfile_put *p, const char *ds) {
  const net_tensor *t = &w->t[i];
  const mfile_format *f = mfile_format_of(w->fmt[i]);
  const int64_t rows = mfile_tensor_rows(t), cols = mfile_tensor_cols(t);
  const void *q = p->data;
  const float *scale = p->scale;
  if (p->given == KERN_DTYPE_F32) {
    if ((size_t)rows > w->scales_n) {
      free(w->scales);
      w->scales = sp_xmalloc((size_t)rows * sizeof *w->scales);
      w->scales_n = (size_t)rows;
    }
    void *dst = tmp_room(w, (size_t)mfile_format_bytes(f, t));
    f->narrow(p->data, rows, cols, dst, w->scales);
    q = dst;
    scale = w->scales;
  }
  const int64_t o = scale ? mfile_bad_scale(scale, rows) : 0;
  if (o >= 0) {
    sp_log_error("%s: %s: the scale of output channel %lld is %g: each scale must be finite and "
                 "positive", w->out.path, ds, (long long)o, scale ? (double)scale[o] : 0.0);
    return SP_ERR_INPUT;
  }
  char sds[NET_PATH_MAX + NET_NAME_MAX + 24];
  mfile_scale_path(ds, sds, sizeof sds);
  net_tensor st = {.ndim = 1, .shape = {rows}};
  net_tensor_finish(&st);
  int rc = write_whole(w, ds, f, t, q, &w->crc[i]);
  if (rc == SP_OK) rc = write_whole(w, sds, mfile_format_of(KERN_DTYPE_F32), &st, scale,
                                    &w->scale_crc[i]);
  if (rc == SP_OK) w->done[i] = 1;
  return rc;
}

/* A part of tensor i of a format of values, as stored (narrowed first when
 * given in fp32). */
static int put_part(mfile_writer *w, int i, const mfile_put *p, const char *ds) {
  const net_tensor *t = &w->t[i];
  const mfile_format *f = mfile_format_of(w->fmt[i]);
  const void *stored = p->data;
  if (p->given != w->fmt[i]) {
    void *dst = tmp_room(w, (size_t)p->count * f->elem);
    f->narrow(p->data, 1, p->count, dst, NULL);
    stored = dst;
  }
  if (w->part < 0) {
    int64_t dims[NET_MAX_NDIM];
    const int nd = mfile_format_dims(f, t, dims);
    w->part_d = rank_container_create_dataset(w->out.file, ds, f, nd, dims);
    w->part = i;
    w->part_at = 0;
    w->part_crc = 0;
    if (w->part_d < 0) goto fail;
  }
  if (rank_container_write_values(w->part_d, f, stored, p->first, p->count, t->numel) != 0)
    goto fail;
  w->part_crc = crc32c(w->part_crc, stored, (size_t)p->count * f->elem);
  w->part_at = p->first + p->count;
  if (w->part_at == t->numel) { /* the tensor is complete */
    hid_t d = w->part_d;
    w->part_d = -1;
    w->part = -1;
    if (rank_container_finish_dataset(d, f, t, w->part_crc) != 0) goto fail;
    w->crc[i] = w->part_crc;
    w->done[i] = 1;
  }
  return SP_OK;
fail:
  sp_log_error("%s: %s: HDF5 write failed (disk full?)", w->out.path, ds);
  return SP_ERR_RUNTIME;
}

int mfile_writer_put(mfile_writer *w, const mfile_put *p) {
  const int i = p->tensor;
  if (i < 0 || i >= w->ntensors) {
    sp_log_error("%s: tensor %d is not one of the model's %d", w->out.path, i, w->ntensors);
    return SP_ERR_INPUT;
  }
  const net_tensor *t = &w->t[i];
  const mfile_format *f = mfile_format_of(w->fmt[i]);
  char ds[NET_PATH_MAX + NET_NAME_MAX + 16];
  mfile_tensor_path(t, ds, sizeof ds);
  if (w->done[i]) {
    sp_log_error("%s: %s written twice", w->out.path, ds);
    return SP_ERR_INPUT;
  }
  if (p->given != KERN_DTYPE_F32 && p->given != w->fmt[i]) {
    sp_log_error("%s: %s: given as %s, stored as %s", w->out.path, ds,
                 kern_dtype_name(p->given), f->name);
    return SP_ERR_INPUT;
  }
  const int whole = p->first == 0 && p->count == t->numel;
  if ((f->scaled || !f->elem) && !whole) {
    sp_log_error("%s: %s: %s is written whole (%lld values), not in parts", w->out.path, ds,
                 f->name, (long long)t->numel);
    return SP_ERR_INPUT;
  }
  if (!f->narrow && p->given != w->fmt[i]) {
    sp_log_error("%s: %s: %s has no quantiser here: it is written as its bytes", w->out.path,
                 ds, f->name);
    return SP_ERR_INPUT;
  }
  if (f->scaled && p->given == w->fmt[i] && !p->scale) {
    sp_log_error("%s: %s: an %s tensor is written with its scales", w->out.path, ds, f->name);
    return SP_ERR_INPUT;
  }
  if (p->first != (w->part == i ? w->part_at : 0) || p->count < 1 ||
      p->first + p->count > t->numel || (w->part >= 0 && w->part != i)) {
    sp_log_error("%s: %s: part [%lld, %lld) out of order (parts go in order, one tensor at a "
                 "time, %lld values in all)",
                 w->out.path, ds, (long long)p->first, (long long)(p->first + p->count),
                 (long long)t->numel);
    return SP_ERR_INPUT;
  }
  if (f->scaled) return put_scaled(w, i, p, ds);
  if (!f->elem) { /* a block format: its bytes whole (from fp32: quantised first) */
    const void *bytes = p->data;
    if (p->given != w->fmt[i]) {
      void *dst = tmp_room(w, (size_t)mfile_format_bytes(f, t));
      f->narrow(p->data, mfile_tensor_rows(t), mfile_tensor_cols(t), dst, NULL);
      bytes = dst;
    }
    int rc = write_whole(w, ds, f, t, bytes, &w->crc[i]);
    if (rc == SP_OK) w->done[i] = 1;
    return rc;
  }
  return put_part(w, i, p, ds);
}

/* ---- the end -------------------------------------------------------------------- */

int mfile_writer_commit(mfile_writer *w) {
  int rc = SP_OK;
  uint32_t acc = 0;
  for (int i = 0; i < w->ntensors && rc == SP_OK; i++) {
    if (!w->done[i]) {
      char ds[NET_PATH_MAX + NET_NAME_MAX + 16];
      mfile_tensor_path(&w->t[i], ds, sizeof ds);
      sp_log_error("%s: %s was never written", w->out.path, ds);
      rc = SP_ERR_INPUT;
      break;
    }
    acc = rank_container_checksum_add(acc, w->crc[i]);
    if (mfile_format_of(w->fmt[i])->scaled)
      acc = rank_container_checksum_add(acc, w->scale_crc[i]); /* right after its tensor */
  }
  for (int k = 0; k < w->nextra; k++) acc = rank_container_checksum_add(acc, w->extra_crc[k]);
  if (rc == SP_OK) {
    rc = rank_container_commit(&w->out, acc);
    if (rc == SP_OK) w->out.tmp[0] = '\0'; /* renamed into place: nothing to remove */
  }
  mfile_writer_abort(w);
  return rc;
}

void mfile_writer_abort(mfile_writer *w) {
  if (!w) return;
  if (w->part_d >= 0) H5Dclose(w->part_d);
  rank_h5_out_abort(&w->out);
  free(w->scales);
  free(w->tmp);
  free(w->done);
  free(w->scale_crc);
  free(w->crc);
  free(w->fmt);
  free(w->t);
  free(w->g);
  free(w);
}
