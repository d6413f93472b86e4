/* The T5 file's writer (see t5_file.h): a temporary file beside the final
 * path, the container's root attributes and the config, the tokenizer, one
 * dataset per table tensor under /encoder, the model checksum at commit,
 * the rename. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "container_io.h"
#include "crc32c.h"
#include "h5_util.h"
#include "log.h"
#include "model_container.h"
#include "t5_file_impl.h"

struct t5_model_writer {
  rank_h5_out out;
  kern_dtype dtype;
  umt5_config c;
  int count;
  uint32_t crc[UMT5_MAX_TENSORS];
  uint8_t done[UMT5_MAX_TENSORS];
  uint32_t tok_crc[T5_TOK_DATASETS];
  int tok_n;
  uint16_t *bf; /* bf16 staging of the largest part so far */
  int64_t bf_n;
  int part;          /* table entry being written in parts, or -1 */
  hid_t part_d;      /* its dataset */
  int64_t part_at;   /* values written so far */
  uint32_t part_crc; /* their CRC so far */
};

/* ---- the tokenizer group (t5_file_impl.h) ---------------------------------- */

static int tok_ds_write(hid_t g, const char *name, hid_t ftype, hid_t mtype, size_t n,
                        size_t esize, const void *data, uint32_t *crc) {
  hsize_t dims[1] = {(hsize_t)n};
  hid_t s = -1, dcpl = -1, d = -1;
  int ok = (s = H5Screate_simple(1, dims, NULL)) >= 0 &&
           (dcpl = H5Pcreate(H5P_DATASET_CREATE)) >= 0 &&
           H5Pset_layout(dcpl, H5D_CONTIGUOUS) >= 0 &&
           (d = H5Dcreate2(g, name, ftype, s, H5P_DEFAULT, dcpl, H5P_DEFAULT)) >= 0 &&
           H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0;
  uint32_t c = crc32c(0, data, n * esize);
  ok = ok && rank_h5_attr_write_num(d, "checksum", H5T_STD_U32LE, H5T_NATIVE_UINT32, &c, 1) == 0;
  if (d >= 0) H5Dclose(d);
  if (dcpl >= 0) H5Pclose(dcpl);
  if (s >= 0) H5Sclose(s);
  if (ok) *crc = c;
  return ok ? 0 : -1;
}

int t5_file_tok_write(hid_t file, const tok_spec *t, uint32_t *crc, int *n) {
  hid_t g = H5Gcreate2(file, "/" T5_TOK_GROUP, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (g < 0) return -1;
  const size_t np = (size_t)t->n_pieces;
  int ok = tok_ds_write(g, "piece_bytes", H5T_STD_U8LE, H5T_NATIVE_UINT8,
                        t->piece_offsets[np], 1, t->piece_bytes, &crc[0]) == 0 &&
           tok_ds_write(g, "piece_offsets", H5T_STD_U32LE, H5T_NATIVE_UINT32, np + 1, 4,
                        t->piece_offsets, &crc[1]) == 0 &&
           tok_ds_write(g, "scores", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, np, 4, t->scores,
                        &crc[2]) == 0 &&
           tok_ds_write(g, "types", H5T_STD_U8LE, H5T_NATIVE_UINT8, np, 1, t->types, &crc[3]) == 0;
  *n = 4;
  if (ok && t->charsmap_bytes > 0) {
    ok = tok_ds_write(g, "charsmap", H5T_STD_U8LE, H5T_NATIVE_UINT8, t->charsmap_bytes, 1,
                      t->charsmap, &crc[4]) == 0;
    *n = 5;
  }
  const int64_t a[8] = {t->unk_id, t->eos_id, t->pad_id, t->bos_id, t->add_dummy_prefix,
                        t->remove_extra_whitespaces, t->escape_whitespaces, t->byte_fallback};
  static const char *const names[8] = {"unk_id", "eos_id", "pad_id", "bos_id",
                                       "add_dummy_prefix", "remove_extra_whitespaces",
                                       "escape_whitespaces", "byte_fallback"};
  for (int i = 0; i < 8 && ok; i++)
    ok = rank_h5_attr_write_num(g, names[i], H5T_STD_I64LE, H5T_NATIVE_INT64, &a[i], 1) == 0;
  H5Gclose(g);
  return ok ? 0 : -1;
}

/* ---- the writer ------------------------------------------------------------- */

int t5_model_writer_open(const char *path, const umt5_config *c, kern_dtype dtype,
                         const char *preset, const tok_model *tok, t5_model_writer **out) {
  char err[256];
  if (umt5_config_check(c, err, sizeof err) != 0) {
    sp_log_error("%s: %s", path, err);
    return SP_ERR_INPUT;
  }
  const tok_spec *ts = tok_model_spec(tok);
  if (ts->n_pieces > c->vocab) {
    sp_log_error("%s: the tokenizer has %d pieces, more than the encoder's vocabulary of %lld",
                 path, ts->n_pieces, (long long)c->vocab);
    return SP_ERR_INPUT;
  }
  t5_model_writer *w = sp_xcalloc(1, sizeof *w);
  w->part = -1;
  w->part_d = -1;
  w->dtype = dtype;
  w->c = *c;
  w->count = umt5_table_count(c);
  int rc = rank_container_out_open(&w->out, path, T5_MODEL_ARCH, preset, dtype);
  if (rc == SP_OK && (t5_file_config_write(w->out.file, c) != 0 ||
                      rank_h5_group_create(w->out.file, "/" T5_FILE_GROUP) != 0))
    rc = rank_container_out_fail(&w->out, "cannot write the root attributes and groups");
  if (rc == SP_OK && t5_file_tok_write(w->out.file, ts, w->tok_crc, &w->tok_n) != 0)
    rc = rank_container_out_fail(&w->out, "cannot write the tokenizer");
  if (rc != SP_OK) {
    t5_model_writer_abort(w);
    return rc;
  }
  *out = w;
  return SP_OK;
}

int t5_model_writer_attr(t5_model_writer *w, const char *key, const char *value) {
  return rank_container_out_meta(&w->out, key, value);
}

/* The dataset being written in parts (t5_model_writer_put_part). */
static int part_begin(t5_model_writer *w, int i, const umt5_tensor *t, const char *ds) {
  hsize_t dims[2] = {(hsize_t)t->shape[0], (hsize_t)t->shape[1]};
  hid_t s = -1, dcpl = -1;
  hid_t ftype = w->dtype == KERN_DTYPE_BF16 ? H5T_STD_U16LE : H5T_IEEE_F32LE;
  int ok = (s = H5Screate_simple(t->ndim, dims, NULL)) >= 0 &&
           (dcpl = H5Pcreate(H5P_DATASET_CREATE)) >= 0 &&
           H5Pset_layout(dcpl, H5D_CONTIGUOUS) >= 0 &&
           H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) >= 0 &&
           (w->part_d = H5Dcreate2(w->out.file, ds, ftype, s, H5P_DEFAULT, dcpl, H5P_DEFAULT)) >= 0;
  if (dcpl >= 0) H5Pclose(dcpl);
  if (s >= 0) H5Sclose(s);
  w->part = i;
  w->part_at = 0;
  w->part_crc = 0;
  return ok ? 0 : -1;
}

/* Elements [at, at + n) of the open dataset, flattened. */
static int part_write(t5_model_writer *w, const void *stored, int64_t at, int64_t n) {
  hsize_t total = 0, start = (hsize_t)at, count = (hsize_t)n;
  hid_t fs = H5Dget_space(w->part_d), ms = -1, flat = -1;
  int ok = fs >= 0 && (total = (hsize_t)H5Sget_simple_extent_npoints(fs)) > 0;
  /* The file space seen as 1-D, so a part need not be whole rows. */
  ok = ok && (flat = H5Screate_simple(1, &total, NULL)) >= 0 &&
       H5Sselect_hyperslab(flat, H5S_SELECT_SET, &start, NULL, &count, NULL) >= 0 &&
       (ms = H5Screate_simple(1, &count, NULL)) >= 0;
  hid_t mtype = w->dtype == KERN_DTYPE_BF16 ? H5T_NATIVE_UINT16 : H5T_NATIVE_FLOAT;
  ok = ok && H5Dwrite(w->part_d, mtype, ms, flat, H5P_DEFAULT, stored) >= 0;
  if (ms >= 0) H5Sclose(ms);
  if (flat >= 0) H5Sclose(flat);
  if (fs >= 0) H5Sclose(fs);
  return ok ? 0 : -1;
}

int t5_model_writer_put_part(t5_model_writer *w, const char *name, const float *data,
                             int64_t first, int64_t count) {
  int i = umt5_table_find(&w->c, name);
  char ds[128];
  t5_file_dataset_path(name, ds, sizeof ds);
  if (i < 0) {
    sp_log_error("%s: %s is not a tensor of this text encoder", w->out.path, name);
    return SP_ERR_INPUT;
  }
  umt5_tensor t;
  umt5_table_entry(&w->c, i, &t);
  if (w->done[i]) {
    sp_log_error("%s: %s written twice", w->out.path, ds);
    return SP_ERR_INPUT;
  }
  if (first != (w->part == i ? w->part_at : 0) || count < 1 || first + count > t.numel ||
      (w->part >= 0 && w->part != i)) {
    sp_log_error("%s: %s: part [%lld, %lld) out of order (parts go in order, one tensor at a "
                 "time, %lld values in all)",
                 w->out.path, ds, (long long)first, (long long)(first + count), (long long)t.numel);
    return SP_ERR_INPUT;
  }
  if (w->part < 0 && part_begin(w, i, &t, ds) != 0) goto fail;
  const void *stored = data;
  if (w->dtype == KERN_DTYPE_BF16) {
    if (count > w->bf_n) {
      free(w->bf);
      w->bf = sp_xmalloc((size_t)count * sizeof *w->bf);
      w->bf_n = count;
    }
    kern_f32_to_bf16_n(data, w->bf, (size_t)count);
    stored = w->bf;
  }
  if (part_write(w, stored, first, count) != 0) goto fail;
  w->part_crc = crc32c(w->part_crc, stored, (size_t)count * kern_dtype_size(w->dtype));
  w->part_at = first + count;
  if (w->part_at == t.numel) { /* the tensor is complete */
    int ok = rank_h5_attr_write_str(w->part_d, "dtype", kern_dtype_name(w->dtype)) == 0 &&
             rank_h5_attr_write_num(w->part_d, "checksum", H5T_STD_U32LE, H5T_NATIVE_UINT32,
                                    &w->part_crc, 1) == 0;
    H5Dclose(w->part_d);
    w->part_d = -1;
    w->part = -1;
    if (!ok) goto fail;
    w->crc[i] = w->part_crc;
    w->done[i] = 1;
  }
  return SP_OK;
fail:
  sp_log_error("%s: %s: HDF5 write failed (disk full?)", w->out.path, ds);
  return SP_ERR_RUNTIME;
}

int t5_model_writer_put(t5_model_writer *w, const char *name, const float *data, int64_t numel) {
  int i = umt5_table_find(&w->c, name);
  if (i >= 0) {
    umt5_tensor t;
    umt5_table_entry(&w->c, i, &t);
    if (numel != t.numel) {
      sp_log_error("%s: /%s/%s: %lld values given, the table needs %lld", w->out.path,
                   T5_FILE_GROUP, name, (long long)numel, (long long)t.numel);
      return SP_ERR_INPUT;
    }
  }
  return t5_model_writer_put_part(w, name, data, 0, numel);
}

int t5_model_writer_commit(t5_model_writer *w) {
  int rc = SP_OK;
  uint32_t acc = 0;
  for (int i = 0; i < w->count && rc == SP_OK; i++) {
    if (!w->done[i]) {
      umt5_tensor t;
      umt5_table_entry(&w->c, i, &t);
      sp_log_error("%s: /%s/%s was never written", w->out.path, T5_FILE_GROUP, t.name);
      rc = SP_ERR_INPUT;
    }
    acc = rank_container_checksum_add(acc, w->crc[i]);
  }
  for (int i = 0; i < w->tok_n; i++) acc = rank_container_checksum_add(acc, w->tok_crc[i]);
  if (rc == SP_OK) rc = rank_container_out_commit(&w->out, acc);
  t5_model_writer_abort(w);
  return rc;
}

void t5_model_writer_abort(t5_model_writer *w) {
  if (!w) return;
  if (w->part_d >= 0) H5Dclose(w->part_d);
  rank_h5_out_abort(&w->out);
  free(w->bf);
  free(w);
}
