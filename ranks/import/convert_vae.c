/* safetensors -> VAE model file (see convert_vae.h). Reads top-down: the
 * key mapping of the two layouts, the config inferred from the shapes, the
 * cross-check that reports every problem, the copy. Inputs (files,
 * directories, index JSON) are resolved by convert_inputs.c. */
#include "convert_vae.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "convert_impl.h"
#include "log.h"
#include "safetensors.h"
#include "vae_file.h"

const char *rank_convert_vae_style_name(rank_convert_vae_style s) {
  return s == RANK_CONVERT_VAE_DIFFUSERS ? "diffusers" : "official";
}

/* ---- key mapping -------------------------------------------------------------
 * The whole mapping, diffusers -> official (VAE.md "Model file and
 * checkpoint keys"). Module prefixes first; in the up blocks, block I's
 * resnet J is the published decoder.upsamples.<I (R + 2) + J> and its
 * upsampler decoder.upsamples.<I (R + 2) + R + 1>, R = num_res_blocks
 * (each published level holds R + 1 residual blocks and one resample). */
typedef struct vae_rename {
  const char *diffusers, *official;
  int resblock; /* the leaves below are residual-block leaves (resblock_leaf) */
} vae_rename;

static const vae_rename vae_prefix[] = {
    {"post_quant_conv.", "conv2.", 0},
    {"decoder.conv_in.", "decoder.conv1.", 0},
    {"decoder.mid_block.resnets.0.", "decoder.middle.0.", 1},
    {"decoder.mid_block.attentions.0.", "decoder.middle.1.", 0},
    {"decoder.mid_block.resnets.1.", "decoder.middle.2.", 1},
    {"decoder.norm_out.", "decoder.head.0.", 0},
    {"decoder.conv_out.", "decoder.head.2.", 0},
};

#define UP_DIFF "decoder.up_blocks."
#define UP_RESNETS "resnets."
#define UP_SAMPLER "upsamplers.0."
#define UP_OFFICIAL "decoder.upsamples."

/* WanResidualBlock's leaves against ResidualBlock's (its Sequential
 * residual: 0 norm, 1 SiLU, 2 conv, 3 norm, 4 SiLU, 5 dropout, 6 conv). */
static const vae_rename resblock_leaf[] = {
    {"norm1.", "residual.0.", 0}, {"conv1.", "residual.2.", 0}, {"norm2.", "residual.3.", 0},
    {"conv2.", "residual.6.", 0}, {"conv_shortcut.", "shortcut.", 0},
};

/* The encoder's tensors in either layout: not needed to decode. */
static const char *const encoder_prefix[] = {"encoder.", "conv1.", "quant_conv."};

int rank_convert_vae_key(const char *key) {
  return rank_convert_has_prefix(key, "encoder.") || rank_convert_has_prefix(key, "decoder.");
}

static int is_encoder_key(const char *key) {
  for (size_t i = 0; i < sizeof encoder_prefix / sizeof encoder_prefix[0]; i++)
    if (rank_convert_has_prefix(key, encoder_prefix[i])) return 1;
  return 0;
}

static int leaf_map(int to_official, const char *leaf, char *buf, size_t n, const char *pre) {
  for (size_t i = 0; i < sizeof resblock_leaf / sizeof resblock_leaf[0]; i++) {
    const char *from = to_official ? resblock_leaf[i].diffusers : resblock_leaf[i].official;
    const char *to = to_official ? resblock_leaf[i].official : resblock_leaf[i].diffusers;
    if (rank_convert_has_prefix(leaf, from)) {
      int w = snprintf(buf, n, "%s%s%s", pre, to, leaf + strlen(from));
      return w < 0 || (size_t)w >= n ? -1 : 0;
    }
  }
  return -1;
}

int rank_convert_vae_map_key(rank_convert_vae_style s, const char *key, int64_t R, char *buf,
                             size_t n) {
  if (s == RANK_CONVERT_VAE_OFFICIAL) {
    int w = snprintf(buf, n, "%s", key);
    return w < 0 || (size_t)w >= n ? -1 : 0;
  }
  char pre[96];
  if (rank_convert_has_prefix(key, UP_DIFF)) {
    int64_t i, j;
    const char *rest = rank_convert_parse_index(key + strlen(UP_DIFF), &i);
    if (!rest) return -1;
    if (rank_convert_has_prefix(rest, UP_RESNETS)) {
      rest = rank_convert_parse_index(rest + strlen(UP_RESNETS), &j);
      if (!rest || j > R) return -1;
      snprintf(pre, sizeof pre, UP_OFFICIAL "%lld.", (long long)(i * (R + 2) + j));
      return leaf_map(1, rest, buf, n, pre);
    }
    if (!rank_convert_has_prefix(rest, UP_SAMPLER)) return -1;
    int w = snprintf(buf, n, UP_OFFICIAL "%lld.%s", (long long)(i * (R + 2) + R + 1),
                     rest + strlen(UP_SAMPLER));
    return w < 0 || (size_t)w >= n ? -1 : 0;
  }
  for (size_t r = 0; r < sizeof vae_prefix / sizeof vae_prefix[0]; r++) {
    if (!rank_convert_has_prefix(key, vae_prefix[r].diffusers)) continue;
    const char *rest = key + strlen(vae_prefix[r].diffusers);
    if (vae_prefix[r].resblock) return leaf_map(1, rest, buf, n, vae_prefix[r].official);
    int w = snprintf(buf, n, "%s%s", vae_prefix[r].official, rest);
    return w < 0 || (size_t)w >= n ? -1 : 0;
  }
  return -1;
}

void rank_convert_vae_key_for(rank_convert_vae_style s, const char *name, int64_t R, char *buf,
                              size_t n) {
  snprintf(buf, n, "%s", name);
  if (s == RANK_CONVERT_VAE_OFFICIAL) return;
  char pre[96];
  int64_t k;
  const char *rest;
  if (rank_convert_has_prefix(name, UP_OFFICIAL) &&
      (rest = rank_convert_parse_index(name + strlen(UP_OFFICIAL), &k))) {
    int64_t i = k / (R + 2), j = k % (R + 2);
    if (j <= R) {
      snprintf(pre, sizeof pre, UP_DIFF "%lld." UP_RESNETS "%lld.", (long long)i, (long long)j);
      if (leaf_map(0, rest, buf, n, pre) != 0) snprintf(buf, n, "%s%s", pre, rest);
    } else {
      snprintf(buf, n, UP_DIFF "%lld." UP_SAMPLER "%s", (long long)i, rest);
    }
    return;
  }
  for (size_t r = 0; r < sizeof vae_prefix / sizeof vae_prefix[0]; r++) {
    if (!rank_convert_has_prefix(name, vae_prefix[r].official)) continue;
    rest = name + strlen(vae_prefix[r].official);
    if (!vae_prefix[r].resblock || leaf_map(0, rest, buf, n, vae_prefix[r].diffusers) != 0)
      snprintf(buf, n, "%s%s", vae_prefix[r].diffusers, rest);
    return;
  }
}

/* ---- the checkpoint ----------------------------------------------------------- */

typedef struct vae_ckpt {
  rank_convert_ckpt cp; /* names: the official keys */
  rank_convert_vae_style style;
  int skipped; /* encoder tensors */
  int64_t R;   /* num_res_blocks */
  wan_vae_config config;
  wan_vae_weights w;
  wan_vae_table table;
  int slot[WAN_VAE_MAX_TENSORS]; /* table entry -> src index, -1 if missing */
} vae_ckpt;

/* Layout by majority of the keys only one layout has. */
static rank_convert_vae_style detect_style(const vae_ckpt *ck) {
  static const char *const off[] = {"conv2.", UP_OFFICIAL, "decoder.middle.", "decoder.conv1.",
                                    "decoder.head."};
  static const char *const dif[] = {"post_quant_conv.", UP_DIFF, "decoder.mid_block.",
                                    "decoder.conv_in.", "decoder.norm_out.", "decoder.conv_out."};
  long no = 0, nd = 0;
  for (int i = 0; i < ck->cp.nsrc; i++) {
    const char *k = ck->cp.src[i].t->name;
    for (size_t j = 0; j < sizeof off / sizeof off[0]; j++)
      no += rank_convert_has_prefix(k, off[j]);
    for (size_t j = 0; j < sizeof dif / sizeof dif[0]; j++)
      nd += rank_convert_has_prefix(k, dif[j]);
  }
  return nd > no ? RANK_CONVERT_VAE_DIFFUSERS : RANK_CONVERT_VAE_OFFICIAL;
}

/* diffusers: R + 1 resnets in up block 0. */
static int infer_res_blocks_diffusers(vae_ckpt *ck, problems *p) {
  int64_t most = -1;
  const char *pre = UP_DIFF "0." UP_RESNETS;
  for (int i = 0; i < ck->cp.nsrc; i++) {
    const char *k = ck->cp.src[i].t->name;
    int64_t j;
    if (rank_convert_has_prefix(k, pre) && rank_convert_parse_index(k + strlen(pre), &j) &&
        j > most)
      most = j;
  }
  if (most < 0) {
    rank_convert_problem(p, "%s: no tensor '%s0.*' (needed to infer num_res_blocks)", ck->cp.label,
                         pre);
    return -1;
  }
  ck->R = most;
  return 0;
}

/* official: R + 1 is the index of the first resample (resample.1.weight),
 * or of all modules when there is none. */
static void infer_res_blocks_official(vae_ckpt *ck) {
  int64_t first = -1, count = 0;
  for (int i = 0; i < ck->cp.nsrc; i++) {
    const char *k = ck->cp.src[i].name, *rest;
    int64_t v;
    if (!rank_convert_has_prefix(k, UP_OFFICIAL) ||
        !(rest = rank_convert_parse_index(k + strlen(UP_OFFICIAL), &v)))
      continue;
    if (v + 1 > count) count = v + 1;
    if (strcmp(rest, "resample.1.weight") == 0 && (first < 0 || v < first)) first = v;
  }
  ck->R = (first >= 0 ? first : count) - 1;
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* The config from the shapes: z_dim from conv2.weight; the number of
 * levels from the count of decoder.upsamples modules and R; each level's
 * width from its first block's residual.2.weight; dim as the widths'
 * greatest common divisor (the decoder depends only on the products dim *
 * dim_mult); temporal_up from which resamples have a time_conv. */
static int infer_config(vae_ckpt *ck, problems *p) {
  wan_vae_config c = {0};
  char key[256], sh[96];
  const rank_convert_src *s = rank_convert_ckpt_find(&ck->cp, "conv2.weight");
  if (!s || s->t->ndim != 5) {
    rank_convert_vae_key_for(ck->style, "conv2.weight", ck->R, key, sizeof key);
    if (!s)
      rank_convert_problem(p, "%s: missing tensor '%s' (needed to infer the config)", ck->cp.label,
                           key);
    else
      rank_convert_problem(p, "%s: tensor '%s': %d dims, expected 5", s->file->path, key,
                           s->t->ndim);
    return -1;
  }
  c.z_dim = s->t->shape[0];
  c.num_res_blocks = ck->R;
  int64_t modules = 0;
  for (int i = 0; i < ck->cp.nsrc; i++) {
    int64_t v;
    const char *k = ck->cp.src[i].name;
    if (rank_convert_has_prefix(k, UP_OFFICIAL) &&
        rank_convert_parse_index(k + strlen(UP_OFFICIAL), &v) && v + 1 > modules)
      modules = v + 1;
  }
  if (ck->R < 0 || ck->R + 1 > WAN_VAE_MAX_RES || (modules + 1) % (ck->R + 2) != 0 ||
      (modules + 1) / (ck->R + 2) < 1 || (modules + 1) / (ck->R + 2) > WAN_VAE_MAX_LEVELS) {
    rank_convert_problem(p, "%s: %lld decoder upsample modules with %lld residual blocks per level "
                         "make no decoder of 1..%d levels",
                         ck->cp.label, (long long)modules, (long long)ck->R + 1,
                         WAN_VAE_MAX_LEVELS);
    return -1;
  }
  c.n_mult = (int)((modules + 1) / (ck->R + 2));
  int64_t width[WAN_VAE_MAX_LEVELS], g = 0;
  for (int i = 0; i < c.n_mult; i++) {
    char name[96];
    snprintf(name, sizeof name, UP_OFFICIAL "%lld.residual.2.weight", (long long)(i * (ck->R + 2)));
    s = rank_convert_ckpt_find(&ck->cp, name);
    if (!s || s->t->ndim != 5 || s->t->shape[0] < 1) {
      rank_convert_vae_key_for(ck->style, name, ck->R, key, sizeof key);
      if (s) rank_convert_shape_str(s->t->ndim, s->t->shape, sh, sizeof sh);
      rank_convert_problem(p, "%s: tensor '%s' %s (needed to infer level %d's width)", ck->cp.label,
                           key, s ? sh : "is missing", i);
      return -1;
    }
    width[i] = s->t->shape[0];
    g = gcd64(g, width[i]);
    if (i + 1 < c.n_mult) {
      snprintf(name, sizeof name, UP_OFFICIAL "%lld.time_conv.weight",
               (long long)(i * (ck->R + 2) + ck->R + 1));
      c.temporal_up[i] = rank_convert_ckpt_find(&ck->cp, name) != NULL;
    }
  }
  c.dim = g;
  for (int i = 0; i < c.n_mult; i++) c.dim_mult[c.n_mult - 1 - i] = width[i] / g;
  ck->config = c; /* used only when the verdict is 0 */
  char err[256];
  return rank_convert_config_verdict(wan_vae_config_check(&c, err, sizeof err), err, ck->cp.label,
                                     p);
}

static void check_tensors(vae_ckpt *ck, problems *p) {
  wan_vae_table_make(&ck->config, &ck->w, &ck->table);
  const wan_vae_table *tb = &ck->table;
  for (int i = 0; i < tb->count; i++) ck->slot[i] = -1;
  static const rank_st_dtype ok[] = {RANK_ST_F32, RANK_ST_F16, RANK_ST_BF16};
  char key[256];
  for (int i = 0; i < ck->cp.nsrc; i++) {
    rank_convert_src *s = &ck->cp.src[i];
    if (!s->name[0]) continue;
    int ti = wan_vae_table_find(tb, s->name);
    if (ti < 0) {
      rank_convert_problem(p, "%s: tensor '%s': not a tensor of a Wan 2.1 VAE decoder of the "
                           "inferred config (%s keys)",
                           s->file->path, s->t->name, rank_convert_vae_style_name(ck->style));
      continue;
    }
    if (rank_convert_ckpt_claim(&ck->cp, ck->slot, ti, i, p) != 0) continue;
    rank_convert_check_shape(s->file->path, s->t, tb->t[ti].ndim, tb->t[ti].shape, p);
    rank_convert_check_dtype(s->file->path, s->t, ok, (int)(sizeof ok / sizeof ok[0]), p);
  }
  for (int i = 0; i < tb->count; i++) {
    if (ck->slot[i] >= 0) continue;
    rank_convert_vae_key_for(ck->style, tb->t[i].name, ck->R, key, sizeof key);
    rank_convert_problem(p, "%s: missing tensor '%s'", ck->cp.label, key);
  }
}

/* ---- the copy ------------------------------------------------------------------- */

static int write_file(const vae_ckpt *ck, const char *out_path, kern_dtype od) {
  const wan_vae_table *tb = &ck->table;
  int64_t most = 0;
  for (int i = 0; i < tb->count; i++)
    if (tb->t[i].numel > most) most = tb->t[i].numel;
  const char *preset = vae_preset_match(&ck->config);
  vae_model_writer *w = NULL;
  int rc = vae_model_writer_open(out_path, &ck->config, od, preset, &w);
  if (rc != SP_OK) return rc;
  unsigned char *raw = sp_xmalloc((size_t)most * 4);
  float *f = sp_xmalloc((size_t)most * sizeof *f);
  for (int i = 0; i < tb->count && rc == SP_OK; i++) {
    const rank_convert_src *s = &ck->cp.src[ck->slot[i]];
    rc = rank_convert_read_f32(s->file, s->t, 0, tb->t[i].numel, 1.0f, raw, f);
    if (rc == SP_OK) rc = vae_model_writer_put(w, tb->t[i].name, f, tb->t[i].numel);
  }
  free(raw);
  free(f);
  if (rc != SP_OK) {
    vae_model_writer_abort(w);
    sp_log_error("%s: not converted; nothing written", out_path);
    return rc;
  }
  rc = vae_model_writer_commit(w);
  if (rc == SP_OK)
    sp_log_info("convert: wrote %s (VAE decoder, %s, %s, %d tensors, %lld parameters)", out_path,
                preset ? preset : "custom config", kern_dtype_name(od), tb->count,
                (long long)tb->params);
  return rc;
}

/* ---- the whole conversion ------------------------------------------------------ */

int rank_convert_is_vae(int ninputs, char *const *args, int *is_vae) {
  return rank_convert_inputs_any_key(ninputs, args, rank_convert_vae_key, is_vae);
}

/* A DiT key in any of its styles. */
static int is_dit_key(const char *key) {
  for (int s = RANK_CONVERT_OFFICIAL; s <= RANK_CONVERT_COMFY; s++) {
    wan_group g;
    int b;
    const char *nm;
    if (rank_convert_map_key((rank_convert_style)s, key, &g, &b, &nm) == 0) return 1;
  }
  return 0;
}

int rank_convert_vae_run(int ninputs, char *const *args, const char *out_path, kern_dtype od) {
  vae_ckpt *ck = sp_xcalloc(1, sizeof *ck);
  problems p = {0};
  int rc = rank_convert_ckpt_open(ninputs, args, &ck->cp, &p);
  if (rc != SP_OK) goto out;
  int dit = 0, decoder = 0;
  const char *dit_example = NULL;
  for (int i = 0; i < ck->cp.nsrc; i++) {
    const char *key = ck->cp.src[i].t->name;
    if (is_encoder_key(key)) {
      ck->skipped++;
    } else if (is_dit_key(key)) {
      if (!dit++) dit_example = key;
    } else {
      decoder++;
    }
  }
  if (dit > 0) {
    sp_log_error("%s: %d tensors of a Wan 2.1 DiT (for example '%s') beside the VAE's: a "
                 "checkpoint holds one model; convert the DiT and the VAE separately",
                 ck->cp.label, dit, dit_example);
    rc = SP_ERR_INPUT;
    goto out;
  }
  if (decoder == 0) {
    sp_log_error("%s: holds only the VAE's encoder (%d tensors encoder.*, conv1.*, quant_conv.*); "
                 "decoding needs the decoder (decoder.*, and conv2.* or post_quant_conv.*)",
                 ck->cp.label, ck->skipped);
    rc = SP_ERR_INPUT;
    goto out;
  }
  ck->style = detect_style(ck);
  if (ck->style == RANK_CONVERT_VAE_DIFFUSERS && infer_res_blocks_diffusers(ck, &p) != 0) goto problems;
  for (int i = 0; i < ck->cp.nsrc; i++) {
    rank_convert_src *s = &ck->cp.src[i];
    if (is_encoder_key(s->t->name)) continue;
    if (rank_convert_vae_map_key(ck->style, s->t->name, ck->R, s->name, sizeof s->name) != 0) {
      s->name[0] = 0;
      rank_convert_problem(&p, "%s: tensor '%s': not a tensor of a Wan 2.1 VAE decoder (%s keys)",
                           s->file->path, s->t->name, rank_convert_vae_style_name(ck->style));
    }
  }
  if (ck->style == RANK_CONVERT_VAE_OFFICIAL) infer_res_blocks_official(ck);
  sp_log_info("convert: %d file(s), %d tensors, Wan VAE with %s keys; %d encoder tensors "
              "(encoder.*, conv1.*, quant_conv.*) skipped: only the decoder is converted",
              ck->cp.nf, ck->cp.nsrc, rank_convert_vae_style_name(ck->style), ck->skipped);
  if (infer_config(ck, &p) == 0) {
    const wan_vae_config *c = &ck->config;
    char dm[64] = "", tu[64] = "";
    for (int i = 0; i < c->n_mult; i++)
      snprintf(dm + strlen(dm), sizeof dm - strlen(dm), "%s%lld", i ? ", " : "",
               (long long)c->dim_mult[i]);
    for (int i = 0; i + 1 < c->n_mult; i++)
      snprintf(tu + strlen(tu), sizeof tu - strlen(tu), "%s%d", i ? ", " : "", c->temporal_up[i]);
    sp_log_info("convert: inferred dim %lld, z_dim %lld, dim_mult (%s), num_res_blocks %lld, "
                "temporal_up (%s)",
                (long long)c->dim, (long long)c->z_dim, dm, (long long)c->num_res_blocks, tu);
    check_tensors(ck, &p);
  }
problems:
  if ((rc = rank_convert_problems_end(&p, out_path)) != SP_OK) goto out;
  rc = write_file(ck, out_path, od);
out:
  rank_convert_ckpt_close(&ck->cp);
  free(ck);
  return rc;
}
