/* The DiT model file's writer (see model_file.h): the model-file layer's
 * writer (mfile.h) with the DiT's schema, its tensors named by group,
 * block and name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mfile.h"
#include "model_file_impl.h"
#include "synth.h"

struct rank_model_writer {
  mfile_writer *w;
  wan_file_config fc;
  wan_layout layout[3]; /* names, shapes */
  char path[4096];
};

int rank_model_writer_open(const char *path, const wan_config *c, kern_dtype dtype,
                           const char *preset, rank_model_writer **out) {
  return rank_model_writer_open_experts(path, c, dtype, preset, NULL, out);
}

int rank_model_writer_open_experts(const char *path, const wan_config *c, kern_dtype dtype,
                                   const char *preset, const rank_model_experts *x,
                                   rank_model_writer **out) {
  rank_model_writer *w = sp_xcalloc(1, sizeof *w);
  rank_model_file_config(c, x, &w->fc);
  snprintf(w->path, sizeof w->path, "%s", path);
  int rc = mfile_writer_open(path, &wan_schema, &w->fc, rank_model_root_of(dtype), preset, NULL,
                             &w->w);
  if (rc == SP_OK && kern_dtype_size(dtype) == 0) { /* a block format: the linear weights' */
    rc = mfile_writer_set_quant(w->w, dtype);
    if (rc != SP_OK) mfile_writer_abort(w->w);
  }
  if (rc != SP_OK) {
    free(w);
    return rc;
  }
  for (int g = 0; g < 3; g++) wan_layout_make(c, (wan_group)g, KERN_DTYPE_F32, &w->layout[g]);
  *out = w;
  return SP_OK;
}

int rank_model_writer_attr(rank_model_writer *w, const char *key, const char *value) {
  return mfile_writer_meta(w->w, key, value);
}

/* The table index of tensor name of group g for expert e, with its
 * dataset path; -1 after one line when there is none. */
static int find_tensor(const rank_model_writer *w, int e, wan_group g, int block,
                       const char *name, char *path, size_t n) {
  const int ne = (int)w->fc.experts;
  if (e < 0 || e >= ne) {
    sp_log_error("%s: expert %d of a model of %d", w->path, e, ne);
    return -1;
  }
  rank_model_expert_path(ne, e, g, block, name, path, n);
  const int i = wan_layout_find(&w->layout[g], name);
  if (i < 0 || (g == WAN_GROUP_BLOCK && (block < 0 || block >= w->fc.c.layers))) {
    sp_log_error("%s: %s is not a tensor of this model", w->path, path);
    return -1;
  }
  return wan_schema_index(&w->fc, e, g, g == WAN_GROUP_BLOCK ? block : 0, i);
}

int rank_model_writer_put(rank_model_writer *w, wan_group g, int block, const char *name,
                          const void *data, size_t bytes) {
  return rank_model_writer_put_expert(w, 0, g, block, name, data, bytes);
}

int rank_model_writer_put_expert(rank_model_writer *w, int e, wan_group g, int block,
                                 const char *name, const void *data, size_t bytes) {
  char path[256];
  const int i = find_tensor(w, e, g, block, name, path, sizeof path);
  if (i < 0) return SP_ERR_INPUT;
  const kern_dtype f = mfile_writer_format(w->w, i);
  const net_tensor *t = mfile_writer_tensor(w->w, i);
  if (mfile_format_of(f)->scaled) {
    sp_log_error("%s: %s: an %s file's linear weight is written from its values "
                 "(rank_model_writer_put_value)", w->path, path, mfile_format_of(f)->name);
    return SP_ERR_INPUT;
  }
  const size_t want = (size_t)t->numel * kern_dtype_size(f);
  if (bytes != want) {
    sp_log_error("%s: %s: %zu bytes given, the table needs %zu", w->path, path, bytes, want);
    return SP_ERR_INPUT;
  }
  return mfile_writer_put(w->w, &(mfile_put){i, f, data, 0, t->numel, NULL});
}

int rank_model_writer_put_value(rank_model_writer *w, int e, wan_group g, int block,
                                const char *name, const float *x, void *tmp) {
  (void)tmp; /* the layer narrows into its own buffer */
  char path[256];
  const int i = find_tensor(w, e, g, block, name, path, sizeof path);
  if (i < 0) return SP_ERR_INPUT;
  return mfile_writer_put(
      w->w, &(mfile_put){i, KERN_DTYPE_F32, x, 0, mfile_writer_tensor(w->w, i)->numel, NULL});
}

const char *rank_model_root_of(kern_dtype dtype) {
  if (dtype == KERN_DTYPE_E4M3) return "fp8";
  if (dtype == KERN_DTYPE_I8) return "int8";
  return kern_dtype_size(dtype) == 0 ? "quant" : kern_dtype_name(dtype);
}

int rank_model_writer_commit(rank_model_writer *w) {
  int rc = mfile_writer_commit(w->w);
  free(w);
  return rc;
}

void rank_model_writer_abort(rank_model_writer *w) {
  if (!w) return;
  mfile_writer_abort(w->w);
  free(w);
}

/* ---- synthetic weights: what `init` writes is what synth: reads --------- */

const char *rank_synth_expert_prefix(int experts, int e) { return wan_synth_prefix(experts, e); }

void rank_synth_tensor(const wan_config *c, uint64_t seed, const char *prefix, wan_group g,
                       int block, const wan_tensor *t, kern_dtype dtype, void *dst) {
  (void)c;
  char full[192];
  if (g == WAN_GROUP_BLOCK)
    snprintf(full, sizeof full, "%sblocks.%d.%s", prefix, block, t->name);
  else
    snprintf(full, sizeof full, "%s%s", prefix, t->name);
  uint64_t key = rank_synth_key(seed, full);
  double center, half;
  wan_synth_scale(t->name, t->numel / t->shape[0], &center, &half);
  const int64_t n = t->numel;
  if (dtype == KERN_DTYPE_F32) {
    float *out = dst;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++)
      out[i] = (float)(center + half * rank_synth_uniform(key, (uint64_t)i));
  } else {
    uint16_t *out = dst;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++)
      out[i] = kern_f32_to_bf16((float)(center + half * rank_synth_uniform(key, (uint64_t)i)));
  }
}
