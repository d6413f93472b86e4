/* Wan 2.1 VAE decoder: config, latent statistics and the tensor table (see
 * wan_vae.h). The structure follows Decoder3d.__init__ of the published
 * wan/modules/vae.py; VAE.md walks through it. */
#include "wan_vae.h"

#include <stdio.h>
#include <string.h>

const float wan_vae_latent_mean[WAN_VAE_Z_DIM] = {
    -0.7571f, -0.7089f, -0.9113f, 0.1075f, -0.1745f, 0.9653f, -0.1517f, 1.5508f,
    0.4134f,  -0.0715f, 0.5517f,  -0.3632f, -0.1922f, -0.9497f, 0.2503f, -0.2921f};
const float wan_vae_latent_std[WAN_VAE_Z_DIM] = {
    2.8184f, 1.4541f, 2.3275f, 2.6558f, 1.2196f, 1.7708f, 2.6052f, 2.0743f,
    3.2687f, 2.1526f, 2.8652f, 1.5579f, 1.6382f, 1.1253f, 2.8251f, 1.9160f};

void wan_vae_config_published(wan_vae_config *out) {
  wan_vae_config c = {0};
  c.dim = 96;
  c.z_dim = WAN_VAE_Z_DIM;
  c.n_mult = 4;
  c.dim_mult[0] = 1;
  c.dim_mult[1] = 2;
  c.dim_mult[2] = 4;
  c.dim_mult[3] = 4;
  c.num_res_blocks = 2;
  c.temporal_up[0] = 1;
  c.temporal_up[1] = 1;
  c.temporal_up[2] = 0;
  *out = c;
}

int wan_vae_config_check(const wan_vae_config *c, char *err, size_t errlen) {
  if (c->dim < 1 || c->dim > 4096) {
    snprintf(err, errlen, "vae config dim = %lld is outside 1..4096", (long long)c->dim);
    return -1;
  }
  if (c->z_dim != WAN_VAE_Z_DIM) {
    snprintf(err, errlen, "vae config z_dim = %lld: the published latent statistics have %d "
             "channels", (long long)c->z_dim, WAN_VAE_Z_DIM);
    return -1;
  }
  if (c->n_mult < 1 || c->n_mult > WAN_VAE_MAX_LEVELS) {
    snprintf(err, errlen, "vae config has %d dim_mult entries, not 1..%d", c->n_mult,
             WAN_VAE_MAX_LEVELS);
    return -1;
  }
  for (int i = 0; i < c->n_mult; i++) {
    if (c->dim_mult[i] < 1 || c->dim_mult[i] > 64) {
      snprintf(err, errlen, "vae config dim_mult[%d] = %lld is outside 1..64", i,
               (long long)c->dim_mult[i]);
      return -1;
    }
  }
  for (int i = 0; i + 1 < c->n_mult; i++) {
    if (c->temporal_up[i] != 0 && c->temporal_up[i] != 1) {
      snprintf(err, errlen, "vae config temporal_up[%d] = %d is not 0 or 1", i, c->temporal_up[i]);
      return -1;
    }
    /* A resample halves its width: it must keep at least one channel. */
    if (wan_vae_level_dim(c, i) < 2) {
      snprintf(err, errlen, "vae config: level %d has width %lld, too narrow to halve", i,
               (long long)wan_vae_level_dim(c, i));
      return -1;
    }
  }
  if (c->num_res_blocks < 0 || c->num_res_blocks + 1 > WAN_VAE_MAX_RES) {
    snprintf(err, errlen, "vae config num_res_blocks = %lld is outside 0..%d",
             (long long)c->num_res_blocks, WAN_VAE_MAX_RES - 1);
    return -1;
  }
  return 0;
}

int64_t wan_vae_level_dim(const wan_vae_config *c, int level) {
  /* Decoder3d: dims = dim * [dim_mult[-1]] + dim_mult reversed. */
  return c->dim * c->dim_mult[level < 0 ? c->n_mult - 1 : c->n_mult - 1 - level];
}

int64_t wan_vae_out_frames(const wan_vae_config *c, int64_t F) {
  int64_t per = 1;
  for (int i = 0; i + 1 < c->n_mult; i++)
    if (c->temporal_up[i]) per *= 2;
  return F < 1 ? 0 : 1 + per * (F - 1);
}

int64_t wan_vae_out_scale(const wan_vae_config *c) { return (int64_t)1 << (c->n_mult - 1); }

/* ---------------------------------------------------------------- table */

static void add(wan_vae_table *t, const float **slot, const char *prefix, const char *key,
                int ndim, int64_t s0, int64_t s1, int64_t s2, int64_t s3, int64_t s4) {
  wan_vae_tensor *e = &t->t[t->count++];
  snprintf(e->name, sizeof e->name, "%s%s", prefix, key);
  int64_t s[5] = {s0, s1, s2, s3, s4};
  e->ndim = ndim;
  e->numel = 1;
  for (int i = 0; i < 5; i++) {
    e->shape[i] = i < ndim ? s[i] : 0;
    if (i < ndim) e->numel *= s[i];
  }
  e->offset = t->packed_floats;
  e->slot = slot;
  *slot = NULL;
  t->params += e->numel;
  t->packed_floats += (e->numel + WAN_VAE_ALIGN_FLOATS - 1) / WAN_VAE_ALIGN_FLOATS *
                      WAN_VAE_ALIGN_FLOATS;
}

static void add_resblock(wan_vae_table *t, wan_vae_resblock *r, const char *prefix,
                         int64_t in_dim, int64_t out_dim) {
  r->in_dim = in_dim;
  r->out_dim = out_dim;
  add(t, &r->norm1_gamma, prefix, ".residual.0.gamma", 4, in_dim, 1, 1, 1, 0);
  add(t, &r->conv1_w, prefix, ".residual.2.weight", 5, out_dim, in_dim, 3, 3, 3);
  add(t, &r->conv1_b, prefix, ".residual.2.bias", 1, out_dim, 0, 0, 0, 0);
  add(t, &r->norm2_gamma, prefix, ".residual.3.gamma", 4, out_dim, 1, 1, 1, 0);
  add(t, &r->conv2_w, prefix, ".residual.6.weight", 5, out_dim, out_dim, 3, 3, 3);
  add(t, &r->conv2_b, prefix, ".residual.6.bias", 1, out_dim, 0, 0, 0, 0);
  r->shortcut_w = r->shortcut_b = NULL;
  if (in_dim != out_dim) {
    add(t, &r->shortcut_w, prefix, ".shortcut.weight", 5, out_dim, in_dim, 1, 1, 1);
    add(t, &r->shortcut_b, prefix, ".shortcut.bias", 1, out_dim, 0, 0, 0, 0);
  }
}

void wan_vae_table_make(const wan_vae_config *c, wan_vae_weights *w, wan_vae_table *out) {
  memset(w, 0, sizeof *w);
  out->count = 0;
  out->packed_floats = 0;
  out->params = 0;
  const int64_t z = c->z_dim, d0 = wan_vae_level_dim(c, -1);
  w->z_dim = z;
  w->mid_dim = d0;
  add(out, &w->conv2_w, "conv2", ".weight", 5, z, z, 1, 1, 1);
  add(out, &w->conv2_b, "conv2", ".bias", 1, z, 0, 0, 0, 0);
  add(out, &w->conv1_w, "decoder.conv1", ".weight", 5, d0, z, 3, 3, 3);
  add(out, &w->conv1_b, "decoder.conv1", ".bias", 1, d0, 0, 0, 0, 0);
  add_resblock(out, &w->mid0, "decoder.middle.0", d0, d0);
  wan_vae_attn *a = &w->mid_attn;
  a->dim = d0;
  add(out, &a->norm_gamma, "decoder.middle.1", ".norm.gamma", 3, d0, 1, 1, 0, 0);
  add(out, &a->qkv_w, "decoder.middle.1", ".to_qkv.weight", 4, 3 * d0, d0, 1, 1, 0);
  add(out, &a->qkv_b, "decoder.middle.1", ".to_qkv.bias", 1, 3 * d0, 0, 0, 0, 0);
  add(out, &a->proj_w, "decoder.middle.1", ".proj.weight", 4, d0, d0, 1, 1, 0);
  add(out, &a->proj_b, "decoder.middle.1", ".proj.bias", 1, d0, 0, 0, 0, 0);
  add_resblock(out, &w->mid2, "decoder.middle.2", d0, d0);

  /* Level i takes dims[i] (halved after a resample, i >= 1) to dims[i + 1]
   * in num_res_blocks + 1 blocks, then resamples unless it is the last. */
  int k = 0; /* index in decoder.upsamples */
  char prefix[48];
  w->n_levels = c->n_mult;
  for (int i = 0; i < c->n_mult; i++) {
    wan_vae_level *l = &w->level[i];
    int64_t in_dim = wan_vae_level_dim(c, i - 1), out_dim = wan_vae_level_dim(c, i);
    if (i >= 1) in_dim /= 2;
    l->n_res = (int)c->num_res_blocks + 1;
    for (int r = 0; r < l->n_res; r++) {
      snprintf(prefix, sizeof prefix, "decoder.upsamples.%d", k++);
      add_resblock(out, &l->res[r], prefix, in_dim, out_dim);
      in_dim = out_dim;
    }
    l->has_up = i != c->n_mult - 1;
    if (!l->has_up) continue;
    wan_vae_resample *u = &l->up;
    u->dim = out_dim;
    u->temporal = c->temporal_up[i];
    snprintf(prefix, sizeof prefix, "decoder.upsamples.%d", k++);
    u->time_w = u->time_b = NULL;
    if (u->temporal) {
      add(out, &u->time_w, prefix, ".time_conv.weight", 5, 2 * out_dim, out_dim, 3, 1, 1);
      add(out, &u->time_b, prefix, ".time_conv.bias", 1, 2 * out_dim, 0, 0, 0, 0);
    }
    add(out, &u->conv_w, prefix, ".resample.1.weight", 4, out_dim / 2, out_dim, 3, 3, 0);
    add(out, &u->conv_b, prefix, ".resample.1.bias", 1, out_dim / 2, 0, 0, 0, 0);
  }
  const int64_t dl = wan_vae_level_dim(c, c->n_mult - 1);
  w->head_dim = dl;
  add(out, &w->head_gamma, "decoder.head", ".0.gamma", 4, dl, 1, 1, 1, 0);
  add(out, &w->head_w, "decoder.head", ".2.weight", 5, 3, dl, 3, 3, 3);
  add(out, &w->head_b, "decoder.head", ".2.bias", 1, 3, 0, 0, 0, 0);
}

void wan_vae_table_bind(const wan_vae_table *t, const float *packed) {
  for (int i = 0; i < t->count; i++) *t->t[i].slot = packed + t->t[i].offset;
}

int wan_vae_table_find(const wan_vae_table *t, const char *name) {
  for (int i = 0; i < t->count; i++)
    if (strcmp(t->t[i].name, name) == 0) return i;
  return -1;
}
