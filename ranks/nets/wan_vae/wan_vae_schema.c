/* The Wan 2.1 VAE decoder's model file as data (see wan_vae_schema.h). */
#include "wan_vae_schema.h"

#include <math.h>
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

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The synth: distribution: conv weights uniform with variance 1/fan_in,
 * biases within 0.05, RMS gammas within 0.1 of 1. */
static void synth_scale(const net_tensor *t, double *center, double *half) {
  *center = 0.0;
  if (ends_with(t->name, ".gamma")) {
    *center = 1.0;
    *half = 0.1;
  } else if (ends_with(t->name, ".bias")) {
    *half = 0.05;
  } else {
    *half = sqrt(3.0 / (double)(t->numel / t->shape[0]));
  }
}

/* The entries of table tb into out (when not NULL) under group. */
static int put_table(const wan_vae_table *tb, const char *group, net_tensor *out) {
  for (int i = 0; out && i < tb->count; i++) {
    net_tensor *t = &out[i];
    memset(t, 0, sizeof *t);
    snprintf(t->group, NET_PATH_MAX, "%s", group);
    snprintf(t->name, NET_NAME_MAX, "%s", tb->t[i].name);
    t->ndim = tb->t[i].ndim;
    for (int d = 0; d < t->ndim; d++) t->shape[d] = tb->t[i].shape[d];
    net_tensor_finish(t);
    synth_scale(t, &t->synth_center, &t->synth_half);
  }
  return tb->count;
}

/* The decoder's tensors, then (with the encoder) the encoder's: a
 * decoder-only file's table, checksum and datasets are the decoder's. */
static int tensors(const void *config, net_tensor *out) {
  const wan_vae_config *c = config;
  wan_vae_weights *w = sp_xmalloc(sizeof *w);
  wan_vae_enc_weights *ew = sp_xmalloc(sizeof *ew);
  wan_vae_table *tb = sp_xmalloc(sizeof *tb);
  wan_vae_table_make(c, w, tb);
  int n = put_table(tb, WAN_VAE_GROUP, out);
  if (c->encoder) {
    wan_vae_enc_table_make(c, ew, tb);
    n += put_table(tb, WAN_VAE_ENC_GROUP, out ? out + n : NULL);
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

static int preset(const char *name, void *config) {
  for (int i = 0; i < N_PRESETS; i++) {
    if (strcmp(name, presets[i].name) != 0) continue;
    wan_vae_config_published(config);
    if (presets[i].dim) ((wan_vae_config *)config)->dim = presets[i].dim;
    ((wan_vae_config *)config)->encoder = 1;
    return 0;
  }
  return -1;
}

/* The architecture's fields: a preset names a decoder with or without
 * the encoder (encoder is not compared). */
static int config_equal(const wan_vae_config *a, const wan_vae_config *b) {
  if (a->dim != b->dim || a->z_dim != b->z_dim || a->n_mult != b->n_mult ||
      a->num_res_blocks != b->num_res_blocks)
    return 0;
  for (int i = 0; i < a->n_mult; i++)
    if (a->dim_mult[i] != b->dim_mult[i]) return 0;
  for (int i = 0; i + 1 < a->n_mult; i++)
    if (a->temporal_up[i] != b->temporal_up[i]) return 0;
  return 1;
}

static const char *preset_match(const void *config) {
  for (int i = 0; i < N_PRESETS; i++) {
    wan_vae_config p = {0};
    preset(presets[i].name, &p);
    if (config_equal(&p, config)) return presets[i].name;
  }
  return NULL;
}

static const char *preset_names(void) {
  static char list[128];
  if (!list[0])
    for (int i = 0; i < N_PRESETS; i++)
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
               presets[i].name);
  return list;
}

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
