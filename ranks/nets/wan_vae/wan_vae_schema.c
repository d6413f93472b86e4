/* The Wan 2.1 VAE decoder's model file as data (see wan_vae_schema.h). */
#include "wan_vae_schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "wan_vae_enc.h"

#define AT(f) offsetof(wan_vae_config, f)
#define STR_(x) #x
#define STR(x) STR_(x)

static const net_attr attrs[] = {
    {"dim", NET_ATTR_I64, NET_FIELD_I64, AT(dim), 1, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL},
    {"z_dim", NET_ATTR_I64, NET_FIELD_I64, AT(z_dim), 1, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL},
    {"n_mult", NET_ATTR_I64, NET_FIELD_INT, AT(n_mult), 1, NULL, 0, 1, 1, WAN_VAE_MAX_LEVELS, 0,
     0, NULL, NULL},
    {"dim_mult", NET_ATTR_I64, NET_FIELD_I64, AT(dim_mult), 0, "n_mult", 0, 0, 0, 0, 0, 0, NULL,
     NULL},
    {"num_res_blocks", NET_ATTR_I64, NET_FIELD_I64, AT(num_res_blocks), 1, NULL, 0, 0, 0, 0, 0, 0,
     NULL, NULL},
    {"temporal_up", NET_ATTR_I64, NET_FIELD_INT, AT(temporal_up), 0, "n_mult", -1, 1, 0, 1, 0, 0,
     NULL, NULL},
    /* written only as 1: a decoder-only file keeps exactly the attributes it had */
    {"encoder", NET_ATTR_I64, NET_FIELD_INT, AT(encoder), 1, NULL, 0, 1, 0, 1, 1, 0, NULL,
     NULL},
};

static int check(const void *config, char *err, size_t n) {
  return wan_vae_config_check(config, err, n);
}

static int groups(const void *config, net_group *out) {
  const int enc = ((const wan_vae_config *)config)->encoder;
  if (out) {
    out[0] = (net_group){WAN_VAE_GROUP, NULL, 0};
    if (enc) out[1] = (net_group){WAN_VAE_ENC_GROUP, NULL, 0};
  }
  return enc ? 2 : 1;
}

/* The decoder's tensors, then (with the encoder) the encoder's: a
 * decoder-only file's table, checksum and datasets are the decoder's. */
static int tensors(const void *config, net_tensor *out) {
  const wan_vae_config *c = config;
  wan_vae_weights *w = sp_xmalloc(sizeof *w);
  wan_vae_enc_weights *ew = sp_xmalloc(sizeof *ew);
  wan_vae_table *tb = sp_xmalloc(sizeof *tb);
  wan_vae_table_make(c, w, tb);
  int n = wan_vae_table_put(tb, WAN_VAE_GROUP, out);
  if (c->encoder) {
    wan_vae_enc_table_make(c, ew, tb);
    n += wan_vae_table_put(tb, WAN_VAE_ENC_GROUP, out ? out + n : NULL);
  }
  free(tb);
  free(ew);
  free(w);
  return n;
}

/* The presets: the published config, and wan2.1-vae-tiny, the published
 * structure (dim_mult, residual blocks, temporal upsampling, so T = 1 +
 * 4 (F - 1) and 8x in space) at dim 8: widths 32, 32, 16, 8, for tests.
 * Both with the encoder (a synth: VAE has both halves). */
static const struct {
  const char *name;
  int64_t dim; /* 0: the published */
} presets[] = {
    {"wan2.1-vae", 0},
    {"wan2.1-vae-tiny", 8},
};
enum { N_PRESETS = sizeof presets / sizeof presets[0] };

static const char *preset_name(int i) { return presets[i].name; }

static int preset(const char *name, void *config) {
  const int i = net_preset_index(preset_name, N_PRESETS, name);
  if (i < 0) return -1;
  wan_vae_config_published(config);
  if (presets[i].dim) ((wan_vae_config *)config)->dim = presets[i].dim;
  ((wan_vae_config *)config)->encoder = 1;
  return 0;
}

/* A preset names a decoder with or without the encoder: encoder, an
 * optional attribute, is not compared (net_config_same). */
NET_PRESET_LOOKUPS(wan_vae_schema, preset_name, N_PRESETS)

static const char *const root_dtypes[] = {"bf16", "fp32", NULL};

const net_schema wan_vae_schema = {
    .arch = WAN_VAE_ARCH,
    .what = "VAE decoder",
    .config_size = sizeof(wan_vae_config),
    .attrs = attrs,
    .nattrs = (int)(sizeof attrs / sizeof attrs[0]),
    .attr_hint = "dim, z_dim, num_res_blocks: integers; n_mult 1.." STR(WAN_VAE_MAX_LEVELS)
                 "; dim_mult: n_mult integers; "
                 "temporal_up: n_mult - 1",
    .check = check,
    .root_dtypes = root_dtypes,
    .synth_dtype = "fp32",
    .groups = groups,
    .tensors = tensors,
    .preset = preset,
    .preset_match = preset_match,
    .preset_names = preset_names,
    .preset_kind = "VAE ",
};
