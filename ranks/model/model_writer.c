/* The model file's writer (see model_file.h): a temporary file beside the
 * final path, contiguous datasets with their checksum attributes, the model
 * checksum over them all at commit, then the rename. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "container_io.h"
#include "h5_util.h"
#include "log.h"
#include "model_container.h"
#include "model_file_impl.h"
#include "wan_weights.h"

struct rank_model_writer {
  rank_h5_out out;
  wan_config config;
  kern_dtype dtype; /* of every tensor but an fp8 file's linear weights */
  int fp8;          /* an fp8 file (MODEL.md "fp8 weights") */
  wan_layout layout[3];
  int experts;     /* 1 or 2 */
  uint32_t *crc;   /* per expert, instance and tensor (rank_model_slot) */
  uint8_t *done;   /* written flags, same indexing */
};

int rank_model_writer_open(const char *path, const wan_config *c, kern_dtype dtype,
                           const char *preset, rank_model_writer **out) {
  return rank_model_writer_open_experts(path, c, dtype, preset, NULL, out);
}

/* The groups of one expert under pre ("" or "/experts/high"). */
static int create_groups(hid_t file, const wan_config *c, const char *pre) {
  char name[96];
  const char *groups[] = {"embed", "blocks", "head"};
  for (int i = 0; i < 3; i++) {
    snprintf(name, sizeof name, "%s/%s", pre, groups[i]);
    if (rank_h5_group_create(file, name) != 0) return -1;
  }
  for (int b = 0; b < (int)c->layers; b++) {
    snprintf(name, sizeof name, "%s/blocks/%04d", pre, b);
    if (rank_h5_group_create(file, name) != 0) return -1;
  }
  return 0;
}

/* A two-expert file's root: experts = 2 and the run's defaults. */
static int write_experts(hid_t file, const rank_model_experts *x) {
  const int64_t count = x->count, steps = x->steps;
  struct {
    const char *name;
    const double *v;
  } d[] = {{"boundary", &x->boundary}, {"cfg_high", &x->cfg[0]}, {"cfg_low", &x->cfg[1]},
           {"shift", &x->shift}};
  if (rank_h5_attr_write_num(file, "experts", H5T_STD_I64LE, H5T_NATIVE_INT64, &count, 1) != 0 ||
      rank_h5_attr_write_num(file, "steps", H5T_STD_I64LE, H5T_NATIVE_INT64, &steps, 1) != 0)
    return -1;
  for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
    if (rank_h5_attr_write_num(file, d[i].name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, d[i].v, 1) != 0)
      return -1;
  if (rank_h5_group_create(file, "/experts") != 0) return -1;
  for (int e = 0; e < 2; e++) {
    char pre[32];
    snprintf(pre, sizeof pre, "/experts/%s", rank_model_expert_name(2, e));
    if (rank_h5_group_create(file, pre) != 0) return -1;
  }
  return 0;
}

int rank_model_writer_open_experts(const char *path, const wan_config *c, kern_dtype dtype,
                                   const char *preset, const rank_model_experts *x,
                                   rank_model_writer **out) {
  char err[256];
  const rank_model_experts one = {.count = 1};
  if (!x) x = &one;
  if (wan_config_check(c, err, sizeof err) != 0 ||
      rank_model_experts_check(x, err, sizeof err) != 0) {
    sp_log_error("%s: %s", path, err);
    return SP_ERR_INPUT;
  }
  rank_model_writer *w = sp_xcalloc(1, sizeof *w);
  w->config = *c;
  w->fp8 = dtype == KERN_DTYPE_E4M3;
  w->dtype = w->fp8 ? KERN_DTYPE_BF16 : dtype;
  w->experts = x->count;
  for (int g = 0; g < 3; g++) wan_layout_make(c, (wan_group)g, w->dtype, &w->layout[g]);
  size_t slots = (size_t)w->experts * (size_t)rank_model_instances(c) * WAN_MAX_TENSORS;
  w->crc = sp_xcalloc(slots, sizeof *w->crc);
  w->done = sp_xcalloc(slots, 1);
  int rc = rank_container_out_open(&w->out, path, WAN_ARCH, preset, dtype);
  if (rc != SP_OK) {
    rank_model_writer_abort(w);
    return rc;
  }
  hid_t file = w->out.file;
  int ok = 1;
  struct {
    const char *name;
    const int64_t *v;
    hsize_t n;
  } ints[] = {{"dim", &c->dim, 1},           {"ffn_dim", &c->ffn_dim, 1},
              {"heads", &c->heads, 1},       {"layers", &c->layers, 1},
              {"in_dim", &c->in_dim, 1},     {"out_dim", &c->out_dim, 1},
              {"patch", c->patch, 3},        {"text_len", &c->text_len, 1},
              {"text_dim", &c->text_dim, 1}, {"freq_dim", &c->freq_dim, 1}};
  for (size_t i = 0; ok && i < sizeof ints / sizeof ints[0]; i++)
    ok = rank_h5_attr_write_num(file, ints[i].name, H5T_STD_I64LE, H5T_NATIVE_INT64, ints[i].v,
                                ints[i].n) == 0;
  ok = ok &&
       rank_h5_attr_write_num(file, "eps", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &c->eps, 1) == 0;
  if (ok && w->experts == 1) {
    ok = create_groups(file, c, "") == 0;
  } else if (ok) {
    ok = write_experts(file, x) == 0;
    for (int e = 0; ok && e < w->experts; e++) {
      char pre[32];
      snprintf(pre, sizeof pre, "/experts/%s", rank_model_expert_name(w->experts, e));
      ok = create_groups(file, c, pre) == 0;
    }
  }
  if (!ok) {
    rc = rank_container_out_fail(&w->out, "cannot write the root attributes and groups");
    rank_model_writer_abort(w);
    return rc;
  }
  *out = w;
  return SP_OK;
}

int rank_model_writer_attr(rank_model_writer *w, const char *key, const char *value) {
  return rank_container_out_meta(&w->out, key, value);
}

int rank_model_writer_put(rank_model_writer *w, wan_group g, int block, const char *name,
                          const void *data, size_t bytes) {
  return rank_model_writer_put_expert(w, 0, g, block, name, data, bytes);
}

/* 1 when tensor i of group g is stored in e4m3 (an fp8 file's linear). */
static int is_fp8(const rank_model_writer *w, wan_group g, int i) {
  return w->fp8 && g == WAN_GROUP_BLOCK && wan_block_linear_of(i) >= 0;
}

/* The table index of tensor name of group g for expert e, with its
 * dataset path; -1 after one line when there is none. */
static int find_tensor(rank_model_writer *w, int e, wan_group g, int block, const char *name,
                       char *path, size_t n) {
  if (e < 0 || e >= w->experts) {
    sp_log_error("%s: expert %d of a model of %d", w->out.path, e, w->experts);
    return -1;
  }
  rank_model_expert_path(w->experts, e, g, block, name, path, n);
  int i = wan_layout_find(&w->layout[g], name);
  if (i < 0 || (g == WAN_GROUP_BLOCK && (block < 0 || block >= w->config.layers))) {
    sp_log_error("%s: %s is not a tensor of this model", w->out.path, path);
    return -1;
  }
  return i;
}

/* One dataset into the crc slot given, once. */
static int write_one(rank_model_writer *w, const char *path, size_t slot, kern_dtype dt, int ndim,
                     const int64_t *shape, const void *data, size_t bytes) {
  if (w->done[slot]) {
    sp_log_error("%s: %s written twice", w->out.path, path);
    return SP_ERR_INPUT;
  }
  int rc = rank_container_out_dataset(&w->out, path, dt, ndim, shape, data, bytes, &w->crc[slot]);
  if (rc == SP_OK) w->done[slot] = 1;
  return rc;
}

int rank_model_writer_put_expert(rank_model_writer *w, int e, wan_group g, int block,
                                 const char *name, const void *data, size_t bytes) {
  char path[256];
  const int i = find_tensor(w, e, g, block, name, path, sizeof path);
  if (i < 0) return SP_ERR_INPUT;
  const wan_tensor *t = &w->layout[g].t[i];
  if (is_fp8(w, g, i)) {
    sp_log_error("%s: %s: an fp8 file's linear weight is written with its scales "
                 "(rank_model_writer_put_fp8)", w->out.path, path);
    return SP_ERR_INPUT;
  }
  if (bytes != t->bytes) {
    sp_log_error("%s: %s: %zu bytes given, the table needs %zu", w->out.path, path, bytes,
                 t->bytes);
    return SP_ERR_INPUT;
  }
  return write_one(w, path, rank_model_slot(&w->config, e, g, block, i), w->dtype, t->ndim,
                   t->shape, data, bytes);
}

int rank_model_writer_put_fp8(rank_model_writer *w, int e, int block, const char *name,
                              const uint8_t *q, const float *scale) {
  char path[256], spath[300];
  const int i = find_tensor(w, e, WAN_GROUP_BLOCK, block, name, path, sizeof path);
  if (i < 0) return SP_ERR_INPUT;
  const wan_tensor *t = &w->layout[WAN_GROUP_BLOCK].t[i];
  if (!is_fp8(w, WAN_GROUP_BLOCK, i)) {
    sp_log_error("%s: %s is not stored in fp8 in this file", w->out.path, path);
    return SP_ERR_INPUT;
  }
  const int64_t o = wan_fp8_bad_scale(scale, t->shape[0]);
  if (o >= 0) {
    sp_log_error("%s: %s: the scale of output channel %lld is %g: each scale must be finite "
                 "and positive", w->out.path, path, (long long)o, (double)scale[o]);
    return SP_ERR_INPUT;
  }
  snprintf(spath, sizeof spath, "%s%s", path, WAN_FP8_SCALE_SUFFIX);
  const size_t slot = rank_model_slot(&w->config, e, WAN_GROUP_BLOCK, block, 0);
  const int n = w->layout[WAN_GROUP_BLOCK].count;
  int rc = write_one(w, path, slot + (size_t)i, KERN_DTYPE_E4M3, t->ndim, t->shape, q,
                     (size_t)t->numel);
  if (rc == SP_OK)
    rc = write_one(w, spath, slot + (size_t)(n + wan_block_linear_of(i)), KERN_DTYPE_F32, 1,
                   t->shape, scale, (size_t)t->shape[0] * sizeof(float));
  return rc;
}

int rank_model_writer_put_value(rank_model_writer *w, int e, wan_group g, int block,
                                const char *name, const float *x, void *tmp) {
  char path[256];
  const int i = find_tensor(w, e, g, block, name, path, sizeof path);
  if (i < 0) return SP_ERR_INPUT;
  const wan_tensor *t = &w->layout[g].t[i];
  if (is_fp8(w, g, i)) {
    float *scale = sp_xmalloc((size_t)t->shape[0] * sizeof(float));
    kern_fp8_quantize_rows(x, t->shape[0], t->numel / t->shape[0], tmp, scale);
    int rc = rank_model_writer_put_fp8(w, e, block, name, tmp, scale);
    free(scale);
    return rc;
  }
  if (w->dtype == KERN_DTYPE_F32)
    return rank_model_writer_put_expert(w, e, g, block, name, x, t->bytes);
  kern_f32_to_bf16_n(x, tmp, (size_t)t->numel);
  return rank_model_writer_put_expert(w, e, g, block, name, tmp, t->bytes);
}

int rank_model_writer_is_fp8(const rank_model_writer *w, wan_group g, const char *name) {
  const int i = wan_layout_find(&w->layout[g], name);
  return i >= 0 && is_fp8(w, g, i);
}

int rank_model_writer_commit(rank_model_writer *w) {
  const wan_config *c = &w->config;
  int rc = SP_OK;
  uint32_t model_crc = 0;
  for (int e = 0; e < w->experts && rc == SP_OK; e++)
  for (int g = 0; g < 3 && rc == SP_OK; g++) {
    int nb = g == WAN_GROUP_BLOCK ? (int)c->layers : 1;
    for (int b = 0; b < nb && rc == SP_OK; b++) {
      const wan_layout *l = &w->layout[g];
      for (int i = 0; i < l->count; i++) {
        size_t slot = rank_model_slot(c, e, (wan_group)g, b, i);
        /* an fp8 file: a linear weight's scale (written with it) right after it */
        const size_t scale = is_fp8(w, (wan_group)g, i)
                                 ? rank_model_slot(c, e, (wan_group)g, b, l->count) +
                                       (size_t)wan_block_linear_of(i)
                                 : 0;
        if (!w->done[slot]) {
          char path[256];
          rank_model_expert_path(w->experts, e, (wan_group)g, b, l->t[i].name, path, sizeof path);
          sp_log_error("%s: %s was never written", w->out.path, path);
          rc = SP_ERR_INPUT;
          break;
        }
        model_crc = rank_container_checksum_add(model_crc, w->crc[slot]);
        if (scale) model_crc = rank_container_checksum_add(model_crc, w->crc[scale]);
      }
    }
  }
  if (rc == SP_OK) rc = rank_container_out_commit(&w->out, model_crc);
  rank_model_writer_abort(w);
  return rc;
}

void rank_model_writer_abort(rank_model_writer *w) {
  if (!w) return;
  rank_h5_out_abort(&w->out);
  free(w->crc);
  free(w->done);
  free(w);
}

