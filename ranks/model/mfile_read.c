/* The model-file layer's reads (see mfile.h): tensors as stored or
 * widened to fp32, rows of one, a whole tensor streamed in pieces, the
 * verification of every tensor; a synthetic model's generated instead. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crc32c.h"
#include "log.h"
#include "mfile_impl.h"
#include "model_container.h"
#include "synth.h"

/* ---- synthetic values ----------------------------------------------------- */

void mfile_synth_values(const net_tensor *t, uint64_t seed, int64_t first, int64_t n,
                        kern_dtype dtype, void *dst) {
  char key[sizeof t->key + 32];
  snprintf(key, sizeof key, "%s%s", t->synth_prefix, t->key);
  const uint64_t k = rank_synth_key(seed, key);
  const double c = t->synth_center, h = t->synth_half;
  if (dtype == KERN_DTYPE_F32) {
    float *out = dst;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++)
      out[i] = (float)(c + h * rank_synth_uniform(k, (uint64_t)(first + i)));
  } else {
    uint16_t *out = dst;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++)
      out[i] = kern_f32_to_bf16((float)(c + h * rank_synth_uniform(k, (uint64_t)(first + i))));
  }
}

/* ---- reads ------------------------------------------------------------------- */

/* Room for bytes of staging: the kept buffer, or a fresh one (*own). */
static void *stage_get(mfile *m, size_t bytes, void **own) {
  *own = NULL;
  if (!m->keep_stage) return *own = sp_xmalloc(bytes ? bytes : 1);
  if (bytes > m->stage_bytes) {
    free(m->stage);
    m->stage = sp_xmalloc(bytes);
    m->stage_bytes = bytes;
  }
  return m->stage;
}

void mfile_keep_stage(mfile *m) { m->keep_stage = 1; }

/* The scales of tensor i, finite and positive, else one line naming the
 * scale dataset and the channel. */
static int check_scales(const mfile *m, int i, const float *scale) {
  const net_tensor *t = &m->t[i];
  const int64_t o = mfile_bad_scale(scale, mfile_tensor_rows(t));
  if (o < 0) return SP_OK;
  char ds[NET_PATH_MAX + NET_NAME_MAX + 16], sds[sizeof ds + 8];
  mfile_tensor_path(t, ds, sizeof ds);
  mfile_scale_path(ds, sds, sizeof sds);
  sp_log_error("%s: %s: the scale of output channel %lld is %g: each scale must be finite and "
               "positive", m->id.source, sds, (long long)o, (double)scale[o]);
  return SP_ERR_INPUT;
}

/* The datasets of the n tensors (and the scales of scaled formats) read
 * to raw[k] and scale[k] with their checksums. */
static int read_raw(mfile *m, int n, const mfile_dst *d, void *const *raw, float *const *scale,
                    uint64_t *bytes_read) {
  rank_container_read *r = sp_xmalloc((size_t)(2 * n + 1) * sizeof *r);
  int *of = sp_xmalloc((size_t)(2 * n + 1) * sizeof *of), nr = 0;
  for (int k = 0; k < n; k++) {
    const mfile_loc *l = &m->loc[d[k].tensor];
    of[nr] = k;
    r[nr++] = (rank_container_read){l->offset, (size_t)l->bytes, raw[k], l->crc};
    if (!scale[k]) continue;
    of[nr] = -1 - k;
    r[nr++] = (rank_container_read){l->scale_offset,
                                    (size_t)mfile_tensor_rows(&m->t[d[k].tensor]) * sizeof(float),
                                    scale[k], l->scale_crc};
  }
  int err_no = 0;
  uint32_t got = 0;
  const int bad = rank_container_pread(m->fd, nr, r, m->verify, &err_no, &got);
  if (bad >= 0) {
    const int k = of[bad] >= 0 ? of[bad] : -1 - of[bad];
    char ds[NET_PATH_MAX + NET_NAME_MAX + 16], sds[sizeof ds + 8];
    mfile_tensor_path(&m->t[d[k].tensor], ds, sizeof ds);
    mfile_scale_path(ds, sds, sizeof sds);
    rank_container_report_read(m->id.source, of[bad] >= 0 ? ds : sds, r[bad].crc, err_no, got);
  } else if (bytes_read) {
    for (int j = 0; j < nr; j++) *bytes_read += r[j].bytes;
  }
  free(of);
  free(r);
  return bad >= 0 ? SP_ERR_INPUT : SP_OK;
}

/* The synthetic tensors: generated in their stored dtype, or fp32. */
static int read_synth(const mfile *m, int n, const mfile_dst *d) {
  for (int k = 0; k < n; k++) {
    const net_tensor *t = &m->t[d[k].tensor];
    const kern_dtype as = d[k].widen ? KERN_DTYPE_F32 : m->loc[d[k].tensor].dtype;
    mfile_synth_values(t, m->id.seed, 0, t->numel, as, d[k].dst);
  }
  return SP_OK;
}

int mfile_read(mfile *m, int n, const mfile_dst *d, uint64_t *bytes_read) {
  if (m->id.synthetic) return read_synth(m, n, d);
  void **raw = sp_xcalloc((size_t)n + 1, sizeof *raw);
  float **scale = sp_xcalloc((size_t)n + 1, sizeof *scale);
  size_t stage = 0, scales = 0;
  for (int k = 0; k < n; k++) {
    const mfile_loc *l = &m->loc[d[k].tensor];
    const mfile_format *f = mfile_format_of(l->dtype);
    if (d[k].widen && l->dtype != KERN_DTYPE_F32) stage += (l->bytes + 63) / 64 * 64;
    if (f->scaled && (d[k].widen || d[k].scale))
      scales += (size_t)mfile_tensor_rows(&m->t[d[k].tensor]);
  }
  void *own;
  char *at = stage_get(m, stage, &own);
  float *sc = sp_xmalloc((scales ? scales : 1) * sizeof *sc), *sat = sc;
  for (int k = 0; k < n; k++) {
    const mfile_loc *l = &m->loc[d[k].tensor];
    const int staged = d[k].widen && l->dtype != KERN_DTYPE_F32;
    raw[k] = staged ? (void *)at : d[k].dst;
    if (staged) at += (l->bytes + 63) / 64 * 64;
    if (mfile_format_of(l->dtype)->scaled && (d[k].widen || d[k].scale)) {
      scale[k] = d[k].widen ? sat : d[k].scale;
      sat += mfile_tensor_rows(&m->t[d[k].tensor]);
    }
  }
  int rc = read_raw(m, n, d, raw, scale, bytes_read);
  for (int k = 0; k < n && rc == SP_OK; k++) {
    const int i = d[k].tensor;
    const mfile_format *f = mfile_format_of(m->loc[i].dtype);
    if (!d[k].widen || f->dtype == KERN_DTYPE_F32) continue;
    if (f->scaled && (rc = check_scales(m, i, scale[k])) != SP_OK) break;
    f->widen(raw[k], scale[k], mfile_tensor_rows(&m->t[i]), mfile_tensor_cols(&m->t[i]), d[k].dst);
  }
  free(own);
  free(sc);
  free(scale);
  free(raw);
  return rc;
}

/* n bytes at off into dst: 0, or the errno of the read (EIO when the file
 * ends first). */
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

/* Rows [row0, row0 + nrows) of tensor i: stored bytes into raw, scales
 * into scale (a scaled format), then widened into dst. *crc (when not
 * NULL) carries the CRC of the stored bytes on. */
static int rows_in(mfile *m, int i, int64_t row0, int64_t nrows, void *raw, float *scale,
                   float *dst, uint32_t *crc) {
  const net_tensor *t = &m->t[i];
  const mfile_loc *l = &m->loc[i];
  const mfile_format *f = mfile_format_of(l->dtype);
  const int64_t cols = mfile_tensor_cols(t);
  if (m->id.synthetic) {
    mfile_synth_values(t, m->id.seed, row0 * cols, nrows * cols, KERN_DTYPE_F32, dst);
    return SP_OK;
  }
  const uint64_t rb = mfile_row_bytes(f, cols);
  int err = pread_all(m->fd, raw, (size_t)(nrows * (int64_t)rb), l->offset + (uint64_t)row0 * rb);
  if (!err && f->scaled)
    err = pread_all(m->fd, scale, (size_t)nrows * sizeof(float),
                    l->scale_offset + (uint64_t)row0 * sizeof(float));
  if (err) {
    char ds[NET_PATH_MAX + NET_NAME_MAX + 16];
    mfile_tensor_path(t, ds, sizeof ds);
    rank_container_report_read(m->id.source, ds, l->crc, err, 0);
    return SP_ERR_INPUT;
  }
  if (crc) *crc = crc32c(*crc, raw, (size_t)(nrows * (int64_t)rb));
  f->widen(raw, scale, nrows, cols, dst);
  return SP_OK;
}

int mfile_read_rows(mfile *m, int i, int64_t row0, int64_t nrows, float *dst) {
  const mfile_format *f = mfile_format_of(m->loc[i].dtype);
  const int64_t cols = mfile_tensor_cols(&m->t[i]);
  void *raw = sp_xmalloc((size_t)(nrows * (int64_t)mfile_row_bytes(f, cols)) + 1);
  float *scale = sp_xmalloc((size_t)nrows * sizeof *scale + 1);
  int rc = rows_in(m, i, row0, nrows, raw, scale, dst, NULL);
  free(scale);
  free(raw);
  return rc;
}

int mfile_scan(mfile *m, int i, uint64_t piece_bytes, mfile_scan_fn fn, void *ctx) {
  const net_tensor *t = &m->t[i];
  const mfile_loc *l = &m->loc[i];
  const mfile_format *f = mfile_format_of(l->dtype);
  const int64_t rows = mfile_tensor_rows(t), cols = mfile_tensor_cols(t);
  const uint64_t rb = mfile_row_bytes(f, cols);
  int64_t per = (int64_t)(piece_bytes / (rb ? rb : 1));
  if (per < 1) per = 1;
  if (per > rows) per = rows;
  float *scale = sp_xmalloc((size_t)rows * sizeof *scale + 1);
  int rc = SP_OK;
  if (f->scaled && !m->id.synthetic) { /* all scales first: checked before any value */
    const size_t sb = (size_t)rows * sizeof *scale;
    const int err = pread_all(m->fd, scale, sb, l->scale_offset);
    const uint32_t got = err ? 0 : crc32c(0, scale, sb);
    if (err || got != l->scale_crc) {
      char ds[NET_PATH_MAX + NET_NAME_MAX + 16], sds[sizeof ds + 8];
      mfile_tensor_path(t, ds, sizeof ds);
      mfile_scale_path(ds, sds, sizeof sds);
      rank_container_report_read(m->id.source, sds, l->scale_crc, err, got);
      rc = SP_ERR_INPUT;
    } else {
      rc = check_scales(m, i, scale);
    }
  }
  void *raw = sp_xmalloc((size_t)(per * (int64_t)rb) + 1);
  float *val = sp_xmalloc((size_t)(per * cols) * sizeof *val + 1);
  uint32_t crc = 0;
  for (int64_t r0 = 0; rc == SP_OK && r0 < rows; r0 += per) {
    const int64_t nr = rows - r0 < per ? rows - r0 : per;
    rc = rows_in(m, i, r0, nr, raw, f->scaled ? scale + r0 : NULL, val, &crc);
    if (rc == SP_OK) rc = fn(ctx, r0, nr, val);
  }
  if (rc == SP_OK && !m->id.synthetic && crc != l->crc) {
    char ds[NET_PATH_MAX + NET_NAME_MAX + 16];
    mfile_tensor_path(t, ds, sizeof ds);
    rank_container_report_read(m->id.source, ds, l->crc, 0, crc);
    rc = SP_ERR_INPUT;
  }
  free(val);
  free(raw);
  free(scale);
  return rc;
}

/* A piece of a verified tensor: every value finite. */
typedef struct finite_ctx {
  const mfile *m;
  int i;
  uint64_t values;
} finite_ctx;

static int finite_piece(void *ctx, int64_t row0, int64_t nrows, const float *v) {
  finite_ctx *c = ctx;
  const net_tensor *t = &c->m->t[c->i];
  const int64_t n = nrows * mfile_tensor_cols(t);
  for (int64_t k = 0; k < n; k++) {
    if (isfinite(v[k])) continue;
    char ds[NET_PATH_MAX + NET_NAME_MAX + 16];
    mfile_tensor_path(t, ds, sizeof ds);
    sp_log_error("%s: %s: element %lld is %s: the weights are not usable", c->m->id.source, ds,
                 (long long)(row0 * mfile_tensor_cols(t) + k), isnan(v[k]) ? "NaN" : "infinite");
    return SP_ERR_INPUT;
  }
  c->values += (uint64_t)n;
  return SP_OK;
}

int mfile_verify(mfile *m, uint64_t *bytes) {
  *bytes = 0;
  if (m->id.synthetic) return SP_OK;
  for (int i = 0; i < m->ntensors; i++) {
    finite_ctx c = {m, i, 0};
    int rc = mfile_scan(m, i, (uint64_t)64 << 20, finite_piece, &c);
    if (rc != SP_OK) return rc;
    *bytes += mfile_stored_bytes(m, i);
  }
  return SP_OK;
}
