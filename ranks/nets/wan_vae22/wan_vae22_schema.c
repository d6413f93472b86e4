/* The Wan 2.2 VAE's model file as data (see wan_vae22_schema.h). */
#include "wan_vae22_schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define AT(f) offsetof(wan_vae22_config, f)
#define STR_(x) #x
#define STR(x) STR_(x)

static const net_attr attrs[] = {
    {"dim", NET_ATTR_I64, NET_FIELD_I64, AT(dim), 1, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL},
    {"dec_dim", NET_ATTR_I64, NET_FIELD_I64, AT(dec_dim), 1, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL},
    {"z_dim", NET_ATTR_I64, NET_FIELD_I64, AT(z_dim), 1, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL},
    {"n_mult", NET_ATTR_I64, NET_FIELD_INT, AT(n_mult), 1, NULL, 0, 1, 1, WAN_VAE22_MAX_LEVELS,
     0, 0, NULL, NULL},
    {"dim_mult", NET_ATTR_I64, NET_FIELD_I64, AT(dim_mult), 0, "n_mult", 0, 0, 0, 0, 0, 0, NULL,
     NULL},
    {"num_res_blocks", NET_ATTR_I64, NET_FIELD_I64, AT(num_res_blocks), 1, NULL, 0, 0, 0, 0, 0, 0,
     NULL, NULL},
    {"temporal_down", NET_ATTR_I64, NET_FIELD_INT, AT(temporal_down), 0, "n_mult", -1, 1, 0, 1, 0,
     0, NULL, NULL},
};

static int check(const void *config, char *err, size_t n) {
  return wan_vae22_config_check(config, err, n);
}

const char *wan_vae22_group(wan_vae22_part p) {
  return p == WAN_VAE22_ENCODER ? WAN_VAE22_ENC_GROUP : WAN_VAE22_DEC_GROUP;
}

static int groups(const void *config, net_group *out) {
  (void)config;
  if (out) {
    out[0] = (net_group){WAN_VAE22_DEC_GROUP, NULL, 0};
    out[1] = (net_group){WAN_VAE22_ENC_GROUP, NULL, 0};
  }
  return 2;
}

/* The decoder's table, then the encoder's, each in its group. */
static int tensors(const void *config, net_tensor *out) {
  wan_vae22_weights *w = sp_xmalloc(sizeof *w);
  wan_vae_table *tb = sp_xmalloc(sizeof *tb);
  int n = 0;
  for (int p = 0; p < WAN_VAE22_PARTS; p++) {
    wan_vae22_table_make(config, (wan_vae22_part)p, w, tb);
    n += wan_vae_table_put(tb, wan_vae22_group((wan_vae22_part)p), out ? out + n : NULL);
  }
  free(tb);
  free(w);
  return n;
}

/* The presets: the published config, and wan2.2-vae-tiny, the published
 * structure (dim_mult, residual blocks, temporal downsampling: T = 1 + 4
 * (F - 1) and 16x in space) at base widths 8: encoder widths 8, 8, 16, 32,
 * 32, decoder widths 32, 32, 32, 16, 8; for tests. */
static const struct {
  const char *name;
  int64_t dim, dec_dim; /* 0: the published */
} presets[] = {
    {"wan2.2-vae", 0, 0},
    {"wan2.2-vae-tiny", 8, 8},
};
enum { N_PRESETS = sizeof presets / sizeof presets[0] };

static const char *preset_name(int i) { return presets[i].name; }

static int preset(const char *name, void *config) {
  const int i = net_preset_index(preset_name, N_PRESETS, name);
  if (i < 0) return -1;
  wan_vae22_config *c = config;
  wan_vae22_config_published(c);
  if (presets[i].dim) c->dim = presets[i].dim;
  if (presets[i].dec_dim) c->dec_dim = presets[i].dec_dim;
  return 0;
}

NET_PRESET_LOOKUPS(wan_vae22_schema, preset_name, N_PRESETS)

static const char *const root_dtypes[] = {"bf16", "fp32", NULL};

const net_schema wan_vae22_schema = {
    .arch = WAN_VAE22_ARCH,
    .what = "Wan 2.2 VAE",
    .config_size = sizeof(wan_vae22_config),
    .attrs = attrs,
    .nattrs = (int)(sizeof attrs / sizeof attrs[0]),
    .attr_hint = "dim, dec_dim, z_dim, num_res_blocks: integers; n_mult 1.." STR(
        WAN_VAE22_MAX_LEVELS) "; dim_mult: n_mult integers; temporal_down: n_mult - 1",
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
