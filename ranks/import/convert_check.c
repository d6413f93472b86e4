/* The pieces of the cross-check and the copy that every converter (the
 * DiT's convert.c, convert_t5.c, convert_vae.c) shares: key parsing, the
 * checkpoint's label, the shape and dtype checks with their messages, the
 * end of the cross-check, and the read of source elements as fp32 with the
 * refusal of non-finite weights (convert_impl.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert_impl.h"
#include "log.h"

int rank_convert_has_prefix(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

const char *rank_convert_parse_index(const char *p, int64_t *v) {
  int64_t x = 0;
  int nd = 0;
  while (*p >= '0' && *p <= '9') {
    if (nd == 3) return NULL;
    x = x * 10 + (*p++ - '0');
    nd++;
  }
  if (nd == 0 || *p != '.' || (nd > 1 && p[-nd] == '0')) return NULL;
  *v = x;
  return p + 1;
}

void rank_convert_label(rank_st_file *const *f, int nf, char *buf, size_t n) {
  if (nf == 1)
    snprintf(buf, n, "%s", f[0]->path);
  else
    snprintf(buf, n, "%s (+%d more shards)", f[0]->path, nf - 1);
}

int rank_convert_ckpt_open(int n, char *const *args, rank_convert_ckpt *ck, problems *p) {
  memset(ck, 0, sizeof *ck);
  int rc = rank_convert_inputs_open(n, args, &ck->in, &ck->f, &ck->nf);
  if (rc != SP_OK) return rc;
  rank_convert_check_index(&ck->in, ck->f, ck->nf, p);
  rank_convert_label(ck->f, ck->nf, ck->label, sizeof ck->label);
  for (int s = 0; s < ck->nf; s++) ck->nsrc += ck->f[s]->h.count;
  ck->src = sp_xcalloc((size_t)ck->nsrc + 1, sizeof *ck->src);
  int k = 0;
  for (int s = 0; s < ck->nf; s++) {
    for (int i = 0; i < ck->f[s]->h.count; i++, k++) {
      ck->src[k].file = ck->f[s];
      ck->src[k].t = &ck->f[s]->h.t[i];
    }
  }
  return SP_OK;
}

void rank_convert_ckpt_close(rank_convert_ckpt *ck) {
  free(ck->src);
  rank_convert_inputs_close(&ck->in, ck->f, ck->nf);
  memset(ck, 0, sizeof *ck);
}

const rank_convert_src *rank_convert_ckpt_find(const rank_convert_ckpt *ck, const char *name) {
  for (int i = 0; i < ck->nsrc; i++)
    if (strcmp(ck->src[i].name, name) == 0) return &ck->src[i];
  return NULL;
}

int rank_convert_ckpt_claim(const rank_convert_ckpt *ck, int *slot, int ti, int i, problems *p) {
  if (slot[ti] < 0) {
    slot[ti] = i;
    return 0;
  }
  const rank_convert_src *s = &ck->src[i], *o = &ck->src[slot[ti]];
  rank_convert_problem(p, "%s: tensor '%s': duplicate of '%s' in %s", s->file->path, s->t->name,
                       o->t->name, o->file->path);
  return -1;
}

void rank_convert_shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
  size_t o = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && o < n; i++)
    o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (o < n) snprintf(buf + o, n - o, "]");
}

void rank_convert_check_shape(const char *path, const rank_st_tensor *t, int ndim,
                              const int64_t *shape, problems *p) {
  int same = t->ndim == ndim;
  for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
  if (same) return;
  char sh[128], want[128];
  rank_convert_shape_str(t->ndim, t->shape, sh, sizeof sh);
  rank_convert_shape_str(ndim, shape, want, sizeof want);
  rank_convert_problem(p, "%s: tensor '%s': shape %s, the inferred config needs %s", path, t->name,
                       sh, want);
}

void rank_convert_check_dtype(const char *path, const rank_st_tensor *t, const rank_st_dtype *ok,
                              int nok, problems *p) {
  char names[128] = "";
  for (int i = 0; i < nok; i++) {
    if (t->dtype == ok[i]) return;
    size_t o = strlen(names);
    snprintf(names + o, sizeof names - o, "%s%s", i ? ", " : "", rank_st_dtype_name(ok[i]));
  }
  rank_convert_problem(p, "%s: tensor '%s': dtype %s is not supported (%s)", path, t->name,
                       rank_st_dtype_name(t->dtype), names);
}

int rank_convert_config_verdict(int check, const char *err, const char *label, problems *p) {
  if (check == 0) return 0;
  rank_convert_problem(p, "%s: inferred config is not supported: %s", label, err);
  return -1;
}

int rank_convert_problems_end(const problems *p, const char *out_path) {
  if (p->count == 0) return SP_OK;
  if (p->count > PROBLEM_LOG_CAP)
    sp_log_error("... %ld more problems not shown", p->count - PROBLEM_LOG_CAP);
  sp_log_error("%s: not converted: %ld problem(s) with the checkpoint; nothing written", out_path,
               p->count);
  return SP_ERR_INPUT;
}

void rank_convert_to_f32(rank_st_dtype dt, const unsigned char *src, float scale, float *dst,
                         size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint16_t h;
    switch (dt) {
    case RANK_ST_F32: memcpy(&dst[i], src + 4 * i, 4); break;
    case RANK_ST_F16: memcpy(&h, src + 2 * i, 2); dst[i] = kern_f16_to_f32(h); break;
    case RANK_ST_BF16: memcpy(&h, src + 2 * i, 2); dst[i] = kern_bf16_to_f32(h); break;
    case RANK_ST_F8_E4M3: dst[i] = kern_fp8_e4m3_to_f32(src[i]) * scale; break;
    default: dst[i] = rank_convert_e5m2_to_f32(src[i]) * scale; break;
    }
  }
}

int rank_convert_read_f32(const rank_st_file *file, const rank_st_tensor *t, int64_t at, int64_t n,
                          float scale, unsigned char *raw, float *f) {
  const size_t esz = rank_st_dtype_size(t->dtype);
  int rc = rank_st_read(file, t, (uint64_t)at * esz, raw, (size_t)n * esz);
  if (rc != SP_OK) return rc;
  rank_convert_to_f32(t->dtype, raw, scale, f, (size_t)n);
  for (int64_t k = 0; k < n; k++) {
    if (!isfinite(f[k])) {
      sp_log_error("%s: tensor '%s': element %lld is %s; a checkpoint with non-finite weights "
                   "is not converted",
                   file->path, t->name, (long long)(at + k), isnan(f[k]) ? "NaN" : "infinite");
      return SP_ERR_INPUT;
    }
  }
  return SP_OK;
}
