/* The DiT's model file (see model_file.h): the model-file layer (mfile.h)
 * opened with the DiT's schema (wan_schema.h), and its groups read into
 * their packed layouts (wan_config.h), a LoRA merged into each as it is
 * read, each group's bytes counted on the load's progress line
 * (progress.h). The presets and dataset paths are model_presets.c's, the
 * writer model_writer.c's. */
#include "model_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mfile.h"
#include "model_file_impl.h"
#include "progress.h"
#include "wan_weights.h"

struct rank_model {
  rank_model_info info;
  wan_file_config fc;
  mfile *f;
  /* As read_group delivers each group: the file's dtype, or fp32 where a
   * group holds tensors stored otherwise (an fp8 file's blocks). */
  wan_layout layout[3];
  kern_dtype group_dtype[3];
  uint64_t block_file_bytes; /* of block 0 of the first expert, in the file */
  rank_model_merge_fn merge; /* applied to every group read, or NULL */
  void *merge_ctx;
};

/* The number of blocks of group g (1 but for the blocks). */
static int group_instances(const rank_model *m, wan_group g) {
  return g == WAN_GROUP_BLOCK ? (int)m->info.config.layers : 1;
}

/* Each group's delivered dtype and layout, and a block's bytes in the file. */
static void layouts(rank_model *m) {
  const kern_dtype rest = m->info.id.dtype;
  for (int g = 0; g < 3; g++) {
    wan_layout l;
    wan_layout_make(&m->info.config, (wan_group)g, rest, &l);
    m->group_dtype[g] = rest;
    for (int e = 0; e < m->info.experts.count; e++)
      for (int b = 0; b < group_instances(m, (wan_group)g); b++)
        for (int i = 0; i < l.count; i++)
          if (mfile_stored(m->f, wan_schema_index(&m->fc, e, (wan_group)g, b, i)) != rest) {
            m->group_dtype[g] = KERN_DTYPE_F32;
            m->info.quant |= g == WAN_GROUP_BLOCK;
          }
    wan_layout_make(&m->info.config, (wan_group)g, m->group_dtype[g], &m->layout[g]);
  }
  for (int e = 0; e < m->info.experts.count; e++)
    for (int b = 0; b < m->info.config.layers; b++) {
      const uint64_t n = rank_model_block_bytes(m, e, b);
      if (n > m->block_file_bytes) m->block_file_bytes = n;
    }
}

uint64_t rank_model_block_bytes(const rank_model *m, int e, int block) {
  uint64_t n = 0;
  for (int i = 0; i < m->layout[WAN_GROUP_BLOCK].count; i++)
    n += mfile_stored_bytes(m->f, wan_schema_index(&m->fc, e, WAN_GROUP_BLOCK, block, i));
  return n;
}

uint64_t rank_model_total_bytes(const rank_model *m) {
  uint64_t n = 0;
  for (int i = 0; i < mfile_count(m->f); i++) n += mfile_stored_bytes(m->f, i);
  return n;
}

int rank_model_format_counts(const rank_model *m, rank_model_format_count *out) {
  rank_model_format_count by[KERN_DTYPE_COUNT];
  memset(by, 0, sizeof by);
  for (int i = 0; i < mfile_count(m->f); i++) {
    const kern_dtype d = mfile_stored(m->f, i);
    by[d].tensors++;
    by[d].bytes += mfile_stored_bytes(m->f, i);
  }
  int n = 0;
  for (int d = 0; d < KERN_DTYPE_COUNT; d++)
    if (by[d].tensors) out[n++] = (rank_model_format_count){(kern_dtype)d, by[d].tensors, by[d].bytes};
  return n;
}

void rank_model_block_formats(const rank_model *m, int e, int block, kern_dtype *fmt) {
  for (int i = 0; i < m->layout[WAN_GROUP_BLOCK].count; i++)
    fmt[i] = mfile_stored(m->f, wan_schema_index(&m->fc, e, WAN_GROUP_BLOCK, block, i));
}

void rank_model_device_formats(const rank_model *m, int e, int block, wan_precision p,
                               kern_dtype *fmt) {
  rank_model_block_formats(m, e, block, fmt);
  for (int i = 0; i < m->layout[WAN_GROUP_BLOCK].count; i++) {
    const kern_dtype s = fmt[i];
    const int as_values = s == KERN_DTYPE_F32 || s == KERN_DTYPE_BF16 || s == KERN_DTYPE_F16;
    if (wan_block_linear_of(i) < 0)
      fmt[i] = KERN_DTYPE_BF16;
    else if (p != WAN_PRECISION_BF16)
      fmt[i] = wan_precision_weight_dtype(p);
    else
      fmt[i] = as_values ? KERN_DTYPE_BF16 : s;
  }
}

void rank_model_device_layout(const rank_model *m, int e, int block, wan_precision p,
                              wan_layout *out) {
  kern_dtype fmt[WAN_MAX_TENSORS];
  rank_model_device_formats(m, e, block, p, fmt);
  wan_layout_make_formats(&m->info.config, WAN_GROUP_BLOCK, fmt, out);
}

uint64_t rank_model_device_block_bytes(const rank_model *m, wan_precision p) {
  uint64_t most = 0;
  for (int e = 0; e < m->info.experts.count; e++)
    for (int b = 0; b < m->info.config.layers; b++) {
      wan_layout l;
      rank_model_device_layout(m, e, b, p, &l);
      if (l.packed_bytes > most) most = l.packed_bytes;
    }
  return most;
}

uint64_t rank_model_dequant_bytes(const rank_model *m, wan_precision p) {
  uint64_t most = 0;
  if (p != WAN_PRECISION_BF16) return 0;
  for (int e = 0; e < m->info.experts.count; e++)
    for (int b = 0; b < m->info.config.layers; b++) {
      wan_layout l;
      rank_model_device_layout(m, e, b, p, &l);
      for (int i = 0; i < l.count; i++)
        if (l.t[i].dtype != KERN_DTYPE_BF16 && (uint64_t)l.t[i].numel * 2 > most)
          most = (uint64_t)l.t[i].numel * 2;
    }
  return most;
}

void rank_model_stored_layout(const rank_model *m, int e, int block, wan_layout *l) {
  kern_dtype fmt[WAN_MAX_TENSORS];
  rank_model_block_formats(m, e, block, fmt);
  wan_layout_make_formats(&m->info.config, WAN_GROUP_BLOCK, fmt, l);
}

int rank_model_open(const char *spec, int verify, rank_model **out) {
  rank_model *m = sp_xcalloc(1, sizeof *m);
  int rc = mfile_open(spec, &wan_schema, NULL, verify, &m->f);
  if (rc != SP_OK) {
    free(m);
    return rc;
  }
  m->fc = *(const wan_file_config *)mfile_config(m->f);
  m->info.config = m->fc.c;
  m->info.id = *mfile_id(m->f);
  const char *root = mfile_root_dtype(m->f)->name;
  snprintf(m->info.root, sizeof m->info.root, "%s", root);
  m->info.precision = strcmp(root, "fp8") == 0    ? WAN_PRECISION_FP8
                      : strcmp(root, "int8") == 0 ? WAN_PRECISION_INT8
                                                  : WAN_PRECISION_BF16;
  m->info.fp8 = m->info.precision == WAN_PRECISION_FP8;
  rank_model_experts_of(&m->fc, &m->info.experts);
  layouts(m);
  *out = m;
  return SP_OK;
}

void rank_model_close(rank_model *m) {
  if (!m) return;
  mfile_close(m->f);
  free(m);
}

const rank_model_info *rank_model_get_info(const rank_model *m) { return &m->info; }
const wan_layout *rank_model_layout(const rank_model *m, wan_group g) { return &m->layout[g]; }
uint64_t rank_model_block_file_bytes(const rank_model *m) { return m->block_file_bytes; }

const char *rank_model_dtype_name(const rank_model_info *in) { return in->root; }

int rank_model_verify(rank_model *m, uint64_t *bytes) { return mfile_verify(m->f, bytes); }

int rank_model_read_group(rank_model *m, wan_group g, int block, void *dst, size_t dst_bytes,
                          uint64_t *bytes_read) {
  return rank_model_read_expert_group(m, 0, g, block, dst, dst_bytes, bytes_read);
}

/* Zeroes the padding between the tensors of a group buffer (and after the
 * last): not the whole group, whose bytes the reads write anyway (a memset
 * of the group on one thread took as long as the parallel read). */
static void zero_padding(const wan_layout *l, void *dst) {
  for (int i = 0; i < l->count; i++) {
    size_t end = l->t[i].offset + l->t[i].bytes;
    size_t next = i + 1 < l->count ? l->t[i + 1].offset : l->packed_bytes;
    if (next > end) memset((char *)dst + end, 0, next - end);
  }
  if (l->count && l->t[0].offset > 0) memset(dst, 0, l->t[0].offset);
}

int rank_model_read_expert_group(rank_model *m, int e, wan_group g, int block, void *dst,
                                 size_t dst_bytes, uint64_t *bytes_read) {
  const wan_config *c = &m->info.config;
  const wan_layout *l = &m->layout[g];
  const int ne = m->info.experts.count;
  if (e < 0 || e >= ne) {
    sp_log_error("%s: expert %d does not exist (the model has %d)", m->info.id.source, e, ne);
    return SP_ERR_INPUT;
  }
  if (g == WAN_GROUP_BLOCK && (block < 0 || block >= c->layers)) {
    sp_log_error("%s: block %d does not exist (the model has %lld)", m->info.id.source, block,
                 (long long)c->layers);
    return SP_ERR_INPUT;
  }
  if (dst_bytes < l->packed_bytes) {
    sp_log_error("%s: buffer of %zu bytes too small for a %s group of %zu", m->info.id.source,
                 dst_bytes, wan_group_name(g), l->packed_bytes);
    return SP_ERR_RUNTIME;
  }
  zero_padding(l, dst);
  mfile_dst d[WAN_MAX_TENSORS];
  for (int i = 0; i < l->count; i++) {
    const int k = wan_schema_index(&m->fc, e, g, g == WAN_GROUP_BLOCK ? block : 0, i);
    d[i] = (mfile_dst){k, (char *)dst + l->t[i].offset,
                       mfile_stored(m->f, k) != m->group_dtype[g], NULL};
  }
  int rc = mfile_read(m->f, l->count, d, bytes_read);
  if (rc != SP_OK) return rc;
  sp_progress_add(l->packed_bytes);
  return m->merge ? m->merge(m->merge_ctx, e, g, block, l, m->group_dtype[g], dst) : SP_OK;
}

int rank_model_read_block_stored(rank_model *m, int e, int block, const wan_layout *l,
                                 void *dst, size_t dst_bytes, uint64_t *bytes_read) {
  if (e < 0 || e >= m->info.experts.count || block < 0 || block >= m->info.config.layers ||
      dst_bytes < l->packed_bytes) {
    sp_log_error("internal: %s: block %d of expert %d into %zu bytes (the layout needs %zu)",
                 m->info.id.source, block, e, dst_bytes, l->packed_bytes);
    return SP_ERR_RUNTIME;
  }
  memset(dst, 0, l->packed_bytes);
  mfile_dst d[WAN_MAX_TENSORS];
  for (int i = 0; i < l->count; i++)
    d[i] = (mfile_dst){wan_schema_index(&m->fc, e, WAN_GROUP_BLOCK, block, i),
                       (char *)dst + l->t[i].offset, 0,
                       l->t[i].scale_offset ? (float *)((char *)dst + l->t[i].scale_offset) : NULL};
  const int rc = mfile_read(m->f, l->count, d, bytes_read);
  if (rc == SP_OK) sp_progress_add(l->packed_bytes);
  return rc;
}

void rank_model_set_merge(rank_model *m, rank_model_merge_fn fn, void *ctx) {
  m->merge = fn;
  m->merge_ctx = ctx;
}

int rank_model_merging(const rank_model *m) { return m->merge != NULL; }
