/* The Wan VAEs' tensor table builder (wan_vae_table.h). */
#include "wan_vae_table.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

void wan_vae_table_reset(wan_vae_table *t) {
  t->count = 0;
  t->packed_floats = 0;
  t->params = 0;
}

void wan_vae_table_add(wan_vae_table *t, const float **slot, const char *prefix,
                       const char *key, int ndim, const int64_t *shape) {
  if (t->count >= WAN_VAE_MAX_TENSORS)
    sp_fatal("vae table: more than %d tensors", WAN_VAE_MAX_TENSORS);
  wan_vae_tensor *e = &t->t[t->count++];
  snprintf(e->name, sizeof e->name, "%s%s%s", prefix, prefix[0] ? "." : "", key);
  e->ndim = ndim;
  e->numel = 1;
  for (int i = 0; i < 5; i++) {
    e->shape[i] = i < ndim ? shape[i] : 0;
    if (i < ndim) e->numel *= shape[i];
  }
  e->offset = t->packed_floats;
  e->slot = slot;
  *slot = NULL;
  t->params += e->numel;
  t->packed_floats += (e->numel + WAN_VAE_ALIGN_FLOATS - 1) / WAN_VAE_ALIGN_FLOATS *
                      WAN_VAE_ALIGN_FLOATS;
}

void wan_vae_table_add_resblock(wan_vae_table *t, wan_vae_resblock *m, const char *prefix,
                                int64_t in_dim, int64_t out_dim) {
  m->in_dim = in_dim;
  m->out_dim = out_dim;
  WAN_VAE_RESBLOCK_TENSORS(WAN_VAE_TABLE_ADD)
  m->shortcut_w = m->shortcut_b = NULL;
  if (in_dim != out_dim) {
    WAN_VAE_SHORTCUT_TENSORS(WAN_VAE_TABLE_ADD)
  }
}

void wan_vae_table_add_attn(wan_vae_table *t, wan_vae_attn *m, const char *prefix, int64_t dim) {
  m->dim = dim;
  WAN_VAE_ATTN_TENSORS(WAN_VAE_TABLE_ADD)
}

void wan_vae_table_add_middle(wan_vae_table *t, const char *part, wan_vae_resblock *r0,
                              wan_vae_attn *attn, wan_vae_resblock *r2, int64_t dim) {
  char prefix[48];
  snprintf(prefix, sizeof prefix, "%s.middle.0", part);
  wan_vae_table_add_resblock(t, r0, prefix, dim, dim);
  snprintf(prefix, sizeof prefix, "%s.middle.1", part);
  wan_vae_table_add_attn(t, attn, prefix, dim);
  snprintf(prefix, sizeof prefix, "%s.middle.2", part);
  wan_vae_table_add_resblock(t, r2, prefix, dim, dim);
}

void wan_vae_table_bind(const wan_vae_table *t, const float *packed) {
  for (int i = 0; i < t->count; i++) *t->t[i].slot = packed + t->t[i].offset;
}

int wan_vae_table_find(const wan_vae_table *t, const char *name) {
  for (int i = 0; i < t->count; i++)
    if (strcmp(t->t[i].name, name) == 0) return i;
  return -1;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

int wan_vae_table_put(const wan_vae_table *t, const char *group, net_tensor *out) {
  for (int i = 0; out && i < t->count; i++) {
    net_tensor *e = &out[i];
    net_tensor_init(e, group, t->t[i].name, t->t[i].ndim, t->t[i].shape);
    if (ends_with(e->name, ".gamma")) {
      e->synth_center = 1.0;
      e->synth_half = 0.1;
    } else if (ends_with(e->name, ".bias")) {
      e->synth_half = 0.05;
    } else {
      e->synth_half = sqrt(3.0 / (double)(e->numel / e->shape[0]));
    }
  }
  return t->count;
}
