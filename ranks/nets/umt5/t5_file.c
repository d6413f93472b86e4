/* The UMT5 encoder's model file (see t5_file.h): the model-file layer
 * (mfile.h) with the encoder's schema (umt5_schema.h), the tokenizer group
 * read and checked as hostile input by the layer's hook, and the reads a
 * layer-streamed encode makes. */
#include "t5_file.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "h5_util.h"
#include "log.h"
#include "mfile.h"
#include "model_container.h"
#include "t5_file_impl.h"
#include "umt5_schema.h"

struct t5_model {
  t5_model_info info;
  mfile *f;
  int verify;
  tok_model *tok; /* NULL for a synth: spec of a preset without a built-in one */
};

/* ---- presets (umt5_schema.h) ------------------------------------------------ */

int t5_preset(const char *name, umt5_config *out) { return umt5_schema.preset(name, out); }
const char *t5_preset_names(void) { return umt5_schema.preset_names(); }
const char *t5_preset_match(const umt5_config *c) { return umt5_schema.preset_match(c); }

const char *t5_preset_tokenizer(const char *preset) {
  return strcmp(preset, "umt5-tiny") == 0 ? TOK_BUILTIN_TINY : NULL;
}

/* ---- the tokenizer group ------------------------------------------------------ */

static const char *const tok_names[T5_TOK_DATASETS] = {"piece_bytes", "piece_offsets", "scores",
                                                       "types", "charsmap"};

/* What a tokenizer dataset holds: its class and element size in the file,
 * the memory type it is read as, its most elements. */
typedef struct tok_ds_type {
  H5T_class_t cls;
  size_t esize;
  hid_t mtype;
  uint64_t max;
} tok_ds_type;

/* Tokenizer dataset idx: 1-D, of type t (at most t->max elements); read
 * whole into a malloc'd *data, its CRC checked. */
static int tok_ds_read(hid_t g, const char *path, int idx, const tok_ds_type *t, void **data,
                       uint64_t *count, uint32_t *crc) {
  const char *name = tok_names[idx];
  const H5T_class_t cls = t->cls;
  const size_t esize = t->esize;
  const hid_t mtype = t->mtype;
  const uint64_t max = t->max;
  hid_t d = -1, type = -1, space = -1;
  int rc = SP_ERR_INPUT;
  const char *why = NULL;
  hsize_t n = 0;
  uint32_t want = 0;
  void *buf = NULL;
  if ((d = H5Dopen2(g, name, H5P_DEFAULT)) < 0) {
    why = "is missing or not a dataset";
    goto done;
  }
  if ((type = H5Dget_type(d)) < 0 || H5Tget_class(type) != cls || H5Tget_size(type) != esize) {
    why = "has the wrong element type";
    goto done;
  }
  if ((space = H5Dget_space(d)) < 0 || H5Sget_simple_extent_ndims(space) != 1 ||
      H5Sget_simple_extent_dims(space, &n, NULL) != 1 || n < 1 || n > max) {
    why = "is not 1-D with a count in range";
    goto done;
  }
  if (rank_h5_attr_read_num(d, "checksum", H5T_NATIVE_UINT32, &want, 1) != 0) {
    why = "checksum attribute is missing";
    goto done;
  }
  buf = sp_xmalloc((size_t)n * esize);
  if (H5Dread(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
    why = "cannot be read";
    goto done;
  }
  if (crc32c(0, buf, (size_t)n * esize) != want) {
    why = "checksum mismatch: the file is damaged";
    goto done;
  }
  *data = buf;
  buf = NULL;
  *count = n;
  *crc = want;
  rc = SP_OK;
done:
  if (why) sp_log_error("%s: %s/%s %s", path, UMT5_TOK_GROUP, name, why);
  free(buf);
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
  if (d >= 0) H5Dclose(d);
  return rc;
}

/* The layer's read hook (mfile_hooks): the tokenizer group into the
 * model's tokenizer, its datasets' CRCs folded into *acc. */
static int tok_read(void *ctx, hid_t f, const char *path, uint32_t *acc) {
  t5_model *m = ctx;
  hid_t g = H5Gopen2(f, UMT5_TOK_GROUP, H5P_DEFAULT);
  if (g < 0) {
    sp_log_error("%s: group %s is missing", path, UMT5_TOK_GROUP);
    return SP_ERR_INPUT;
  }
  tok_spec s = {0};
  int64_t a[8];
  static const char *const attr[8] = {"unk_id", "eos_id", "pad_id", "bos_id", "add_dummy_prefix",
                                      "remove_extra_whitespaces", "escape_whitespaces",
                                      "byte_fallback"};
  int rc = SP_OK;
  for (int i = 0; i < 8 && rc == SP_OK; i++) {
    if (rank_h5_attr_read_num(g, attr[i], H5T_NATIVE_INT64, &a[i], 1) != 0 ||
        a[i] < (i < 4 ? -1 : 0) || a[i] > (i < 4 ? TOK_MAX_PIECES : 1)) {
      sp_log_error("%s: %s attribute %s is missing or out of range", path, UMT5_TOK_GROUP, attr[i]);
      rc = SP_ERR_INPUT;
    }
  }
  int has_map = H5Lexists(g, "charsmap", H5P_DEFAULT) > 0;
  const char *members[T5_TOK_DATASETS];
  for (int i = 0; i < T5_TOK_DATASETS; i++) members[i] = tok_names[i];
  if (rc == SP_OK)
    rc = rank_container_check_members(f, path, UMT5_TOK_GROUP, members,
                                      has_map ? T5_TOK_DATASETS : T5_TOK_DATASETS - 1);
  uint64_t n[T5_TOK_DATASETS] = {0};
  uint32_t crc[T5_TOK_DATASETS] = {0};
  void *p[T5_TOK_DATASETS] = {0};
  /* in tok_names' order; the charsmap is optional */
  const tok_ds_type types[T5_TOK_DATASETS] = {
      {H5T_INTEGER, 1, H5T_NATIVE_UINT8, TOK_MAX_VOCAB_BYTES},
      {H5T_INTEGER, 4, H5T_NATIVE_UINT32, TOK_MAX_PIECES + 1},
      {H5T_FLOAT, 4, H5T_NATIVE_FLOAT, TOK_MAX_PIECES},
      {H5T_INTEGER, 1, H5T_NATIVE_UINT8, TOK_MAX_PIECES},
      {H5T_INTEGER, 1, H5T_NATIVE_UINT8, TOK_MAX_CHARSMAP_BYTES}};
  const int nds = has_map ? T5_TOK_DATASETS : T5_TOK_DATASETS - 1;
  for (int i = 0; i < nds && rc == SP_OK; i++)
    rc = tok_ds_read(g, path, i, &types[i], &p[i], &n[i], &crc[i]);
  H5Gclose(g);
  if (rc == SP_OK && (n[1] != n[2] + 1 || n[3] != n[2])) {
    sp_log_error("%s: %s: piece_offsets (%llu), scores (%llu) and types (%llu) disagree on the "
                 "piece count",
                 path, UMT5_TOK_GROUP, (unsigned long long)n[1], (unsigned long long)n[2],
                 (unsigned long long)n[3]);
    rc = SP_ERR_INPUT;
  }
  if (rc == SP_OK) {
    s.n_pieces = (int32_t)n[2];
    s.piece_bytes = p[0];
    s.piece_offsets = p[1];
    s.scores = p[2];
    s.types = p[3];
    s.charsmap = p[4];
    s.charsmap_bytes = (uint32_t)n[4];
    s.unk_id = (int32_t)a[0];
    s.eos_id = (int32_t)a[1];
    s.pad_id = (int32_t)a[2];
    s.bos_id = (int32_t)a[3];
    s.add_dummy_prefix = (uint8_t)a[4];
    s.remove_extra_whitespaces = (uint8_t)a[5];
    s.escape_whitespaces = (uint8_t)a[6];
    s.byte_fallback = (uint8_t)a[7];
    /* The offsets must describe the blob that was stored. */
    if (((uint32_t *)p[1])[s.n_pieces] != n[0]) {
      sp_log_error("%s: %s: piece_offsets end at %u, piece_bytes holds %llu bytes", path,
                   UMT5_TOK_GROUP, ((uint32_t *)p[1])[s.n_pieces], (unsigned long long)n[0]);
      rc = SP_ERR_INPUT;
    }
  }
  if (rc == SP_OK) {
    char err[256];
    if (tok_model_create(&s, &m->tok, err, sizeof err) != 0) {
      sp_log_error("%s: %s: %s", path, UMT5_TOK_GROUP, err);
      rc = SP_ERR_INPUT;
    }
  }
  for (int i = 0; i < T5_TOK_DATASETS; i++) free(p[i]);
  if (rc != SP_OK) return rc;
  for (int i = 0; i < T5_TOK_DATASETS; i++)
    if (i < T5_TOK_DATASETS - 1 || has_map) *acc = rank_container_checksum_add(*acc, crc[i]);
  m->info.tok_pieces = s.n_pieces;
  return SP_OK;
}

/* ---- the handle ------------------------------------------------------------- */

int t5_model_open(const char *spec, int verify, t5_model **out) {
  t5_model *m = sp_xcalloc(1, sizeof *m);
  const mfile_hooks hooks = {tok_read, NULL, "the tokenizer", m};
  m->verify = verify;
  int rc = mfile_open(spec, &umt5_schema, &hooks, verify, &m->f);
  if (rc != SP_OK) {
    t5_model_close(m);
    return rc;
  }
  t5_model_info *in = &m->info;
  in->config = *(const umt5_config *)mfile_config(m->f);
  in->id = *mfile_id(m->f);
  const char *builtin = in->id.synthetic ? t5_preset_tokenizer(in->id.preset) : NULL;
  if (builtin) {
    if ((rc = tok_model_builtin(builtin, &m->tok)) != SP_OK) {
      t5_model_close(m);
      return rc;
    }
    in->tok_pieces = tok_model_spec(m->tok)->n_pieces;
  }
  model_file_size_set(&in->size, &in->id, mfile_count(m->f), umt5_params(&in->config));
  mfile_keep_stage(m->f); /* a layer after another, each widened from bf16 */
  *out = m;
  return SP_OK;
}

void t5_model_close(t5_model *m) {
  if (!m) return;
  mfile_close(m->f);
  tok_model_free(m->tok);
  free(m);
}

const t5_model_info *t5_model_get_info(const t5_model *m) { return &m->info; }
const tok_model *t5_model_tokenizer(const t5_model *m) { return m->tok; }

int t5_model_verify(t5_model *m, uint64_t *bytes) { return mfile_verify(m->f, bytes); }

/* ---- weight reads ------------------------------------------------------------ */

int t5_model_read_layer(t5_model *m, int layer, float *buf) {
  const umt5_config *c = &m->info.config;
  memset(buf, 0, (size_t)umt5_layer_floats(c) * sizeof *buf);
  mfile_dst d[UMT5_LAYER_TENSORS];
  for (int s = 0; s < UMT5_LAYER_TENSORS; s++) {
    umt5_tensor t;
    const int i = 1 + layer * UMT5_LAYER_TENSORS + s;
    umt5_table_entry(c, i, &t);
    d[s] = (mfile_dst){i, buf + t.offset, 1, NULL};
  }
  return mfile_read(m->f, UMT5_LAYER_TENSORS, d, NULL);
}

int t5_model_read_norm(t5_model *m, float *out) {
  const mfile_dst d = {mfile_count(m->f) - 1, out, 1, NULL};
  return mfile_read(m->f, 1, &d, NULL);
}

/* The rows of ids a verified read of the whole embedding meets. */
typedef struct embed_pick {
  const int32_t *ids;
  int64_t n, dim;
  float *out;
} embed_pick;

static int pick_rows(void *ctx, int64_t row0, int64_t nrows, const float *v) {
  const embed_pick *p = ctx;
  for (int64_t i = 0; i < p->n; i++)
    if (p->ids[i] >= row0 && p->ids[i] < row0 + nrows)
      memcpy(p->out + i * p->dim, v + (p->ids[i] - row0) * p->dim, (size_t)p->dim * sizeof(float));
  return SP_OK;
}

int t5_model_read_embed(t5_model *m, const int32_t *ids, int64_t n, float *out) {
  const umt5_config *c = &m->info.config;
  for (int64_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= c->vocab) {
      sp_log_error("%s: token id %d is outside the encoder's vocabulary of %lld (a tokenizer "
                   "larger than the model)",
                   m->info.id.source, ids[i], (long long)c->vocab);
      return SP_ERR_INPUT;
    }
  }
  if (m->verify && !m->info.id.synthetic) { /* the whole table, checksummed as it passes */
    embed_pick p = {ids, n, c->dim, out};
    return mfile_scan(m->f, 0, (uint64_t)64 << 20, pick_rows, &p);
  }
  int rc = SP_OK;
  for (int64_t i = 0; i < n && rc == SP_OK; i++) /* only the rows needed */
    rc = mfile_read_rows(m->f, 0, ids[i], 1, out + i * c->dim);
  return rc;
}
