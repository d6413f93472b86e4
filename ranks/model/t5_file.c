/* The UMT5 encoder's model file: presets, synthetic weights, the validating
 * reader (see t5_file.h). Validation and weight reads go through the
 * container shared with the DiT's and the VAE's files (model_container.h). */
#include "t5_file.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "container_io.h"
#include "crc32c.h"
#include "h5_util.h"
#include "log.h"
#include "model_container.h"
#include "model_file.h"
#include "synth.h"
#include "t5_file_impl.h"

struct t5_model {
  t5_model_info info;
  rank_table_reader file;
  int count;        /* table entries */
  tok_model *tok;   /* NULL for synth: */
  uint16_t *stage;  /* bf16 staging of one layer */
};

/* ---- presets ------------------------------------------------------------- */

/* umt5-tiny: the published vocabulary (any UMT5 tokenizer fits it) and
 * bucket layout at width 64, 4 heads of 16, feed-forward 160, 2 layers. */
static const struct {
  const char *name;
  umt5_config tiny; /* all zero: the published config */
} presets[] = {
    {"umt5-xxl", {0}},
    {"umt5-tiny", {.vocab = 256384, .dim = 64, .dim_attn = 64, .ffn = 160, .heads = 4,
                   .layers = 2, .buckets = 32, .max_dist = 128}},
};
#define N_PRESETS (sizeof presets / sizeof presets[0])

int t5_preset(const char *name, umt5_config *out) {
  for (size_t i = 0; i < N_PRESETS; i++) {
    if (strcmp(name, presets[i].name) != 0) continue;
    if (presets[i].tiny.dim)
      *out = presets[i].tiny;
    else
      umt5_config_published(out);
    return 0;
  }
  return -1;
}

const char *t5_preset_names(void) {
  static char list[128];
  return model_file_preset_list(list, sizeof list, presets, N_PRESETS, sizeof presets[0]);
}

const char *t5_preset_match(const umt5_config *c) {
  for (size_t i = 0; i < N_PRESETS; i++) {
    umt5_config p;
    t5_preset(presets[i].name, &p);
    if (memcmp(&p, c, sizeof p) == 0) return presets[i].name;
  }
  return NULL;
}

/* ---- config attributes (t5_file_impl.h) ----------------------------------- */

#define CONFIG_FIELDS(X) \
  X(vocab) X(dim) X(dim_attn) X(ffn) X(heads) X(layers) X(buckets) X(max_dist)

void t5_file_dataset_path(const char *name, char *buf, size_t n) {
  snprintf(buf, n, "/%s/%s", T5_FILE_GROUP, name);
}

int t5_file_config_write(hid_t file, const umt5_config *c) {
#define W(f) \
  if (rank_h5_attr_write_num(file, #f, H5T_STD_I64LE, H5T_NATIVE_INT64, &c->f, 1) != 0) return -1;
  CONFIG_FIELDS(W)
#undef W
  return 0;
}

int t5_file_config_read(hid_t file, const char *path, umt5_config *c) {
  memset(c, 0, sizeof *c);
#define R(f)                                                                             \
  if (rank_h5_attr_read_num(file, #f, H5T_NATIVE_INT64, &c->f, 1) != 0) {               \
    sp_log_error("%s: config attribute %s is missing or not one integer", path, #f);    \
    return SP_ERR_INPUT;                                                                 \
  }
  CONFIG_FIELDS(R)
#undef R
  char err[256];
  if (umt5_config_check(c, err, sizeof err) != 0) {
    sp_log_error("%s: %s", path, err);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* ---- synthetic encoders ----------------------------------------------------- */

static void synth_scale(const umt5_config *c, const umt5_tensor *t, double *center,
                        double *half) {
  *center = 0.0;
  if (t->ndim == 1) { /* norm weights */
    *center = 1.0;
    *half = 0.1;
  } else if (t->layer < 0) { /* token embedding */
    *half = 1.0;
  } else if (t->slot == 9) { /* position table */
    *half = 0.5;
  } else if (t->slot == 1) { /* q: Wan's init std (dim * dim_attn)^-1/2 scaled by heads */
    *half = sqrt(3.0 / ((double)t->shape[1] * (double)(c->dim_attn / c->heads)));
  } else {
    *half = sqrt(3.0 / (double)t->shape[1]);
  }
}

/* Elements [first, first + n) of tensor t into dst. */
static void synth_range(const t5_model *m, const umt5_tensor *t, int64_t first, int64_t n,
                        float *dst) {
  uint64_t key = rank_synth_key(m->info.id.seed, t->name);
  double center, half;
  synth_scale(&m->info.config, t, &center, &half);
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; i++)
    dst[i] = (float)(center + half * rank_synth_uniform(key, (uint64_t)(first + i)));
}

static int open_synth(const char *spec, t5_model *m) {
  model_file_id *id = &m->info.id;
  int rc = model_file_id_synth(id, spec, T5_MODEL_ARCH, KERN_DTYPE_F32);
  if (rc == SP_OK && t5_preset(id->preset, &m->info.config) != 0)
    rc = model_file_id_bad_preset(id, "text encoder ", t5_preset_names());
  return rc;
}

/* ---- the tokenizer group ------------------------------------------------------ */

static const char *const tok_names[T5_TOK_DATASETS] = {"piece_bytes", "piece_offsets", "scores",
                                                       "types", "charsmap"};

/* One tokenizer dataset: 1-D, of the given class and element size, at most
 * max elements; read whole into a malloc'd *data, its CRC checked. */
static int tok_ds_read(hid_t g, const char *path, int idx, H5T_class_t cls, size_t esize,
                       hid_t mtype, uint64_t max, void **data, uint64_t *count, uint32_t *crc) {
  const char *name = tok_names[idx];
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
  if (why) sp_log_error("%s: /%s/%s %s", path, T5_TOK_GROUP, name, why);
  free(buf);
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
  if (d >= 0) H5Dclose(d);
  return rc;
}

static int tok_read(hid_t f, const char *path, t5_model *m, uint32_t *acc) {
  hid_t g = H5Gopen2(f, "/" T5_TOK_GROUP, H5P_DEFAULT);
  if (g < 0) {
    sp_log_error("%s: group /%s is missing", path, T5_TOK_GROUP);
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
      sp_log_error("%s: /%s attribute %s is missing or out of range", path, T5_TOK_GROUP, attr[i]);
      rc = SP_ERR_INPUT;
    }
  }
  int has_map = H5Lexists(g, "charsmap", H5P_DEFAULT) > 0;
  const char *members[T5_TOK_DATASETS];
  for (int i = 0; i < T5_TOK_DATASETS; i++) members[i] = tok_names[i];
  if (rc == SP_OK)
    rc = rank_container_check_members(f, path, "/" T5_TOK_GROUP, members,
                                      has_map ? T5_TOK_DATASETS : T5_TOK_DATASETS - 1);
  uint64_t n[T5_TOK_DATASETS] = {0};
  uint32_t crc[T5_TOK_DATASETS] = {0};
  void *p[T5_TOK_DATASETS] = {0};
  if (rc == SP_OK)
    rc = tok_ds_read(g, path, 0, H5T_INTEGER, 1, H5T_NATIVE_UINT8, TOK_MAX_VOCAB_BYTES, &p[0],
                     &n[0], &crc[0]);
  if (rc == SP_OK)
    rc = tok_ds_read(g, path, 1, H5T_INTEGER, 4, H5T_NATIVE_UINT32, TOK_MAX_PIECES + 1, &p[1],
                     &n[1], &crc[1]);
  if (rc == SP_OK)
    rc = tok_ds_read(g, path, 2, H5T_FLOAT, 4, H5T_NATIVE_FLOAT, TOK_MAX_PIECES, &p[2], &n[2],
                     &crc[2]);
  if (rc == SP_OK)
    rc = tok_ds_read(g, path, 3, H5T_INTEGER, 1, H5T_NATIVE_UINT8, TOK_MAX_PIECES, &p[3], &n[3],
                     &crc[3]);
  if (rc == SP_OK && has_map)
    rc = tok_ds_read(g, path, 4, H5T_INTEGER, 1, H5T_NATIVE_UINT8, TOK_MAX_CHARSMAP_BYTES, &p[4],
                     &n[4], &crc[4]);
  H5Gclose(g);
  if (rc == SP_OK && (n[1] != n[2] + 1 || n[3] != n[2])) {
    sp_log_error("%s: /%s: piece_offsets (%llu), scores (%llu) and types (%llu) disagree on the "
                 "piece count",
                 path, T5_TOK_GROUP, (unsigned long long)n[1], (unsigned long long)n[2],
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
      sp_log_error("%s: /%s: piece_offsets end at %u, piece_bytes holds %llu bytes", path,
                   T5_TOK_GROUP, ((uint32_t *)p[1])[s.n_pieces], (unsigned long long)n[0]);
      rc = SP_ERR_INPUT;
    }
  }
  if (rc == SP_OK) {
    char err[256];
    if (tok_model_create(&s, &m->tok, err, sizeof err) != 0) {
      sp_log_error("%s: /%s: %s", path, T5_TOK_GROUP, err);
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

/* ---- validating reader ----------------------------------------------------- */

static int open_file(const char *path, t5_model *m) {
  t5_model_info *in = &m->info;
  uint32_t acc = 0;
  hid_t f;
  int rc = rank_container_open_id(path, T5_MODEL_ARCH, &in->id, NULL, &f);
  if (rc != SP_OK) return rc;
  if ((rc = t5_file_config_read(f, path, &in->config)) != SP_OK) goto done;
  if ((rc = rank_container_check_links(f, path)) != SP_OK) goto done;
  const char *root_names[] = {T5_FILE_GROUP, T5_TOK_GROUP};
  if ((rc = rank_container_check_members(f, path, "/", root_names, 2)) != SP_OK) goto done;
  const umt5_config *c = &in->config;
  m->count = umt5_table_count(c);
  umt5_tensor *t = sp_xcalloc((size_t)m->count, sizeof *t);
  rank_container_tensor *ct = sp_xcalloc((size_t)m->count, sizeof *ct);
  for (int i = 0; i < m->count; i++) {
    umt5_table_entry(c, i, &t[i]);
    ct[i] = (rank_container_tensor){t[i].name, t[i].ndim, t[i].shape, t[i].numel};
  }
  rc = rank_container_check_tensors(f, path, T5_FILE_GROUP, in->id.dtype, m->count, ct,
                                    &m->file.offset, &m->file.crc, &acc);
  free(ct);
  free(t);
  if (rc == SP_OK) rc = tok_read(f, path, m, &acc);
done:
  return rank_table_reader_end(&m->file, f, path, in->id.checksum, acc, rc);
}

int t5_model_open(const char *spec, int verify, t5_model **out) {
  t5_model *m = sp_xcalloc(1, sizeof *m);
  int synth = rank_table_reader_start(&m->file, &m->info.id, spec, verify);
  int rc = synth ? open_synth(spec, m) : open_file(spec, m);
  if (rc != SP_OK) {
    t5_model_close(m);
    return rc;
  }
  t5_model_info *in = &m->info;
  m->count = umt5_table_count(&in->config);
  model_file_size_set(&in->size, &in->id, m->count, umt5_params(&in->config));
  model_file_id_match(&in->id, t5_preset_match(&in->config));
  if (in->id.dtype == KERN_DTYPE_BF16 && !in->id.synthetic)
    m->stage = sp_xmalloc((size_t)umt5_layer_floats(&in->config) * sizeof *m->stage);
  *out = m;
  return SP_OK;
}

void t5_model_close(t5_model *m) {
  if (!m) return;
  rank_table_reader_close(&m->file);
  tok_model_free(m->tok);
  free(m->stage);
  free(m);
}

const t5_model_info *t5_model_get_info(const t5_model *m) { return &m->info; }
const tok_model *t5_model_tokenizer(const t5_model *m) { return m->tok; }

/* ---- weight reads ------------------------------------------------------------ */

/* Reads count table entries, first at idx[0], into dst[k] (fp32). */
static int read_entries(t5_model *m, int count, const int *idx, float *const *dst) {
  const umt5_config *c = &m->info.config;
  rank_container_f32 r[UMT5_LAYER_TENSORS];
  umt5_tensor t[UMT5_LAYER_TENSORS];
  const char *names[UMT5_LAYER_TENSORS];
  for (int k = 0; k < count; k++) {
    umt5_table_entry(c, idx[k], &t[k]);
    r[k] = (rank_container_f32){m->file.offset[idx[k]], m->file.crc[idx[k]], t[k].numel, dst[k]};
    names[k] = t[k].name;
  }
  return rank_table_reader_read(&m->file, &m->info.id, T5_FILE_GROUP, count, r, names, m->stage);
}

int t5_model_read_layer(t5_model *m, int layer, float *buf) {
  const umt5_config *c = &m->info.config;
  memset(buf, 0, (size_t)umt5_layer_floats(c) * sizeof *buf);
  int idx[UMT5_LAYER_TENSORS];
  float *dst[UMT5_LAYER_TENSORS];
  for (int s = 0; s < UMT5_LAYER_TENSORS; s++) {
    umt5_tensor t;
    idx[s] = 1 + layer * UMT5_LAYER_TENSORS + s;
    umt5_table_entry(c, idx[s], &t);
    dst[s] = buf + t.offset;
    if (m->info.id.synthetic) synth_range(m, &t, 0, t.numel, dst[s]);
  }
  return m->info.id.synthetic ? SP_OK : read_entries(m, UMT5_LAYER_TENSORS, idx, dst);
}

int t5_model_read_norm(t5_model *m, float *out) {
  const umt5_config *c = &m->info.config;
  int idx = m->count - 1;
  if (m->info.id.synthetic) {
    umt5_tensor t;
    umt5_table_entry(c, idx, &t);
    synth_range(m, &t, 0, t.numel, out);
    return SP_OK;
  }
  return read_entries(m, 1, &idx, &out);
}

/* The rows of ids from one row of the stored embedding, widened. */
static void embed_copy_rows(const t5_model *m, const unsigned char *rows, int64_t r0, int64_t nr,
                            const int32_t *ids, int64_t n, float *out) {
  const int64_t D = m->info.config.dim;
  const size_t es = kern_dtype_size(m->info.id.dtype);
  for (int64_t i = 0; i < n; i++) {
    if (ids[i] < r0 || ids[i] >= r0 + nr) continue;
    const unsigned char *src = rows + (size_t)(ids[i] - r0) * (size_t)D * es;
    if (m->info.id.dtype == KERN_DTYPE_BF16)
      for (int64_t d = 0; d < D; d++) {
        uint16_t h;
        memcpy(&h, src + 2 * d, 2);
        out[i * D + d] = kern_bf16_to_f32(h);
      }
    else
      memcpy(out + i * D, src, (size_t)D * 4);
  }
}

static int pread_all(int fd, void *dst, size_t n, uint64_t off) {
  char *p = dst;
  while (n > 0) {
    ssize_t got = pread(fd, p, n, (off_t)off);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return got < 0 ? errno : EIO;
    p += got;
    n -= (size_t)got;
    off += (uint64_t)got;
  }
  return 0;
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
  umt5_tensor t;
  umt5_table_entry(c, 0, &t);
  if (m->info.id.synthetic) {
    for (int64_t i = 0; i < n; i++)
      synth_range(m, &t, (int64_t)ids[i] * c->dim, c->dim, out + i * c->dim);
    return SP_OK;
  }
  const size_t row_bytes = (size_t)c->dim * kern_dtype_size(m->info.id.dtype);
  const rank_table_reader *f = &m->file;
  char ds[128];
  t5_file_dataset_path(t.name, ds, sizeof ds);
  int err = 0;
  if (!f->verify) { /* only the rows needed */
    unsigned char *row = sp_xmalloc(row_bytes);
    for (int64_t i = 0; i < n && !err; i++) {
      err = pread_all(f->fd, row, row_bytes, f->offset[0] + (uint64_t)ids[i] * row_bytes);
      if (!err) embed_copy_rows(m, row, ids[i], 1, ids + i, 1, out + i * c->dim);
    }
    free(row);
    if (err) rank_container_report_read(m->info.id.source, ds, f->crc[0], err, 0);
    return err ? SP_ERR_INPUT : SP_OK;
  }
  /* Verified: the whole table in chunks, checksummed as it passes. */
  const int64_t chunk_rows = (int64_t)((64u << 20) / row_bytes) + 1;
  unsigned char *buf = sp_xmalloc((size_t)chunk_rows * row_bytes);
  uint32_t crc = 0;
  for (int64_t r0 = 0; r0 < c->vocab && !err; r0 += chunk_rows) {
    int64_t nr = c->vocab - r0 < chunk_rows ? c->vocab - r0 : chunk_rows;
    err = pread_all(f->fd, buf, (size_t)nr * row_bytes, f->offset[0] + (uint64_t)r0 * row_bytes);
    if (err) break;
    crc = crc32c(crc, buf, (size_t)nr * row_bytes);
    embed_copy_rows(m, buf, r0, nr, ids, n, out);
  }
  free(buf);
  if (err || crc != f->crc[0]) {
    rank_container_report_read(m->info.id.source, ds, f->crc[0], err, crc);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}
