/* The Wan 2.1 DiT's model file as data (see wan_schema.h). */
#include "wan_schema.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "wan_weights.h"

/* ---- config attributes -------------------------------------------------- */

#define CFG(f) offsetof(wan_file_config, c.f)
#define I64(name, field) \
  {name, NET_ATTR_I64, NET_FIELD_I64, CFG(field), 1, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL}
#define TWO(name, field, type, ftype, rg, lo, hi, why) \
  {name, type, ftype, offsetof(wan_file_config, field), 1, NULL, 0, rg, lo, hi, 0, 0, \
   "experts", why}
#define NOT_A_NUMBER(name) \
  "root attribute " name " of a two-expert model is missing or not a number"

static const net_attr attrs[] = {
    I64("dim", dim), I64("ffn_dim", ffn_dim), I64("heads", heads), I64("layers", layers),
    I64("in_dim", in_dim), I64("out_dim", out_dim),
    {"patch", NET_ATTR_I64, NET_FIELD_I64, CFG(patch), 3, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL},
    I64("text_len", text_len), I64("text_dim", text_dim), I64("freq_dim", freq_dim),
    {"eps", NET_ATTR_F64, NET_FIELD_F64, CFG(eps), 1, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL},
    /* absent: one expert */
    {"experts", NET_ATTR_I64, NET_FIELD_I64, offsetof(wan_file_config, experts), 1, NULL, 0, 1, 2,
     2, 1, 1, NULL,
     "root attribute experts is not the integer 2 (a model without it has one expert)"},
    TWO("steps", steps, NET_ATTR_I64, NET_FIELD_I64, 1, 1, 1000,
        "root attribute steps of a two-expert model is missing or not in 1..1000"),
    TWO("boundary", boundary, NET_ATTR_F64, NET_FIELD_F64, 0, 0, 0, NOT_A_NUMBER("boundary")),
    TWO("cfg_high", cfg_high, NET_ATTR_F64, NET_FIELD_F64, 0, 0, 0, NOT_A_NUMBER("cfg_high")),
    TWO("cfg_low", cfg_low, NET_ATTR_F64, NET_FIELD_F64, 0, 0, 0, NOT_A_NUMBER("cfg_low")),
    TWO("shift", shift, NET_ATTR_F64, NET_FIELD_F64, 0, 0, 0, NOT_A_NUMBER("shift")),
};

int wan_experts_check(const wan_file_config *f, char *err, size_t n) {
  if (f->experts == 1) return 0;
  if (f->experts != 2)
    snprintf(err, n, "experts = %lld: a model has one expert or two", (long long)f->experts);
  else if (!(f->boundary > 0 && f->boundary < 1))
    snprintf(err, n, "boundary %g is not in (0, 1)", f->boundary);
  else if (!(f->cfg_high >= 0 && f->cfg_high <= 100 && f->cfg_low >= 0 && f->cfg_low <= 100))
    snprintf(err, n, "cfg_high %g, cfg_low %g: each must be in 0..100", f->cfg_high, f->cfg_low);
  else if (!(f->shift > 0 && f->shift <= 1000))
    snprintf(err, n, "shift %g is not in (0, 1000]", f->shift);
  else if (!(f->steps >= 1 && f->steps <= 1000))
    snprintf(err, n, "steps %lld is not in 1..1000", (long long)f->steps);
  else
    return 0;
  return -1;
}

static int check(const void *config, char *err, size_t n) {
  const wan_file_config *f = config;
  if (wan_config_check(&f->c, err, n) != 0) return -1;
  char why[160];
  if (wan_experts_check(f, why, sizeof why) == 0) return 0;
  snprintf(err, n, "root attributes: %s", why);
  return -1;
}

/* ---- groups and tensors ---------------------------------------------------- */

static const char *expert_name(int experts, int e) {
  return experts < 2 ? "" : e == 0 ? "high" : "low";
}

/* "" or "/experts/high": where expert e's groups live. */
static void expert_root(int experts, int e, char *buf, size_t n) {
  if (experts < 2)
    buf[0] = 0;
  else
    snprintf(buf, n, "/experts/%s", expert_name(experts, e));
}

static int groups(const void *config, net_group *out) {
  const wan_file_config *f = config;
  const int ne = (int)f->experts, nb = (int)f->c.layers;
  int n = 0;
  char pre[32];
  if (ne > 1) {
    if (out) {
      out[n] = (net_group){"/experts", NULL, 0};
      out[n + 1] = (net_group){"/experts/high", NULL, 0};
      out[n + 2] = (net_group){"/experts/low", NULL, 0};
    }
    n += 3;
  }
  for (int e = 0; e < ne; e++) {
    expert_root(ne, e, pre, sizeof pre);
    if (out) {
      static const char *const names[3] = {"embed", "blocks", "head"};
      for (int g = 0; g < 3; g++) {
        out[n + g] = (net_group){"", g == 1 ? "layers" : NULL, 0};
        snprintf(out[n + g].path, NET_PATH_MAX, "%s/%s", pre, names[g]);
      }
      for (int b = 0; b < nb; b++) {
        out[n + 3 + b] = (net_group){"", NULL, 0};
        snprintf(out[n + 3 + b].path, NET_PATH_MAX, "%s/blocks/%04d", pre, b);
      }
    }
    n += 3 + nb;
  }
  return n;
}

const char *wan_synth_prefix(int experts, int e) {
  if (experts < 2) return "";
  return e == 0 ? "high_noise_model." : "low_noise_model.";
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

void wan_synth_scale(const char *n, int64_t fan_in, double *center, double *half) {
  *center = 0.0;
  if (strstr(n, "modulation")) {
    *half = 0.1;
  } else if (strstr(n, "norm_q") || strstr(n, "norm_k") || strcmp(n, "norm3.weight") == 0) {
    *center = 1.0;
    *half = 0.1;
  } else if (ends_with(n, ".bias")) {
    *half = 0.05;
  } else {
    /* A weight: variance 1/fan_in (uniform half-width sqrt(3/fan_in)) keeps
     * a linear map's output at the scale of its input. time_projection
     * makes the modulation: a quarter of that keeps gates and scales
     * moderate, as in trained Wan models. */
    *half = sqrt(3.0 / (double)fan_in);
    if (strncmp(n, "time_projection", 15) == 0) *half *= 0.25;
  }
}

/* The tensors of one group instance of expert e into out (when not NULL). */
static int group_tensors(const wan_file_config *f, int e, wan_group g, int block, net_tensor *out) {
  wan_layout l;
  wan_layout_make(&f->c, g, KERN_DTYPE_F32, &l);
  if (!out) return l.count;
  char pre[32];
  expert_root((int)f->experts, e, pre, sizeof pre);
  for (int i = 0; i < l.count; i++) {
    net_tensor *t = &out[i];
    memset(t, 0, sizeof *t);
    if (g == WAN_GROUP_BLOCK) {
      snprintf(t->group, NET_PATH_MAX, "%s/blocks/%04d", pre, block);
      snprintf(t->key, sizeof t->key, "blocks.%d.%s", block, l.t[i].name);
    } else {
      snprintf(t->group, NET_PATH_MAX, "%s/%s", pre, g == WAN_GROUP_EMBED ? "embed" : "head");
    }
    snprintf(t->name, NET_NAME_MAX, "%s", l.t[i].name);
    t->synth_prefix = wan_synth_prefix((int)f->experts, e);
    t->ndim = l.t[i].ndim;
    memcpy(t->shape, l.t[i].shape, sizeof t->shape);
    t->quant = g == WAN_GROUP_BLOCK && wan_block_linear_of(i) >= 0;
    net_tensor_finish(t);
    wan_synth_scale(t->name, t->numel / t->shape[0], &t->synth_center, &t->synth_half);
  }
  return l.count;
}

int wan_schema_index(const wan_file_config *f, int e, wan_group g, int block, int i) {
  const int ne = WAN_EMBED_T_COUNT, nb = WAN_BLOCK_T_COUNT, nh = WAN_HEAD_T_COUNT;
  const int per = ne + (int)f->c.layers * nb + nh;
  const int at = g == WAN_GROUP_EMBED ? 0 : g == WAN_GROUP_BLOCK ? ne + block * nb
                                                                  : ne + (int)f->c.layers * nb;
  return e * per + at + i;
}

static int tensors(const void *config, net_tensor *out) {
  const wan_file_config *f = config;
  int n = 0;
  for (int e = 0; e < (int)f->experts; e++)
    for (int g = 0; g < 3; g++)
      for (int b = 0; b < (g == WAN_GROUP_BLOCK ? (int)f->c.layers : 1); b++)
        n += group_tensors(f, e, (wan_group)g, b, out ? out + n : NULL);
  return n;
}

/* ---- presets ------------------------------------------------------------------ */

/* The two-expert presets: two DiTs of a Wan 2.1 preset's config. */
static const struct {
  const char *name, *base;
} two_expert[] = {{"wan2.2-tiny", "wan2.1-tiny"}, {"wan2.2-a14b", "wan2.1-14b"}};
enum { N_TWO = sizeof two_expert / sizeof two_expert[0] };

static int preset(const char *name, void *config) {
  wan_file_config *f = config;
  memset(f, 0, sizeof *f);
  f->experts = 1;
  if (wan_preset(name, &f->c) == 0) return 0;
  for (int i = 0; i < N_TWO; i++)
    if (strcmp(name, two_expert[i].name) == 0) {
      wan_preset(two_expert[i].base, &f->c);
      f->experts = 2;
      f->steps = WAN_A14B_STEPS;
      f->boundary = WAN_A14B_BOUNDARY;
      f->cfg_high = WAN_A14B_CFG_HIGH;
      f->cfg_low = WAN_A14B_CFG_LOW;
      f->shift = WAN_A14B_SHIFT;
      return 0;
    }
  return -1;
}

static const char *preset_match(const void *config) {
  const wan_file_config *f = config;
  const char *p = wan_preset_match(&f->c);
  if (!p || f->experts < 2) return p;
  for (int i = 0; i < N_TWO; i++)
    if (strcmp(p, two_expert[i].base) == 0) return two_expert[i].name;
  return NULL;
}

static const char *preset_names(void) {
  static char buf[256];
  if (!buf[0]) {
    for (int i = 0; wan_preset_names[i]; i++)
      snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", i ? ", " : "",
               wan_preset_names[i]);
    for (int i = 0; i < N_TWO; i++)
      snprintf(buf + strlen(buf), sizeof buf - strlen(buf), ", %s", two_expert[i].name);
  }
  return buf;
}

static const char *const root_dtypes[] = {"bf16", "fp32", "fp8", "int8", "quant", "quant-fp32",
                                          NULL};

const net_schema wan_schema = {
    .arch = WAN_ARCH,
    .what = "DiT",
    .config_size = sizeof(wan_file_config),
    .attrs = attrs,
    .nattrs = (int)(sizeof attrs / sizeof attrs[0]),
    .check = check,
    .root_dtypes = root_dtypes,
    .synth_dtype = "bf16",
    .groups = groups,
    .tensors = tensors,
    .preset = preset,
    .preset_match = preset_match,
    .preset_names = preset_names,
    .preset_kind = "",
};
