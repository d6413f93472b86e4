/* The UMT5 text encoder's model file as data (see umt5_schema.h). */
#include "umt5_schema.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "umt5.h"

#define I64(f) \
  {#f, NET_ATTR_I64, NET_FIELD_I64, offsetof(umt5_config, f), 1, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL}

static const net_attr attrs[] = {I64(vocab), I64(dim),    I64(dim_attn), I64(ffn),
                                 I64(heads), I64(layers), I64(buckets),  I64(max_dist)};

static int check(const void *config, char *err, size_t n) {
  return umt5_config_check(config, err, n);
}

static int groups(const void *config, net_group *out) {
  (void)config;
  if (out) {
    out[0] = (net_group){UMT5_GROUP, NULL, 0};
    out[1] = (net_group){UMT5_TOK_GROUP, NULL, 1};
  }
  return 2;
}

/* The synth: distribution (t5_file.h): embedding rows uniform in [-1, 1),
 * norm weights within 0.1 of 1, position tables within 0.5, q with
 * variance 1 / (dim x head width) as Wan initialises it, the other linears
 * 1 / fan_in. */
static void synth_scale(const umt5_config *c, const umt5_tensor *t, double *center,
                        double *half) {
  *center = 0.0;
  if (t->ndim == 1) { /* norm weights */
    *center = 1.0;
    *half = 0.1;
  } else if (t->layer < 0) { /* token embedding */
    *half = 1.0;
  } else if (t->slot == 9) { /* position table */
    *half = 0.5;
  } else if (t->slot == 1) { /* q: Wan's init std (dim * dim_attn)^-1/2 scaled by heads */
    *half = sqrt(3.0 / ((double)t->shape[1] * (double)(c->dim_attn / c->heads)));
  } else {
    *half = sqrt(3.0 / (double)t->shape[1]);
  }
}

static int tensors(const void *config, net_tensor *out) {
  const umt5_config *c = config;
  const int n = umt5_table_count(c);
  for (int i = 0; out && i < n; i++) {
    umt5_tensor u;
    umt5_table_entry(c, i, &u);
    net_tensor *t = &out[i];
    net_tensor_init(t, UMT5_GROUP, u.name, u.ndim, u.shape);
    /* the layers' linear weights: q, k, v, o, gate, fc1, fc2 */
    t->quant = u.layer >= 0 && u.ndim == 2 && u.slot != 9;
    synth_scale(c, &u, &t->synth_center, &t->synth_half);
  }
  return n;
}

/* umt5-tiny: the published bucket layout at the width Wan's DiTs take
 * (dim 4096: wan2.1-tiny's and wan2.2-tiny's text_dim, as every Wan DiT's),
 * with a small attention (4 heads of 16), feed-forward (128) and
 * vocabulary (384 rows: the built-in tiny tokenizer's 320 pieces fit), 2
 * layers: 6.8 million parameters (UMT5.md "Config"). Its files and
 * synth: specs carry the built-in tiny tokenizer (t5_file.h). */
static const struct {
  const char *name;
  umt5_config tiny; /* all zero: the published config */
} presets[] = {
    {"umt5-xxl", {0}},
    {"umt5-tiny", {.vocab = 384, .dim = 4096, .dim_attn = 64, .ffn = 128, .heads = 4,
                   .layers = 2, .buckets = 32, .max_dist = 128}},
};
enum { N_PRESETS = sizeof presets / sizeof presets[0] };

static const char *preset_name(int i) { return presets[i].name; }

static int preset(const char *name, void *config) {
  const int i = net_preset_index(preset_name, N_PRESETS, name);
  if (i < 0) return -1;
  if (presets[i].tiny.dim)
    *(umt5_config *)config = presets[i].tiny;
  else
    umt5_config_published(config);
  return 0;
}

NET_PRESET_LOOKUPS(umt5_schema, preset_name, N_PRESETS)

static const char *const root_dtypes[] = {"bf16", "fp32", NULL};

const net_schema umt5_schema = {
    .arch = UMT5_ARCH,
    .what = "text encoder",
    .config_size = sizeof(umt5_config),
    .attrs = attrs,
    .nattrs = (int)(sizeof attrs / sizeof attrs[0]),
    .check = check,
    .root_dtypes = root_dtypes,
    .synth_dtype = "fp32",
    .groups = groups,
    .tensors = tensors,
    .preset = preset,
    .preset_match = preset_match,
    .preset_names = preset_names,
    .preset_kind = "text encoder ",
};
