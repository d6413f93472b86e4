/* Wan 2.1 VAE decoder: config, latent statistics and the tensor table (see
 * wan_vae.h). The structure follows Decoder3d.__init__ of the published
 * wan/modules/vae.py; VAE.md walks through it. */
#include "wan_vae.h"
#include "wan_vae_enc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "vae_layout.h"
#include "wan_vae_schema.h"

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
  if (c->encoder != 0 && c->encoder != 1) {
    snprintf(err, errlen, "vae config encoder = %d is not 0 or 1", c->encoder);
    return -1;
  }
  return c->encoder ? wan_vae_enc_config_check(c, err, errlen) : 0;
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

/* One tensor: key under prefix (none: ""), shape of ndim sizes. */
static void add(wan_vae_table *t, const float **slot, const char *prefix, const char *key,
                int ndim, const int64_t *s) {
  wan_vae_tensor *e = &t->t[t->count++];
  snprintf(e->name, sizeof e->name, "%s%s%s", prefix, prefix[0] ? "." : "", key);
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

#define WAN_VAE_UNPAREN(...) __VA_ARGS__
/* One list line (wan_vae.h) of module m under prefix; the shape's rank is
 * the length of its list. */
#define ADD(field, key, shape)                                            \
  {                                                                       \
    const int64_t s_[] = {WAN_VAE_UNPAREN shape};                         \
    _Static_assert(sizeof s_ / sizeof s_[0] <= 5, key ": at most 5 dims"); \
    add(t, &m->field, prefix, key, (int)(sizeof s_ / sizeof s_[0]), s_);  \
  }

static void add_resblock(wan_vae_table *t, wan_vae_resblock *m, const char *prefix,
                         int64_t in_dim, int64_t out_dim) {
  m->in_dim = in_dim;
  m->out_dim = out_dim;
  WAN_VAE_RESBLOCK_TENSORS(ADD)
  m->shortcut_w = m->shortcut_b = NULL;
  if (in_dim != out_dim) {
    WAN_VAE_SHORTCUT_TENSORS(ADD)
  }
}

static void add_attn(wan_vae_table *t, wan_vae_attn *m, const char *prefix, int64_t dim) {
  m->dim = dim;
  WAN_VAE_ATTN_TENSORS(ADD)
}

static void add_resample(wan_vae_table *t, wan_vae_resample *m, const char *prefix, int64_t dim,
                         int temporal) {
  m->dim = dim;
  m->temporal = temporal;
  m->time_w = m->time_b = NULL;
  if (temporal) {
    WAN_VAE_TIME_CONV_TENSORS(ADD)
  }
  WAN_VAE_RESAMPLE_TENSORS(ADD)
}

/* Level i takes dims[i] (halved after a resample, i >= 1) to dims[i + 1]
 * in num_res_blocks + 1 blocks, then resamples unless it is the last; *k
 * counts decoder.upsamples. */
static void add_level(const wan_vae_config *c, wan_vae_table *t, wan_vae_level *l, int i,
                      int *k) {
  char prefix[48];
  int64_t in_dim = wan_vae_level_dim(c, i - 1), out_dim = wan_vae_level_dim(c, i);
  if (i >= 1) in_dim /= 2;
  l->n_res = (int)c->num_res_blocks + 1;
  for (int r = 0; r < l->n_res; r++) {
    snprintf(prefix, sizeof prefix, "decoder.upsamples.%d", (*k)++);
    add_resblock(t, &l->res[r], prefix, in_dim, out_dim);
    in_dim = out_dim;
  }
  l->has_up = i != c->n_mult - 1;
  if (!l->has_up) return;
  snprintf(prefix, sizeof prefix, "decoder.upsamples.%d", (*k)++);
  add_resample(t, &l->up, prefix, out_dim, c->temporal_up[i]);
}

void wan_vae_table_make(const wan_vae_config *c, wan_vae_weights *w, wan_vae_table *out) {
  memset(w, 0, sizeof *w);
  out->count = 0;
  out->packed_floats = 0;
  out->params = 0;
  wan_vae_table *t = out;
  wan_vae_weights *m = w;
  const char *prefix = "";
  /* The names the decoder's own shapes are written in. */
  const int64_t z_dim = c->z_dim, mid_dim = wan_vae_level_dim(c, -1);
  const int64_t head_dim = wan_vae_level_dim(c, c->n_mult - 1);
  w->z_dim = z_dim;
  w->mid_dim = mid_dim;
  w->head_dim = head_dim;
  WAN_VAE_CONV2_TENSORS(ADD)
  WAN_VAE_CONV1_TENSORS(ADD)
  add_resblock(out, &w->mid0, "decoder.middle.0", mid_dim, mid_dim);
  add_attn(out, &w->mid_attn, "decoder.middle.1", mid_dim);
  add_resblock(out, &w->mid2, "decoder.middle.2", mid_dim, mid_dim);
  int k = 0; /* index in decoder.upsamples */
  w->n_levels = c->n_mult;
  for (int i = 0; i < c->n_mult; i++) add_level(c, out, &w->level[i], i, &k);
  WAN_VAE_HEAD_TENSORS(ADD)
}

void wan_vae_table_bind(const wan_vae_table *t, const float *packed) {
  for (int i = 0; i < t->count; i++) *t->t[i].slot = packed + t->t[i].offset;
}

int wan_vae_table_find(const wan_vae_table *t, const char *name) {
  for (int i = 0; i < t->count; i++)
    if (strcmp(t->t[i].name, name) == 0) return i;
  return -1;
}

/* ---------------------------------------------------------------- the encoder */

int64_t wan_vae_enc_level_dim(const wan_vae_config *c, int level) {
  /* Encoder3d: dims = dim * [1] + dim * dim_mult. */
  return level < 0 ? c->dim : c->dim * c->dim_mult[level];
}

int wan_vae_enc_temporal(const wan_vae_config *c, int level) {
  return level >= 0 && level + 1 < c->n_mult ? c->temporal_up[c->n_mult - 2 - level] : 0;
}

int64_t wan_vae_enc_time_factor(const wan_vae_config *c) {
  int64_t f = 1;
  for (int i = 0; i + 1 < c->n_mult; i++)
    if (wan_vae_enc_temporal(c, i)) f *= 2;
  return f;
}

int64_t wan_vae_enc_latent_frames(const wan_vae_config *c, int64_t T) {
  return T < 1 ? 0 : 1 + (T - 1) / wan_vae_enc_time_factor(c);
}

int64_t wan_vae_enc_latent_side(const wan_vae_config *c, int64_t n) {
  for (int i = 0; i + 1 < c->n_mult; i++) n /= 2;
  return n;
}

int wan_vae_enc_config_check(const wan_vae_config *c, char *err, size_t errlen) {
  if (c->num_res_blocks < 1) {
    snprintf(err, errlen, "vae config: the encoder needs num_res_blocks >= 1 (its resamples take "
             "the width of their level's residual blocks), got %lld",
             (long long)c->num_res_blocks);
    return -1;
  }
  int down = 0;
  for (int i = 0; i + 1 < c->n_mult; i++) down += wan_vae_enc_temporal(c, i);
  if (down > WAN_VAE_ENC_MAX_TIME_DOWN) {
    snprintf(err, errlen, "vae config: %d temporal resamples; the encoder's chunks of %d frames "
             "take at most %d", down, WAN_VAE_ENC_CHUNK, WAN_VAE_ENC_MAX_TIME_DOWN);
    return -1;
  }
  return 0;
}

int wan_vae_enc_size_check(const wan_vae_config *c, int64_t T, int64_t H, int64_t W, char *err,
                           size_t errlen) {
  const int64_t least = (int64_t)1 << (c->n_mult - 1);
  if (T < 1 || (T - 1) % WAN_VAE_ENC_CHUNK != 0) {
    snprintf(err, errlen, "%lld frames: the encoder takes 1 + %d k frames (frame 0 alone, then "
             "chunks of %d)", (long long)T, WAN_VAE_ENC_CHUNK, WAN_VAE_ENC_CHUNK);
    return -1;
  }
  if (H < least || W < least || H > WAN_VAE_MAX_PIXELS || W > WAN_VAE_MAX_PIXELS) {
    snprintf(err, errlen, "frames of %lldx%lld: each side must be %lld..%d (%d downsamples by 2)",
             (long long)H, (long long)W, (long long)least, WAN_VAE_MAX_PIXELS, c->n_mult - 1);
    return -1;
  }
  return 0;
}

static void add_down(wan_vae_table *t, wan_vae_down *m, const char *prefix, int64_t dim,
                     int temporal) {
  m->dim = dim;
  m->temporal = temporal;
  WAN_VAE_DOWN_TENSORS(ADD)
  m->time_w = m->time_b = NULL;
  if (temporal) {
    WAN_VAE_DOWN_TIME_TENSORS(ADD)
  }
}

/* Encoder level i takes dims[i] to dims[i + 1] in num_res_blocks blocks,
 * then resamples unless it is the last; *k counts encoder.downsamples. */
static void add_enc_level(const wan_vae_config *c, wan_vae_table *t, wan_vae_enc_level *l, int i,
                          int *k) {
  char prefix[48];
  int64_t in_dim = wan_vae_enc_level_dim(c, i - 1);
  const int64_t out_dim = wan_vae_enc_level_dim(c, i);
  l->n_res = (int)c->num_res_blocks;
  for (int r = 0; r < l->n_res; r++) {
    snprintf(prefix, sizeof prefix, "encoder.downsamples.%d", (*k)++);
    add_resblock(t, &l->res[r], prefix, in_dim, out_dim);
    in_dim = out_dim;
  }
  l->has_down = i != c->n_mult - 1;
  if (!l->has_down) return;
  snprintf(prefix, sizeof prefix, "encoder.downsamples.%d", (*k)++);
  add_down(t, &l->down, prefix, out_dim, wan_vae_enc_temporal(c, i));
}

void wan_vae_enc_table_make(const wan_vae_config *c, wan_vae_enc_weights *w,
                            wan_vae_table *out) {
  memset(w, 0, sizeof *w);
  out->count = 0;
  out->packed_floats = 0;
  out->params = 0;
  wan_vae_table *t = out;
  wan_vae_enc_weights *m = w;
  const char *prefix = "";
  /* The names the encoder's own shapes are written in. */
  const int64_t z_dim = c->z_dim, in_dim = wan_vae_enc_level_dim(c, -1);
  const int64_t head_dim = wan_vae_enc_level_dim(c, c->n_mult - 1);
  w->z_dim = z_dim;
  w->in_dim = in_dim;
  w->mid_dim = w->head_dim = head_dim;
  WAN_VAE_ENC_CONV1_TENSORS(ADD)
  int k = 0; /* index in encoder.downsamples */
  w->n_levels = c->n_mult;
  for (int i = 0; i < c->n_mult; i++) add_enc_level(c, out, &w->level[i], i, &k);
  add_resblock(out, &w->mid0, "encoder.middle.0", head_dim, head_dim);
  add_attn(out, &w->mid_attn, "encoder.middle.1", head_dim);
  add_resblock(out, &w->mid2, "encoder.middle.2", head_dim, head_dim);
  WAN_VAE_ENC_HEAD_TENSORS(ADD)
  WAN_VAE_ENC_QUANT_TENSORS(ADD)
}

/* ---------------------------------------------------------------- description */

static int layout(const void *shape, void *out, char *err, size_t errlen) {
  return plan_vae_layout_make(shape, out, err, errlen);
}

static const net_desc desc = {
    .name = "wan_vae",
    .noun = "VAE",
    .schema = &wan_vae_schema,
    .layout = layout,
};

const net_desc *wan_vae_net(void) { return &desc; }
