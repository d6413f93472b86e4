/* The VAE file's writer (see vae_file.h): the model-file layer's writer
 * (mfile.h) with the VAE's schema, one dataset per table tensor under
 * /decoder (and /encoder), the model checksum at commit, the rename. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mfile.h"
#include "vae_file.h"
#include "wan_vae_schema.h"

struct vae_model_writer {
  mfile_writer *w;
  wan_vae_weights wt; /* structure only: the table's slots point here */
  wan_vae_table table;
  wan_vae_enc_weights ewt; /* the encoder's, with config.encoder */
  wan_vae_table enc_table;
  char path[4096];
};

int vae_model_writer_open(const char *path, const wan_vae_config *c, kern_dtype dtype,
                          const char *preset, vae_model_writer **out) {
  vae_model_writer *w = sp_xcalloc(1, sizeof *w);
  snprintf(w->path, sizeof w->path, "%s", path);
  int rc = mfile_writer_open(path, &wan_vae_schema, c, kern_dtype_name(dtype), preset, NULL,
                             &w->w);
  if (rc != SP_OK) {
    free(w);
    return rc;
  }
  wan_vae_table_make(c, &w->wt, &w->table);
  if (c->encoder) wan_vae_enc_table_make(c, &w->ewt, &w->enc_table);
  *out = w;
  return SP_OK;
}

int vae_model_writer_attr(vae_model_writer *w, const char *key, const char *value) {
  return mfile_writer_meta(w->w, key, value);
}

int vae_model_writer_put(vae_model_writer *w, const char *name, const float *data,
                         int64_t numel) {
  /* The file's table: the decoder's tensors, then the encoder's. */
  int i = wan_vae_table_find(&w->table, name);
  const wan_vae_tensor *t = i >= 0 ? &w->table.t[i] : NULL;
  const char *group = WAN_VAE_GROUP;
  const int e = i < 0 ? wan_vae_table_find(&w->enc_table, name) : -1;
  if (e >= 0) {
    t = &w->enc_table.t[e];
    i = w->table.count + e;
    group = WAN_VAE_ENC_GROUP;
  }
  if (!t) {
    sp_log_error("%s: %s is not a tensor of this VAE%s", w->path, name,
                 w->enc_table.count ? "" : " (a decoder-only file)");
    return SP_ERR_INPUT;
  }
  if (numel != t->numel) {
    sp_log_error("%s: %s/%s: %lld values given, the table needs %lld", w->path, group, name,
                 (long long)numel, (long long)t->numel);
    return SP_ERR_INPUT;
  }
  return mfile_writer_put(w->w, &(mfile_put){i, KERN_DTYPE_F32, data, 0, numel, NULL});
}

int vae_model_writer_commit(vae_model_writer *w) {
  int rc = mfile_writer_commit(w->w);
  free(w);
  return rc;
}

void vae_model_writer_abort(vae_model_writer *w) {
  if (!w) return;
  mfile_writer_abort(w->w);
  free(w);
}
