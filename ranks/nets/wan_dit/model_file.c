/* The DiT's model file (see model_file.h): the model-file layer (mfile.h)
 * opened with the DiT's schema (wan_schema.h), and its groups read into
 * their packed layouts (wan_config.h), a LoRA merged into each as it is
 * read. The presets and dataset paths are model_presets.c's, the load's
 * progress line model_progress.c's, the writer model_writer.c's. */
#include "model_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mfile.h"
#include "model_file_impl.h"
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
          if (mfile_stored(m->f, wan_schema_index(&m->fc, e, (wan_group)g, b, i)) != rest)
            m->group_dtype[g] = KERN_DTYPE_F32;
    wan_layout_make(&m->info.config, (wan_group)g, m->group_dtype[g], &m->layout[g]);
  }
  for (int i = 0; i < m->layout[WAN_GROUP_BLOCK].count; i++)
    m->block_file_bytes += mfile_stored_bytes(m->f, wan_schema_index(&m->fc, 0, WAN_GROUP_BLOCK, 0, i));
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
  m->info.fp8 = strcmp(mfile_root_dtype(m->f)->name, "fp8") == 0;
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

const char *rank_model_dtype_name(const rank_model_info *in) {
  return in->fp8 ? "fp8" : kern_dtype_name(in->id.dtype);
}

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
  rank_model_progress_add(l->packed_bytes);
  return m->merge ? m->merge(m->merge_ctx, e, g, block, l, m->group_dtype[g], dst) : SP_OK;
}

void rank_model_set_merge(rank_model *m, rank_model_merge_fn fn, void *ctx) {
  m->merge = fn;
  m->merge_ctx = ctx;
}

int rank_model_merging(const rank_model *m) { return m->merge != NULL; }
