/* The Wan 2.2 VAE: config, latent statistics and the tensor tables (see
 * wan_vae22.h). The structure follows Encoder3d and Decoder3d of the
 * published wan/modules/vae2_2.py; VAE22.md walks through it. */
#include "wan_vae22.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "vae22_layout.h"
#include "wan_vae22_schema.h"

const float wan_vae22_latent_mean[WAN_VAE22_Z_DIM] = {
    -0.2289f, -0.0052f, -0.1323f, -0.2339f, -0.2799f, 0.0174f,  0.1838f,  0.1557f,
    -0.1382f, 0.0542f,  0.2813f,  0.0891f,  0.1570f,  -0.0098f, 0.0375f,  -0.1825f,
    -0.2246f, -0.1207f, -0.0698f, 0.5109f,  0.2665f,  -0.2108f, -0.2158f, 0.2502f,
    -0.2055f, -0.0322f, 0.1109f,  0.1567f,  -0.0729f, 0.0899f,  -0.2799f, -0.1230f,
    -0.0313f, -0.1649f, 0.0117f,  0.0723f,  -0.2839f, -0.2083f, -0.0520f, 0.3748f,
    0.0152f,  0.1957f,  0.1433f,  -0.2944f, 0.3573f,  -0.0548f, -0.1681f, -0.0667f};
const float wan_vae22_latent_std[WAN_VAE22_Z_DIM] = {
    0.4765f, 1.0364f, 0.4514f, 1.1677f, 0.5313f, 0.4990f, 0.4818f, 0.5013f,
    0.8158f, 1.0344f, 0.5894f, 1.0901f, 0.6885f, 0.6165f, 0.8454f, 0.4978f,
    0.5759f, 0.3523f, 0.7135f, 0.6804f, 0.5833f, 1.4146f, 0.8986f, 0.5659f,
    0.7069f, 0.5338f, 0.4889f, 0.4917f, 0.4069f, 0.4999f, 0.6866f, 0.4093f,
    0.5709f, 0.6065f, 0.6415f, 0.4944f, 0.5726f, 1.2042f, 0.5458f, 1.6887f,
    0.3971f, 1.0600f, 0.3943f, 0.5537f, 0.5444f, 0.4089f, 0.7468f, 0.7744f};

void wan_vae22_config_published(wan_vae22_config *out) {
  wan_vae22_config c = {0};
  c.dim = 160;
  c.dec_dim = 256;
  c.z_dim = WAN_VAE22_Z_DIM;
  c.n_mult = 4;
  c.dim_mult[0] = 1;
  c.dim_mult[1] = 2;
  c.dim_mult[2] = 4;
  c.dim_mult[3] = 4;
  c.num_res_blocks = 2;
  c.temporal_down[0] = 0;
  c.temporal_down[1] = 1;
  c.temporal_down[2] = 1;
  *out = c;
}

int64_t wan_vae22_enc_dim(const wan_vae22_config *c, int i) {
  return c->dim * (i == 0 ? 1 : c->dim_mult[i - 1]);
}

int64_t wan_vae22_dec_dim(const wan_vae22_config *c, int i) {
  return c->dec_dim * (i == 0 ? c->dim_mult[c->n_mult - 1] : c->dim_mult[c->n_mult - i]);
}

int wan_vae22_dec_temporal(const wan_vae22_config *c, int i) {
  return i + 1 < c->n_mult ? c->temporal_down[c->n_mult - 2 - i] : 0;
}

int64_t wan_vae22_time_factor(const wan_vae22_config *c) {
  int64_t f = 1;
  for (int i = 0; i + 1 < c->n_mult; i++)
    if (c->temporal_down[i]) f *= 2;
  return f;
}

int64_t wan_vae22_space_factor(const wan_vae22_config *c) {
  return (int64_t)WAN_VAE22_PATCH << (c->n_mult - 1);
}

int64_t wan_vae22_out_frames(const wan_vae22_config *c, int64_t F) {
  return F < 1 ? 0 : 1 + wan_vae22_time_factor(c) * (F - 1);
}

int64_t wan_vae22_latent_frames(const wan_vae22_config *c, int64_t T) {
  return T < 1 ? 0 : 1 + (T - 1) / wan_vae22_time_factor(c);
}

const char *wan_vae22_part_name(wan_vae22_part p) {
  return p == WAN_VAE22_ENCODER ? "encoder" : "decoder";
}

/* The shortcuts' channel splits: AvgDown3D of encoder level i and DupUp3D
 * of decoder level i must divide evenly. */
static int check_shortcuts(const wan_vae22_config *c, char *err, size_t errlen) {
  for (int i = 0; i < c->n_mult; i++) {
    const int down = i + 1 < c->n_mult, ft = down && c->temporal_down[i] ? 2 : 1;
    const int64_t in = wan_vae22_enc_dim(c, i), out = wan_vae22_enc_dim(c, i + 1);
    const int64_t f = (int64_t)ft * (down ? 4 : 1);
    if ((in * f) % out != 0) {
      snprintf(err, errlen, "vae config: encoder level %d's shortcut cannot average %lld x %lld "
               "values into %lld channels", i, (long long)in, (long long)f, (long long)out);
      return -1;
    }
    if (!down) continue;
    const int64_t din = wan_vae22_dec_dim(c, i), dout = wan_vae22_dec_dim(c, i + 1);
    const int64_t df = (wan_vae22_dec_temporal(c, i) ? 2 : 1) * 4;
    if ((dout * df) % din != 0) {
      snprintf(err, errlen, "vae config: decoder level %d's shortcut cannot spread %lld "
               "channels over %lld x %lld", i, (long long)din, (long long)dout, (long long)df);
      return -1;
    }
  }
  return 0;
}

int wan_vae22_config_check(const wan_vae22_config *c, char *err, size_t errlen) {
  if (c->dim < 1 || c->dim > 4096 || c->dec_dim < 1 || c->dec_dim > 4096) {
    snprintf(err, errlen, "vae config dim = %lld, dec_dim = %lld: each must be in 1..4096",
             (long long)c->dim, (long long)c->dec_dim);
    return -1;
  }
  if (c->z_dim != WAN_VAE22_Z_DIM) {
    snprintf(err, errlen, "vae config z_dim = %lld: the published Wan 2.2 latent statistics "
             "have %d channels", (long long)c->z_dim, WAN_VAE22_Z_DIM);
    return -1;
  }
  if (wan_vae_mults_check(c->n_mult, c->dim_mult, WAN_VAE22_MAX_LEVELS, err, errlen) != 0)
    return -1;
  int temporal = 0;
  for (int i = 0; i + 1 < c->n_mult; i++) {
    if (c->temporal_down[i] != 0 && c->temporal_down[i] != 1) {
      snprintf(err, errlen, "vae config temporal_down[%d] = %d is not 0 or 1", i,
               c->temporal_down[i]);
      return -1;
    }
    temporal += c->temporal_down[i];
  }
  if (temporal > 2) {
    snprintf(err, errlen, "vae config has %d temporal resamples: a chunk of %d frames halves "
             "at most twice", temporal, WAN_VAE22_CHUNK);
    return -1;
  }
  /* Every level has a residual block: a level's resample takes its width. */
  if (c->num_res_blocks < 1 || c->num_res_blocks + 1 > WAN_VAE22_MAX_RES) {
    snprintf(err, errlen, "vae config num_res_blocks = %lld is outside 1..%d",
             (long long)c->num_res_blocks, WAN_VAE22_MAX_RES - 1);
    return -1;
  }
  return check_shortcuts(c, err, errlen);
}

/* ---------------------------------------------------------------- tables */

/* Encoder level i: dims[i] -> dims[i + 1]. */
static void add_down(const wan_vae22_config *c, wan_vae_table *t, wan_vae22_down *m, int i) {
  char prefix[64];
  const int64_t dim = wan_vae22_enc_dim(c, i + 1);
  int64_t in = wan_vae22_enc_dim(c, i);
  m->in_dim = in;
  m->out_dim = dim;
  m->has_down = i + 1 < c->n_mult;
  m->temporal = m->has_down && c->temporal_down[i];
  m->ft = m->temporal ? 2 : 1;
  m->fs = m->has_down ? 2 : 1;
  m->n_res = (int)c->num_res_blocks;
  for (int r = 0; r < m->n_res; r++) {
    snprintf(prefix, sizeof prefix, "encoder.downsamples.%d.downsamples.%d", i, r);
    wan_vae_table_add_resblock(t, &m->res[r], prefix, in, dim);
    in = dim;
  }
  m->dim = dim;
  m->conv_w = m->conv_b = m->time_w = m->time_b = NULL;
  if (!m->has_down) return;
  snprintf(prefix, sizeof prefix, "encoder.downsamples.%d.downsamples.%d", i, m->n_res);
  WAN_VAE22_DOWN_TENSORS(WAN_VAE_TABLE_ADD)
  if (m->temporal) {
    WAN_VAE22_TIME_DOWN_TENSORS(WAN_VAE_TABLE_ADD)
  }
}

/* Decoder level i: dims[i] -> dims[i + 1]. */
static void add_up(const wan_vae22_config *c, wan_vae_table *t, wan_vae22_up *m, int i) {
  char prefix[64];
  const int64_t dim = wan_vae22_dec_dim(c, i + 1);
  int64_t in = wan_vae22_dec_dim(c, i);
  m->in_dim = in;
  m->out_dim = dim;
  m->has_up = i + 1 < c->n_mult;
  m->temporal = wan_vae22_dec_temporal(c, i);
  m->ft = m->temporal ? 2 : 1;
  m->fs = 2;
  m->n_res = (int)c->num_res_blocks + 1;
  for (int r = 0; r < m->n_res; r++) {
    snprintf(prefix, sizeof prefix, "decoder.upsamples.%d.upsamples.%d", i, r);
    wan_vae_table_add_resblock(t, &m->res[r], prefix, in, dim);
    in = dim;
  }
  m->dim = dim;
  m->conv_w = m->conv_b = m->time_w = m->time_b = NULL;
  if (!m->has_up) return;
  snprintf(prefix, sizeof prefix, "decoder.upsamples.%d.upsamples.%d", i, m->n_res);
  if (m->temporal) {
    WAN_VAE22_TIME_UP_TENSORS(WAN_VAE_TABLE_ADD)
  }
  WAN_VAE22_UP_TENSORS(WAN_VAE_TABLE_ADD)
}

static void make_encoder(const wan_vae22_config *c, wan_vae22_enc_weights *m,
                         wan_vae_table *t) {
  const char *prefix = "";
  /* The names the encoder's own shapes are written in. */
  const int64_t in_ch = WAN_VAE22_IMG_CH, dim0 = wan_vae22_enc_dim(c, 0);
  const int64_t head_dim = wan_vae22_enc_dim(c, c->n_mult), z2 = 2 * c->z_dim;
  m->in_ch = in_ch;
  m->dim0 = dim0;
  m->mid_dim = m->head_dim = head_dim;
  m->z2 = z2;
  m->z_dim = c->z_dim;
  WAN_VAE22_ENC_IN_TENSORS(WAN_VAE_TABLE_ADD)
  m->n_levels = c->n_mult;
  for (int i = 0; i < c->n_mult; i++) add_down(c, t, &m->level[i], i);
  wan_vae_table_add_middle(t, "encoder", &m->mid0, &m->mid_attn, &m->mid2, head_dim);
  WAN_VAE22_ENC_HEAD_TENSORS(WAN_VAE_TABLE_ADD)
}

static void make_decoder(const wan_vae22_config *c, wan_vae22_dec_weights *m,
                         wan_vae_table *t) {
  const char *prefix = "";
  const int64_t z_dim = c->z_dim, mid_dim = wan_vae22_dec_dim(c, 0);
  const int64_t head_dim = wan_vae22_dec_dim(c, c->n_mult), out_ch = WAN_VAE22_IMG_CH;
  m->z_dim = z_dim;
  m->mid_dim = mid_dim;
  m->head_dim = head_dim;
  m->out_ch = out_ch;
  WAN_VAE22_DEC_IN_TENSORS(WAN_VAE_TABLE_ADD)
  wan_vae_table_add_middle(t, "decoder", &m->mid0, &m->mid_attn, &m->mid2, mid_dim);
  m->n_levels = c->n_mult;
  for (int i = 0; i < c->n_mult; i++) add_up(c, t, &m->level[i], i);
  WAN_VAE22_DEC_HEAD_TENSORS(WAN_VAE_TABLE_ADD)
}

void wan_vae22_table_make(const wan_vae22_config *c, wan_vae22_part part, wan_vae22_weights *w,
                          wan_vae_table *out) {
  wan_vae_table_reset(out);
  if (part == WAN_VAE22_ENCODER) {
    memset(&w->enc, 0, sizeof w->enc);
    make_encoder(c, &w->enc, out);
  } else {
    memset(&w->dec, 0, sizeof w->dec);
    make_decoder(c, &w->dec, out);
  }
}

/* ---------------------------------------------------------------- description */

static int layout(const void *shape, void *out, char *err, size_t errlen) {
  return plan_vae22_layout_make(shape, out, err, errlen);
}

static const net_desc desc = {
    .name = "wan_vae22",
    .noun = "Wan 2.2 VAE",
    .schema = &wan_vae22_schema,
    .layout = layout,
};

const net_desc *wan_vae22_net(void) { return &desc; }
