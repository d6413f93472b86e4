/* The VAE decoder's model file (see vae_file.h): the model-file layer
 * (mfile.h) with the decoder's schema (wan_vae_schema.h), read whole into
 * the packed layout of wan_vae_table. */
#include "vae_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mfile.h"
#include "wan_vae_schema.h"

struct vae_model {
  vae_model_info info;
  mfile *f;
  wan_vae_weights w; /* structure only: the table's slots point here */
  wan_vae_table table;
  wan_vae_enc_weights ew; /* the encoder's (config.encoder): its table's slots */
  wan_vae_table enc_table;
};

/* ---- presets (wan_vae_schema.h) --------------------------------------------- */

int vae_preset(const char *name, wan_vae_config *out) { return wan_vae_schema.preset(name, out); }
const char *vae_preset_names(void) { return wan_vae_schema.preset_names(); }
const char *vae_preset_match(const wan_vae_config *c) { return wan_vae_schema.preset_match(c); }

/* ---- the handle ---------------------------------------------------------------- */

int vae_model_open(const char *spec, int verify, vae_model **out) {
  vae_model *m = sp_xcalloc(1, sizeof *m);
  int rc = mfile_open(spec, &wan_vae_schema, NULL, verify, &m->f);
  if (rc != SP_OK) {
    free(m);
    return rc;
  }
  vae_model_info *in = &m->info;
  in->config = *(const wan_vae_config *)mfile_config(m->f);
  in->id = *mfile_id(m->f);
  wan_vae_table_make(&in->config, &m->w, &m->table);
  if (in->config.encoder) {
    wan_vae_enc_table_make(&in->config, &m->ew, &m->enc_table);
    in->enc_tensors = m->enc_table.count;
    in->enc_params = m->enc_table.params;
  }
  model_file_size_set(&in->size, &in->id, m->table.count + in->enc_tensors,
                      m->table.params + in->enc_params);
  *out = m;
  return SP_OK;
}

void vae_model_close(vae_model *m) {
  if (!m) return;
  mfile_close(m->f);
  free(m);
}

const vae_model_info *vae_model_get_info(const vae_model *m) { return &m->info; }

/* The tensors of table t, the first of them tensor first of the file, as
 * fp32 into packed (padding zeroed). */
static int read_table(vae_model *m, const wan_vae_table *t, int first, float *packed,
                      int64_t packed_floats, const char *what) {
  if (packed_floats < t->packed_floats) {
    sp_log_error("%s: buffer of %lld floats too small for the %s's %lld", m->info.id.source,
                 (long long)packed_floats, what, (long long)t->packed_floats);
    return SP_ERR_RUNTIME;
  }
  for (int i = 0; i < t->count; i++) { /* the padding after each tensor */
    int64_t end = t->t[i].offset + t->t[i].numel;
    int64_t next = i + 1 < t->count ? t->t[i + 1].offset : t->packed_floats;
    if (next > end) memset(packed + end, 0, (size_t)(next - end) * sizeof *packed);
  }
  mfile_dst d[WAN_VAE_MAX_TENSORS];
  for (int i = 0; i < t->count; i++)
    d[i] = (mfile_dst){first + i, packed + t->t[i].offset, 1, NULL};
  return mfile_read(m->f, t->count, d, NULL);
}

int vae_model_read(vae_model *m, float *packed, int64_t packed_floats) {
  return read_table(m, &m->table, 0, packed, packed_floats, "decoder");
}

int vae_model_read_encoder(vae_model *m, float *packed, int64_t packed_floats) {
  if (!m->info.config.encoder) {
    sp_log_error("%s: %s", m->info.id.source, VAE_MODEL_NO_ENCODER);
    return SP_ERR_INPUT;
  }
  /* The file's table: the decoder's tensors, then the encoder's. */
  return read_table(m, &m->enc_table, m->table.count, packed, packed_floats, "encoder");
}

int vae_model_verify(vae_model *m, uint64_t *bytes) { return mfile_verify(m->f, bytes); }

int model_file_arch(const char *path, char *arch, size_t n) { return mfile_arch(path, arch, n); }
