/* The Wan 2.1 VAE through the converter pipeline (conv.h; convert_vae.h is
 * its API): the published WanVAE_ keys (also ComfyUI's wan_2.1_vae
 * file's) and diffusers' AutoencoderKLWan as tables (VAE.md "Model file
 * and checkpoint keys"), the decoder and, when the checkpoint has it, the
 * encoder; the config from the shapes. */
#include "convert_vae.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"
#include "conv_vae_rules.h"
#include "convert.h"
#include "log.h"
#include "vae_file.h"
#include "wan_vae_schema.h"

/* ---- the layouts ------------------------------------------------------------------ */

/* The key map's index parameters: R = num_res_blocks; each published
 * level holds R + 1 residual blocks and one resample, numbered across
 * levels. */
enum { P_LEVEL = 1 /* R + 2 */, P_SAMPLER = 2 /* R + 1 */, P_R = 3 };

static const conv_rule official_rules[] = {
    CONV_RENAME("conv2.", "conv2."),
    CONV_RENAME("decoder.conv1.", "decoder.conv1."),
    CONV_RENAME("decoder.middle.", "decoder.middle."),
    CONV_RENAME("decoder.upsamples.", "decoder.upsamples."),
    CONV_RENAME("decoder.head.", "decoder.head."),
    CONV_RENAME("encoder.conv1.", "encoder.conv1."),
    CONV_RENAME("encoder.downsamples.", "encoder.downsamples."),
    CONV_RENAME("encoder.middle.", "encoder.middle."),
    CONV_RENAME("encoder.head.", "encoder.head."),
    CONV_RENAME("conv1.", "conv1."),
    CONV_END,
};

/* Every Wan VAE's residual block leaves (conv_vae_rules.h). */
const conv_rule conv_vae_resblock[] = {
    CONV_RENAME("norm1.", "residual.0."), CONV_RENAME("conv1.", "residual.2."),
    CONV_RENAME("norm2.", "residual.3."), CONV_RENAME("conv2.", "residual.6."),
    CONV_RENAME("conv_shortcut.", "shortcut."), CONV_END,
};

/* An encoder down block (numbered across levels as the published
 * encoder.downsamples): a resnet's leaves, or a downsampler's, which keep
 * their names. */
static const conv_rule down_block[] = {
    CONV_RENAME("norm1.", "residual.0."), CONV_RENAME("conv1.", "residual.2."),
    CONV_RENAME("norm2.", "residual.3."), CONV_RENAME("conv2.", "residual.6."),
    CONV_RENAME("conv_shortcut.", "shortcut."), CONV_RENAME("resample.", "resample."),
    CONV_RENAME("time_conv.", "time_conv."), CONV_END,
};

/* Up block I's resnet J is decoder.upsamples.<I (R + 2) + J>, its
 * upsampler decoder.upsamples.<I (R + 2) + R + 1>; the attention block's
 * and the upsampler's leaves keep their names. */
static const conv_rule diffusers_rules[] = {
    CONV_RENAME("post_quant_conv.", "conv2."),
    CONV_RENAME("decoder.conv_in.", "decoder.conv1."),
    CONV_VAE_DIFFUSERS_MIDDLE("decoder"),
    {.from = "decoder.up_blocks.#.resnets.#.", .to = "decoder.upsamples.#.",
     .leaf = conv_vae_resblock, .mul = P_LEVEL, .bound = P_R},
    {.from = "decoder.up_blocks.#.upsamplers.0.", .to = "decoder.upsamples.#.", .mul = P_LEVEL,
     .add = P_SAMPLER},
    CONV_VAE_DIFFUSERS_HEAD("decoder"),
    CONV_RENAME("quant_conv.", "conv1."),
    CONV_RENAME("encoder.conv_in.", "encoder.conv1."),
    CONV_TREE("encoder.down_blocks.#.", "encoder.downsamples.#.", down_block),
    CONV_VAE_DIFFUSERS_MIDDLE("encoder"),
    CONV_VAE_DIFFUSERS_HEAD("encoder"),
    CONV_END,
};

/* Nothing is skipped: the encoder's tensors, when there, go to /encoder. */
static const conv_layout official = {"official", "", official_rules, NULL};
static const conv_layout diffusers = {"diffusers", "", diffusers_rules, NULL};
static const conv_layout *const layouts[] = {&official, &diffusers, NULL};

static void params_of(int64_t R, int64_t *param) {
  param[P_LEVEL] = R + 2;
  param[P_SAMPLER] = R + 1;
  param[P_R] = R;
}

int rank_convert_vae_key(const char *key) {
  return strncmp(key, "encoder.", 8) == 0 || strncmp(key, "decoder.", 8) == 0;
}

int rank_convert_is_vae(int ninputs, char *const *inputs, int *is_vae) {
  return conv_any_key(ninputs, inputs, rank_convert_vae_key, is_vae);
}

/* ---- the hooks ------------------------------------------------------------------------ */

/* A key of the encoder in either layout (encoder.*, conv1.*, quant_conv.*). */
static int encoder_key(const char *key) {
  return strncmp(key, "encoder.", 8) == 0 || strncmp(key, "conv1.", 6) == 0 ||
         strncmp(key, "quant_conv.", 11) == 0;
}

/* A DiT's tensors among the VAE's, or the encoder alone: refused. */
static int screen(conv_job *j) {
  int dit = 0, decoder = 0, enc = 0;
  const char *example = NULL;
  for (int i = 0; i < j->ck.n; i++) {
    const char *key = j->ck.t[i]->key, *nm;
    wan_group g;
    int b, is_dit = 0;
    for (int s = RANK_CONVERT_OFFICIAL; s <= RANK_CONVERT_COMFY && !is_dit; s++)
      is_dit = rank_convert_map_key((rank_convert_style)s, key, &g, &b, &nm) == 0;
    if (encoder_key(key))
      enc++;
    else if (is_dit && !dit++)
      example = key;
    else if (!is_dit)
      decoder++;
  }
  if (dit > 0) {
    sp_log_error("%s: %d tensors of a Wan 2.1 DiT (for example '%s') beside the VAE's: a "
                 "checkpoint holds one model; convert the DiT and the VAE separately",
                 j->ck.label, dit, example);
    return SP_ERR_INPUT;
  }
  if (decoder == 0) {
    sp_log_error("%s: holds only the VAE's encoder (%d tensors encoder.*, conv1.*, quant_conv.*); "
                 "a VAE file holds the decoder (decoder.*, and conv2.* or post_quant_conv.*), "
                 "with or without the encoder", j->ck.label, enc);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* diffusers: R + 1 resnets in up block 0, before the keys are mapped. */
static void params(conv_job *j) {
  if (j->layout != &diffusers) return;
  int64_t most = -1, v;
  const char *pre = "decoder.up_blocks.0.resnets.";
  for (int i = 0; i < j->ck.n; i++)
    if (conv_index_after(j->ck.t[i]->key, pre, &v) && v > most) most = v;
  if (most < 0)
    conv_problem(&j->p, "%s: no tensor '%s0.*' (needed to infer num_res_blocks)", j->ck.label, pre);
  params_of(most < 0 ? 0 : most, j->param);
}

/* official: R + 1 is the index of the first resample (resample.1.weight),
 * or of all modules when there is none. */
static int64_t official_res_blocks(const conv_job *j) {
  int64_t first = -1, count = conv_job_count(j, "decoder.upsamples."), v;
  for (int i = 0; i < j->ck.n; i++) {
    const char *rest = conv_index_after(j->src[i].name, "decoder.upsamples.", &v);
    if (rest && strcmp(rest, "resample.1.weight") == 0 && (first < 0 || v < first)) first = v;
  }
  return (first >= 0 ? first : count) - 1;
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* The width of each level (its first block's residual.2.weight) and which
 * resamples have a time_conv, into c (n_mult levels, R blocks): 0, or -1
 * after a problem. */
static int level_widths(conv_job *j, int64_t R, wan_vae_config *c) {
  int64_t width[WAN_VAE_MAX_LEVELS], g = 0;
  char name[96], key[1200], sh[96];
  for (int i = 0; i < c->n_mult; i++) {
    snprintf(name, sizeof name, "decoder.upsamples.%lld.residual.2.weight",
             (long long)(i * (R + 2)));
    const conv_src *s = conv_job_find(j, name);
    if (!s || s->t->ndim != 5 || s->t->shape[0] < 1) {
      conv_job_key(j, name, key, sizeof key);
      sh[0] = 0;
      for (int d = 0; s && d < s->t->ndim; d++)
        snprintf(sh + strlen(sh), sizeof sh - strlen(sh), "%s%lld", d ? ", " : "[",
                 (long long)s->t->shape[d]);
      if (s) snprintf(sh + strlen(sh), sizeof sh - strlen(sh), "]");
      conv_problem(&j->p, "%s: tensor '%s' %s (needed to infer level %d's width)", j->ck.label,
                   key, s ? sh : "is missing", i);
      return -1;
    }
    width[i] = s->t->shape[0];
    g = gcd64(g, width[i]);
    if (i + 1 < c->n_mult) {
      snprintf(name, sizeof name, "decoder.upsamples.%lld.time_conv.weight",
               (long long)(i * (R + 2) + R + 1));
      c->temporal_up[i] = conv_job_find(j, name) != NULL;
    }
  }
  c->dim = g;
  for (int i = 0; i < c->n_mult; i++) c->dim_mult[c->n_mult - 1 - i] = width[i] / g;
  return 0;
}

/* With the encoder, dim is its conv1's width (the decoder alone fixes
 * only the products dim * dim_mult; the encoder's first level is dim
 * wide): dim_mult from it. 0, or -1 after a problem. */
static int encoder_dim(conv_job *j, wan_vae_config *c) {
  char key[1200];
  const conv_src *s = conv_job_find(j, "encoder.conv1.weight");
  const int64_t d = s && s->t->ndim == 5 ? s->t->shape[0] : 0;
  int divides = d > 0;
  for (int i = 0; divides && i < c->n_mult; i++) divides = c->dim * c->dim_mult[i] % d == 0;
  if (!divides) {
    conv_job_key(j, "encoder.conv1.weight", key, sizeof key);
    conv_problem(&j->p, "%s: tensor '%s' %s (needed to infer dim: the encoder's first width, "
                        "which divides every width of the decoder)", j->ck.label, key,
                 !s ? "is missing" : d > 0 ? "does not divide the decoder's widths" : "is not 5-D");
    return -1;
  }
  for (int i = 0; i < c->n_mult; i++) c->dim_mult[i] = c->dim * c->dim_mult[i] / d;
  c->dim = d;
  return 0;
}

/* z_dim from conv2.weight; the number of levels from the count of
 * decoder.upsamples modules and R; each level's width from its first
 * block; dim as the widths' greatest common divisor (the decoder depends
 * only on the products dim * dim_mult), or with the encoder its conv1's
 * width; temporal_up from which resamples have a time_conv; the encoder
 * when any of its tensors is there. */
static int infer(conv_job *j) {
  const int64_t R = j->layout == &diffusers ? j->param[P_R] : official_res_blocks(j);
  params_of(R, j->param);
  wan_vae_config *c = j->config;
  memset(c, 0, sizeof *c);
  char key[1200];
  const conv_src *s = conv_job_find(j, "conv2.weight");
  if (!s || s->t->ndim != 5) {
    conv_job_key(j, "conv2.weight", key, sizeof key);
    if (!s)
      conv_problem(&j->p, "%s: missing tensor '%s' (needed to infer the config)", j->ck.label, key);
    else
      conv_problem(&j->p, "%s: tensor '%s': %d dims, expected 5", conv_path(&j->ck, s->t), key,
                   s->t->ndim);
    return -1;
  }
  c->z_dim = s->t->shape[0];
  c->num_res_blocks = R;
  const int64_t modules = conv_job_count(j, "decoder.upsamples.");
  if (R < 0 || R + 1 > WAN_VAE_MAX_RES || (modules + 1) % (R + 2) != 0 ||
      (modules + 1) / (R + 2) < 1 || (modules + 1) / (R + 2) > WAN_VAE_MAX_LEVELS) {
    conv_problem(&j->p, "%s: %lld decoder upsample modules with %lld residual blocks per level "
                        "make no decoder of 1..%d levels",
                 j->ck.label, (long long)modules, (long long)R + 1, WAN_VAE_MAX_LEVELS);
    return -1;
  }
  c->n_mult = (int)((modules + 1) / (R + 2));
  if (level_widths(j, R, c) != 0) return -1;
  /* The encoder is kept when any of its tensors is there: the table of the
   * config then asks for all of them (each missing one is named). */
  for (int i = 0; i < j->ck.n && !c->encoder; i++)
    c->encoder = encoder_key(j->src[i].name);
  if (c->encoder && encoder_dim(j, c) != 0) return -1;
  char err[256], dm[64] = "", tu[64] = "";
  if (wan_vae_config_check(c, err, sizeof err) != 0) {
    conv_problem(&j->p, "%s: inferred config is not supported: %s", j->ck.label, err);
    return -1;
  }
  for (int i = 0; i < c->n_mult; i++)
    snprintf(dm + strlen(dm), sizeof dm - strlen(dm), "%s%lld", i ? ", " : "",
             (long long)c->dim_mult[i]);
  for (int i = 0; i + 1 < c->n_mult; i++)
    snprintf(tu + strlen(tu), sizeof tu - strlen(tu), "%s%d", i ? ", " : "", c->temporal_up[i]);
  sp_log_info("convert: inferred dim %lld, z_dim %lld, dim_mult (%s), num_res_blocks %lld, "
              "temporal_up (%s); %s", (long long)c->dim, (long long)c->z_dim, dm,
              (long long)c->num_res_blocks, tu,
              c->encoder ? "with the encoder" : "the decoder alone (no encoder tensors)");
  return 0;
}

static const conv_dtype dtypes[] = {CONV_F32, CONV_F16, CONV_BF16};

const conv_net conv_vae = {
    .what = "a Wan 2.1 VAE",
    .short_what = "Wan 2.1 VAE",
    .schema = &wan_vae_schema,
    .layouts = layouts,
    .default_layout = 0,
    .dtypes = dtypes,
    .ndtypes = (int)(sizeof dtypes / sizeof dtypes[0]),
    .skip_what = "tensors skipped",
    .screen = screen,
    .params = params,
    .infer = infer,
};

/* ---- the whole conversion ------------------------------------------------------------- */

int rank_convert_vae_run(int ninputs, char *const *args, const char *out_path, kern_dtype od) {
  conv_job j;
  int rc = conv_prepare(&conv_vae, ninputs, args, out_path, &j);
  const wan_vae_config *c = j.config;
  const char *preset = rc == SP_OK ? vae_preset_match(c) : NULL;
  if (rc == SP_OK) {
    const conv_output o = {out_path, c, kern_dtype_name(od), preset, NULL, 0, KERN_DTYPE_COUNT};
    rc = conv_write(&conv_vae, &j, 1, &o);
  }
  if (rc == SP_OK) {
    int64_t params = 0;
    for (int i = 0; i < j.nt; i++) params += j.t[i].numel;
    sp_log_info("convert: wrote %s (VAE decoder%s, %s, %s, %d tensors, %lld parameters)",
                out_path, c->encoder ? " and encoder" : "", preset ? preset : "custom config",
                kern_dtype_name(od), j.nt, (long long)params);
  }
  conv_job_free(&j);
  return rc;
}
