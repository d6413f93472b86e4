/* The VAE file's writer (see vae_file.h): the model-file layer's writer
 * (mfile.h) with the decoder's schema, one dataset per table tensor under
 * /decoder, the model checksum at commit, the rename. */
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
  *out = w;
  return SP_OK;
}

int vae_model_writer_attr(vae_model_writer *w, const char *key, const char *value) {
  return mfile_writer_meta(w->w, key, value);
}

int vae_model_writer_put(vae_model_writer *w, const char *name, const float *data,
                         int64_t numel) {
  const int i = wan_vae_table_find(&w->table, name);
  if (i < 0) {
    sp_log_error("%s: %s is not a tensor of this VAE decoder", w->path, name);
    return SP_ERR_INPUT;
  }
  const wan_vae_tensor *t = &w->table.t[i];
  if (numel != t->numel) {
    sp_log_error("%s: %s/%s: %lld values given, the table needs %lld", w->path, WAN_VAE_GROUP,
                 name, (long long)numel, (long long)t->numel);
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
