/* The Wan 2.2 VAE's model file (see wan_vae22_file.h): the model-file layer
 * with the VAE's schema, each part read whole into its table's layout. */
#include "wan_vae22_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mfile.h"
#include "wan_vae22_schema.h"

struct wan_vae22_model {
  wan_vae22_info info;
  mfile *f;
  wan_vae22_weights w; /* structure only: the tables' slots point here */
  wan_vae_table table[WAN_VAE22_PARTS];
};

int wan_vae22_spec_is(const char *spec) {
  if (rank_model_spec_is_synth(spec)) {
    char preset[64];
    snprintf(preset, sizeof preset, "%s", spec + 6);
    char *colon = strchr(preset, ':');
    if (colon) *colon = 0;
    wan_vae22_config c;
    return wan_vae22_schema.preset(preset, &c) == 0;
  }
  char arch[64];
  return mfile_arch(spec, arch, sizeof arch) == 0 && strcmp(arch, WAN_VAE22_ARCH) == 0;
}

int wan_vae22_open(const char *spec, int verify, wan_vae22_model **out) {
  wan_vae22_model *m = sp_xcalloc(1, sizeof *m);
  int rc = mfile_open(spec, &wan_vae22_schema, NULL, verify, &m->f);
  if (rc != SP_OK) {
    free(m);
    return rc;
  }
  wan_vae22_info *in = &m->info;
  in->config = *(const wan_vae22_config *)mfile_config(m->f);
  in->id = *mfile_id(m->f);
  int tensors = 0;
  int64_t params = 0;
  for (int p = 0; p < WAN_VAE22_PARTS; p++) {
    wan_vae_table *t = &m->table[p];
    wan_vae22_table_make(&in->config, (wan_vae22_part)p, &m->w, t);
    model_file_size_set(&in->part[p], &in->id, t->count, t->params);
    tensors += t->count;
    params += t->params;
  }
  model_file_size_set(&in->size, &in->id, tensors, params);
  *out = m;
  return SP_OK;
}

void wan_vae22_close(wan_vae22_model *m) {
  if (!m) return;
  mfile_close(m->f);
  free(m);
}

const wan_vae22_info *wan_vae22_get_info(const wan_vae22_model *m) { return &m->info; }

int wan_vae22_read(wan_vae22_model *m, wan_vae22_part p, float *packed, int64_t packed_floats) {
  const wan_vae_table *t = &m->table[p];
  if (packed_floats < t->packed_floats) {
    sp_log_error("%s: buffer of %lld floats too small for the %s's %lld", m->info.id.source,
                 (long long)packed_floats, wan_vae22_part_name(p), (long long)t->packed_floats);
    return SP_ERR_RUNTIME;
  }
  mfile_dst *d = sp_xmalloc((size_t)t->count * sizeof *d);
  const char *group = wan_vae22_group(p);
  for (int i = 0; i < t->count; i++) {
    const int64_t end = t->t[i].offset + t->t[i].numel;
    const int64_t next = i + 1 < t->count ? t->t[i + 1].offset : t->packed_floats;
    if (next > end) memset(packed + end, 0, (size_t)(next - end) * sizeof *packed);
    const int k = mfile_find(m->f, group, t->t[i].name);
    if (k < 0) sp_fatal("%s: %s%s is not in the schema's table", m->info.id.source, group,
                        t->t[i].name);
    d[i] = (mfile_dst){k, packed + t->t[i].offset, 1, NULL};
  }
  const int rc = mfile_read(m->f, t->count, d, NULL);
  free(d);
  return rc;
}

int wan_vae22_verify(wan_vae22_model *m, uint64_t *bytes) { return mfile_verify(m->f, bytes); }

/* ---- writer ---------------------------------------------------------------------- */

struct wan_vae22_writer {
  mfile_writer *w;
  wan_vae22_weights wt; /* structure only */
  wan_vae_table table[WAN_VAE22_PARTS];
  char path[4096];
};

int wan_vae22_writer_open(const char *path, const wan_vae22_config *c, kern_dtype dtype,
                          const char *preset, wan_vae22_writer **out) {
  wan_vae22_writer *w = sp_xcalloc(1, sizeof *w);
  snprintf(w->path, sizeof w->path, "%s", path);
  int rc = mfile_writer_open(path, &wan_vae22_schema, c, kern_dtype_name(dtype), preset, NULL,
                             &w->w);
  if (rc != SP_OK) {
    free(w);
    return rc;
  }
  for (int p = 0; p < WAN_VAE22_PARTS; p++)
    wan_vae22_table_make(c, (wan_vae22_part)p, &w->wt, &w->table[p]);
  *out = w;
  return SP_OK;
}

int wan_vae22_writer_attr(wan_vae22_writer *w, const char *key, const char *value) {
  return mfile_writer_meta(w->w, key, value);
}

int wan_vae22_writer_put(wan_vae22_writer *w, wan_vae22_part p, const char *name,
                         const float *data, int64_t numel) {
  const int i = wan_vae_table_find(&w->table[p], name);
  const int k = mfile_writer_find(w->w, wan_vae22_group(p), name);
  if (i < 0 || k < 0) {
    sp_log_error("%s: %s is not a tensor of this VAE's %s", w->path, name,
                 wan_vae22_part_name(p));
    return SP_ERR_INPUT;
  }
  if (numel != w->table[p].t[i].numel) {
    sp_log_error("%s: %s/%s: %lld values given, the table needs %lld", w->path,
                 wan_vae22_group(p), name, (long long)numel, (long long)w->table[p].t[i].numel);
    return SP_ERR_INPUT;
  }
  return mfile_writer_put(w->w, &(mfile_put){k, KERN_DTYPE_F32, data, 0, numel, NULL});
}

int wan_vae22_writer_commit(wan_vae22_writer *w) {
  const int rc = mfile_writer_commit(w->w);
  free(w);
  return rc;
}

void wan_vae22_writer_abort(wan_vae22_writer *w) {
  if (!w) return;
  mfile_writer_abort(w->w);
  free(w);
}
