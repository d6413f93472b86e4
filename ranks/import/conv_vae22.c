/* The Wan 2.2 VAE through the converter pipeline (conv.h; convert_vae22.h
 * is its API): the published Wan2_2_VAE keys (also ComfyUI's) and
 * diffusers' AutoencoderKLWan (is_residual) as tables (VAE22.md
 * "Checkpoint keys"), both parts, the config from the shapes. */
#include "convert_vae22.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"
#include "conv_vae_rules.h"
#include "convert.h"
#include "log.h"
#include "wan_vae22_file.h"
#include "wan_vae22_schema.h"

/* ---- the layouts ------------------------------------------------------------------ */

/* The key map's index parameters: R = num_res_blocks; an encoder level's
 * downsample is its module R, a decoder level's upsample its module R + 1. */
enum { P_ENC_DOWN = 1 /* R */, P_DEC_UP = 2 /* R + 1 */ };

static const conv_rule official_rules[] = {
    CONV_RENAME("conv1.", "conv1."),
    CONV_RENAME("conv2.", "conv2."),
    CONV_RENAME("encoder.conv1.", "encoder.conv1."),
    CONV_RENAME("encoder.downsamples.", "encoder.downsamples."),
    CONV_RENAME("encoder.middle.", "encoder.middle."),
    CONV_RENAME("encoder.head.", "encoder.head."),
    CONV_RENAME("decoder.conv1.", "decoder.conv1."),
    CONV_RENAME("decoder.middle.", "decoder.middle."),
    CONV_RENAME("decoder.upsamples.", "decoder.upsamples."),
    CONV_RENAME("decoder.head.", "decoder.head."),
    CONV_END,
};

/* Level L of each part (the rule table writes one index into the official
 * key, so a level is a pair of rules; the resample's first, so that an
 * official key maps back to it). */
#define ENC_LEVEL(L)                                                                          \
  {.from = "encoder.down_blocks." #L ".downsampler.",                                         \
   .to = "encoder.downsamples." #L ".downsamples.#.", .add = P_ENC_DOWN},                     \
  {.from = "encoder.down_blocks." #L ".resnets.#.",                                           \
   .to = "encoder.downsamples." #L ".downsamples.#.", .leaf = conv_vae_resblock}
#define DEC_LEVEL(L)                                                                          \
  {.from = "decoder.up_blocks." #L ".upsampler.", .to = "decoder.upsamples." #L ".upsamples.#.", \
   .add = P_DEC_UP},                                                                          \
  {.from = "decoder.up_blocks." #L ".resnets.#.",                                             \
   .to = "decoder.upsamples." #L ".upsamples.#.", .leaf = conv_vae_resblock}

static const conv_rule diffusers_rules[] = {
    CONV_RENAME("quant_conv.", "conv1."),
    CONV_RENAME("post_quant_conv.", "conv2."),
    CONV_RENAME("encoder.conv_in.", "encoder.conv1."),
    ENC_LEVEL(0), ENC_LEVEL(1), ENC_LEVEL(2), ENC_LEVEL(3),
    CONV_VAE_DIFFUSERS_MIDDLE("encoder"),
    CONV_VAE_DIFFUSERS_HEAD("encoder"),
    CONV_RENAME("decoder.conv_in.", "decoder.conv1."),
    CONV_VAE_DIFFUSERS_MIDDLE("decoder"),
    DEC_LEVEL(0), DEC_LEVEL(1), DEC_LEVEL(2), DEC_LEVEL(3),
    CONV_VAE_DIFFUSERS_HEAD("decoder"),
    CONV_END,
};
_Static_assert(WAN_VAE22_MAX_LEVELS == 4, "diffusers_rules lists 4 levels of each part");

static const conv_layout official = {"official", "", official_rules, NULL};
static const conv_layout diffusers = {"diffusers", "", diffusers_rules, NULL};
static const conv_layout *const layouts[] = {&official, &diffusers, NULL};

static void params_of(int64_t R, int64_t *param) {
  param[P_ENC_DOWN] = R;
  param[P_DEC_UP] = R + 1;
}

/* key = prefix, a decimal index, then mid (at the start of the rest). */
static int indexed(const char *key, const char *prefix, const char *mid) {
  int64_t v;
  const char *rest = conv_index_after(key, prefix, &v);
  return rest && strncmp(rest, mid, strlen(mid)) == 0;
}

int rank_convert_vae22_key(const char *key) {
  return indexed(key, "encoder.downsamples.", "downsamples.") ||
         indexed(key, "decoder.upsamples.", "upsamples.") ||
         indexed(key, "encoder.down_blocks.", "resnets.") ||
         indexed(key, "encoder.down_blocks.", "downsampler.") ||
         indexed(key, "decoder.up_blocks.", "upsampler.");
}

int rank_convert_is_vae22(int ninputs, char *const *inputs, int *is) {
  return conv_any_key(ninputs, inputs, rank_convert_vae22_key, is);
}

/* ---- the hooks ------------------------------------------------------------------------ */

/* A DiT's tensors among the VAE's: refused. */
static int screen(conv_job *j) {
  int dit = 0;
  const char *example = NULL;
  for (int i = 0; i < j->ck.n; i++) {
    const char *key = j->ck.t[i]->key, *nm;
    wan_group g;
    int b;
    for (int s = RANK_CONVERT_OFFICIAL; s <= RANK_CONVERT_COMFY; s++)
      if (rank_convert_map_key((rank_convert_style)s, key, &g, &b, &nm) == 0) {
        if (!dit++) example = key;
        break;
      }
  }
  if (dit > 0) {
    sp_log_error("%s: %d tensors of a Wan DiT (for example '%s') beside the VAE's: a checkpoint "
                 "holds one model; convert the DiT and the VAE separately",
                 j->ck.label, dit, example);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* R: the residual blocks of the encoder's level 0, before the keys are
 * mapped. */
static void params(conv_job *j) {
  const char *pre = j->layout == &diffusers ? "encoder.down_blocks.0.resnets."
                                            : "encoder.downsamples.0.downsamples.";
  int64_t most = -1, v;
  for (int i = 0; i < j->ck.n; i++) {
    const char *rest = conv_index_after(j->ck.t[i]->key, pre, &v);
    const int res = rest && (j->layout == &diffusers || strncmp(rest, "residual.", 9) == 0);
    if (res && v > most) most = v;
  }
  if (most < 0)
    conv_problem(&j->p, "%s: no residual block '%s0.*' (needed to infer num_res_blocks)",
                 j->ck.label, pre);
  params_of(most + 1, j->param);
}

/* The first dimension of tensor name (ndim dims), or -1 after a problem
 * naming it and why it is needed. */
static int64_t rows_of(conv_job *j, const char *name, int ndim, const char *why) {
  const conv_src *s = conv_job_find(j, name);
  char key[1200];
  if (s && s->t->ndim == ndim && s->t->shape[0] >= 1) return s->t->shape[0];
  conv_job_key(j, name, key, sizeof key);
  if (!s)
    conv_problem(&j->p, "%s: missing tensor '%s' (needed to infer %s)", j->ck.label, key, why);
  else
    conv_problem(&j->p, "%s: tensor '%s': %d dims, expected %d (needed to infer %s)",
                 conv_path(&j->ck, s->t), key, s->t->ndim, ndim, why);
  return -1;
}

/* Each level's width (its first block's residual.2.weight) in both parts:
 * dim, dim_mult, dec_dim; 0, or -1 after a problem. */
static int level_widths(conv_job *j, wan_vae22_config *c) {
  char name[96];
  const int64_t dim = rows_of(j, "encoder.conv1.weight", 5, "the encoder's width");
  if (dim < 0) return -1;
  c->dim = dim;
  for (int i = 0; i < c->n_mult; i++) {
    snprintf(name, sizeof name, "encoder.downsamples.%d.downsamples.0.residual.2.weight", i);
    const int64_t w = rows_of(j, name, 5, "a level's width");
    if (w < 0) return -1;
    if (w % dim) {
      conv_problem(&j->p, "%s: encoder level %d has width %lld, not a multiple of %lld",
                   j->ck.label, i, (long long)w, (long long)dim);
      return -1;
    }
    c->dim_mult[i] = w / dim;
  }
  snprintf(name, sizeof name, "decoder.upsamples.%d.upsamples.0.residual.2.weight", c->n_mult - 1);
  const int64_t last = rows_of(j, name, 5, "the decoder's width");
  if (last < 0) return -1;
  if (last % c->dim_mult[0]) {
    conv_problem(&j->p, "%s: the decoder's last width %lld is not a multiple of dim_mult[0] = "
                 "%lld", j->ck.label, (long long)last, (long long)c->dim_mult[0]);
    return -1;
  }
  c->dec_dim = last / c->dim_mult[0];
  for (int i = 0; i + 1 < c->n_mult; i++) {
    snprintf(name, sizeof name, "encoder.downsamples.%d.downsamples.%lld.time_conv.weight", i,
             (long long)c->num_res_blocks);
    c->temporal_down[i] = conv_job_find(j, name) != NULL;
  }
  return 0;
}

static void config_line(const wan_vae22_config *c) {
  char dm[64] = "", td[64] = "";
  for (int i = 0; i < c->n_mult; i++)
    snprintf(dm + strlen(dm), sizeof dm - strlen(dm), "%s%lld", i ? ", " : "",
             (long long)c->dim_mult[i]);
  for (int i = 0; i + 1 < c->n_mult; i++)
    snprintf(td + strlen(td), sizeof td - strlen(td), "%s%d", i ? ", " : "", c->temporal_down[i]);
  sp_log_info("convert: inferred dim %lld, dec_dim %lld, z_dim %lld, dim_mult (%s), "
              "num_res_blocks %lld, temporal_down (%s)", (long long)c->dim, (long long)c->dec_dim,
              (long long)c->z_dim, dm, (long long)c->num_res_blocks, td);
}

/* z_dim from conv2.weight; the levels from the encoder's modules; each
 * level's width from its first block in both parts; temporal_down from
 * which encoder resamples have a time_conv (the decoder's are checked
 * through the table of the config). */
static int infer(conv_job *j) {
  wan_vae22_config *c = j->config;
  memset(c, 0, sizeof *c);
  const int64_t z = rows_of(j, "conv2.weight", 5, "z_dim");
  if (z < 0) return -1;
  c->z_dim = z;
  c->num_res_blocks = j->param[P_ENC_DOWN];
  const int64_t levels = conv_job_count(j, "encoder.downsamples.");
  if (levels < 1 || levels > WAN_VAE22_MAX_LEVELS ||
      conv_job_count(j, "decoder.upsamples.") != levels) {
    conv_problem(&j->p, "%s: %lld encoder and %lld decoder levels: a Wan 2.2 VAE has as many of "
                 "each, 1..%d", j->ck.label, (long long)levels,
                 (long long)conv_job_count(j, "decoder.upsamples."), WAN_VAE22_MAX_LEVELS);
    return -1;
  }
  c->n_mult = (int)levels;
  if (level_widths(j, c) != 0) return -1;
  char err[256];
  if (wan_vae22_config_check(c, err, sizeof err) != 0) {
    conv_problem(&j->p, "%s: inferred config is not supported: %s", j->ck.label, err);
    return -1;
  }
  config_line(c);
  return 0;
}

static const conv_dtype dtypes[] = {CONV_F32, CONV_F16, CONV_BF16};

const conv_net conv_vae22 = {
    .what = "a Wan 2.2 VAE",
    .short_what = "Wan 2.2 VAE",
    .schema = &wan_vae22_schema,
    .layouts = layouts,
    .default_layout = 0,
    .dtypes = dtypes,
    .ndtypes = (int)(sizeof dtypes / sizeof dtypes[0]),
    .skip_what = "tensors",
    .screen = screen,
    .params = params,
    .infer = infer,
};

/* ---- the whole conversion ------------------------------------------------------------- */

int rank_convert_vae22_run(int ninputs, char *const *args, const char *out_path, kern_dtype od) {
  conv_job j;
  int rc = conv_prepare(&conv_vae22, ninputs, args, out_path, &j);
  const wan_vae22_config *c = j.config;
  const char *preset = rc == SP_OK ? wan_vae22_schema.preset_match(c) : NULL;
  if (rc == SP_OK) {
    const conv_output o = {out_path, c, kern_dtype_name(od), preset, NULL, 0, KERN_DTYPE_COUNT};
    rc = conv_write(&conv_vae22, &j, 1, &o);
  }
  if (rc == SP_OK) {
    int64_t params = 0;
    for (int i = 0; i < j.nt; i++) params += j.t[i].numel;
    sp_log_info("convert: wrote %s (Wan 2.2 VAE, encoder and decoder, %s, %s, %d tensors, %lld "
                "parameters)", out_path, preset ? preset : "custom config", kern_dtype_name(od),
                j.nt, (long long)params);
  }
  conv_job_free(&j);
  return rc;
}
