/* The T5 file's writer (see t5_file.h): the model-file layer's writer
 * (mfile.h) with the encoder's schema, the tokenizer group written by its
 * hook, one dataset per table tensor under /encoder (the embedding in
 * parts), the model checksum at commit, the rename. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "h5_util.h"
#include "log.h"
#include "mfile.h"
#include "t5_file_impl.h"
#include "umt5_schema.h"

struct t5_model_writer {
  mfile_writer *w;
  umt5_config c;
  char path[4096];
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

/* The layer's write hook (mfile_hooks): the tokenizer spec ctx under
 * /tokenizer. */
static int tok_write(void *ctx, hid_t file, uint32_t *crc, int *n) {
  const tok_spec *t = ctx;
  hid_t g = H5Gcreate2(file, UMT5_TOK_GROUP, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
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

int t5_model_tok_hooks(const char *path, const umt5_config *c, const tok_model *tok,
                       mfile_hooks *h) {
  const tok_spec *ts = tok_model_spec(tok);
  if (ts->n_pieces > c->vocab) {
    sp_log_error("%s: the tokenizer has %d pieces, more than the encoder's vocabulary of %lld",
                 path, ts->n_pieces, (long long)c->vocab);
    return SP_ERR_INPUT;
  }
  *h = (mfile_hooks){NULL, tok_write, "the tokenizer", (void *)ts};
  return SP_OK;
}

int t5_model_writer_open(const char *path, const umt5_config *c, kern_dtype dtype,
                         const char *preset, const tok_model *tok, t5_model_writer **out) {
  char err[256];
  if (umt5_config_check(c, err, sizeof err) != 0) {
    sp_log_error("%s: %s", path, err);
    return SP_ERR_INPUT;
  }
  mfile_hooks hooks;
  int rc = t5_model_tok_hooks(path, c, tok, &hooks);
  if (rc != SP_OK) return rc;
  t5_model_writer *w = sp_xcalloc(1, sizeof *w);
  w->c = *c;
  snprintf(w->path, sizeof w->path, "%s", path);
  rc = mfile_writer_open(path, &umt5_schema, c, kern_dtype_name(dtype), preset, &hooks, &w->w);
  if (rc != SP_OK) {
    free(w);
    return rc;
  }
  *out = w;
  return SP_OK;
}

int t5_model_writer_attr(t5_model_writer *w, const char *key, const char *value) {
  return mfile_writer_meta(w->w, key, value);
}

int t5_model_writer_put_part(t5_model_writer *w, const char *name, const float *data,
                             int64_t first, int64_t count) {
  const int i = umt5_table_find(&w->c, name);
  if (i < 0) {
    sp_log_error("%s: %s is not a tensor of this text encoder", w->path, name);
    return SP_ERR_INPUT;
  }
  return mfile_writer_put(w->w, &(mfile_put){i, KERN_DTYPE_F32, data, first, count, NULL});
}

int t5_model_writer_put(t5_model_writer *w, const char *name, const float *data, int64_t numel) {
  int i = umt5_table_find(&w->c, name);
  if (i >= 0) {
    umt5_tensor t;
    umt5_table_entry(&w->c, i, &t);
    if (numel != t.numel) {
      sp_log_error("%s: %s/%s: %lld values given, the table needs %lld", w->path, UMT5_GROUP,
                   name, (long long)numel, (long long)t.numel);
      return SP_ERR_INPUT;
    }
  }
  return t5_model_writer_put_part(w, name, data, 0, numel);
}

int t5_model_writer_commit(t5_model_writer *w) {
  int rc = mfile_writer_commit(w->w);
  free(w);
  return rc;
}

void t5_model_writer_abort(t5_model_writer *w) {
  if (!w) return;
  mfile_writer_abort(w->w);
  free(w);
}
