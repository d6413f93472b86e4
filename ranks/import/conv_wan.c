/* The Wan 2.1 DiT through the converter pipeline (conv.h; convert.h is
 * its API): the three key layouts as tables (official, diffusers, ComfyUI:
 * MODEL.md "Parameter names"), the config from the shapes, one expert or
 * two (Wan 2.2 A14B) into one file. The mapping is LoRA's too
 * (rank_convert_map_key). */
#include "convert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"
#include "log.h"
#include "model_file.h"
#include "safetensors.h"
#include "wan_schema.h"

/* ---- the layouts ---------------------------------------------------------------- */

/* The official keys: every tensor of wan_weights.h by its own name. */
static const conv_rule official_rules[] = {
    CONV_RENAME("blocks.#.", "blocks.#."),
    CONV_RENAME("patch_embedding.", "patch_embedding."),
    CONV_RENAME("text_embedding.", "text_embedding."),
    CONV_RENAME("time_embedding.", "time_embedding."),
    CONV_RENAME("time_projection.", "time_projection."),
    CONV_RENAME("head.", "head."),
    CONV_END,
};

/* diffusers' renames of a block's leaves; its norm2 is the official norm3
 * (its norm1 and norm3 have no weights). */
static const conv_rule diffusers_block[] = {
    CONV_EXACT("scale_shift_table", "modulation"),
    CONV_RENAME("attn1.to_q.", "self_attn.q."),
    CONV_RENAME("attn1.to_k.", "self_attn.k."),
    CONV_RENAME("attn1.to_v.", "self_attn.v."),
    CONV_RENAME("attn1.to_out.0.", "self_attn.o."),
    CONV_RENAME("attn1.norm_q.", "self_attn.norm_q."),
    CONV_RENAME("attn1.norm_k.", "self_attn.norm_k."),
    CONV_RENAME("attn2.to_q.", "cross_attn.q."),
    CONV_RENAME("attn2.to_k.", "cross_attn.k."),
    CONV_RENAME("attn2.to_v.", "cross_attn.v."),
    CONV_RENAME("attn2.to_out.0.", "cross_attn.o."),
    CONV_RENAME("attn2.norm_q.", "cross_attn.norm_q."),
    CONV_RENAME("attn2.norm_k.", "cross_attn.norm_k."),
    CONV_RENAME("norm2.", "norm3."),
    CONV_RENAME("ffn.net.0.proj.", "ffn.0."),
    CONV_RENAME("ffn.net.2.", "ffn.2."),
    CONV_END,
};

static const conv_rule diffusers_rules[] = {
    CONV_TREE("blocks.#.", "blocks.#.", diffusers_block),
    CONV_RENAME("patch_embedding.", "patch_embedding."),
    CONV_RENAME("condition_embedder.text_embedder.linear_1.", "text_embedding.0."),
    CONV_RENAME("condition_embedder.text_embedder.linear_2.", "text_embedding.2."),
    CONV_RENAME("condition_embedder.time_embedder.linear_1.", "time_embedding.0."),
    CONV_RENAME("condition_embedder.time_embedder.linear_2.", "time_embedding.2."),
    CONV_RENAME("condition_embedder.time_proj.", "time_projection.1."),
    CONV_EXACT("scale_shift_table", "head.modulation"),
    CONV_RENAME("proj_out.", "head.head."),
    CONV_END,
};

static const conv_layout official = {"official", "", official_rules, NULL};
static const conv_layout diffusers = {"diffusers", "", diffusers_rules, NULL};
static const conv_layout comfy = {"comfyui", RANK_CONVERT_COMFY_PREFIX, official_rules, NULL};
/* By priority: ComfyUI's prefix wins a tie, the official keys win one with diffusers'. */
static const conv_layout *const layouts[] = {&comfy, &official, &diffusers, NULL};

static const conv_layout *layout_of(rank_convert_style s) {
  return s == RANK_CONVERT_DIFFUSERS ? &diffusers : s == RANK_CONVERT_COMFY ? &comfy : &official;
}

/* ---- the mapping, for LoRA ----------------------------------------------------------- */

const wan_layout *rank_convert_name_layout(wan_group g) {
  static wan_layout l[3];
  static int made = 0;
  if (!made) {
    wan_config c;
    wan_preset("wan2.1-tiny", &c); /* names only: every valid config gives the same */
    for (int i = 0; i < 3; i++) wan_layout_make(&c, (wan_group)i, KERN_DTYPE_F32, &l[i]);
    made = 1;
  }
  return &l[g];
}

/* The tensor an official key names: its group, block and name (in the
 * name layout); -1 when it names none. */
static int official_tensor(const char *official_key, wan_group *g, int *block,
                           const char **name) {
  int64_t b = 0;
  const char *rest = conv_index_after(official_key, "blocks.", &b);
  const wan_group grp = rest ? WAN_GROUP_BLOCK
                             : strncmp(official_key, "head.", 5) == 0 ? WAN_GROUP_HEAD
                                                                       : WAN_GROUP_EMBED;
  const wan_layout *l = rank_convert_name_layout(grp);
  const int i = wan_layout_find(l, rest ? rest : official_key);
  if (i < 0) return -1;
  *g = grp;
  *block = rest ? (int)b : 0;
  *name = l->t[i].name;
  return 0;
}

static int known(const char *official_key) {
  wan_group g;
  int b;
  const char *nm;
  return official_tensor(official_key, &g, &b, &nm) == 0;
}

int rank_convert_map_key(rank_convert_style s, const char *key, wan_group *g, int *block,
                         const char **name) {
  char official_key[RANK_ST_MAX_NAME + 64];
  const int64_t none[CONV_MAX_PARAMS] = {0};
  if (conv_map(layout_of(s), none, key, official_key, sizeof official_key, NULL) != 0) return -1;
  return official_tensor(official_key, g, block, name);
}

/* ---- the config from the shapes -------------------------------------------------------- */

/* dim, in_dim and patch from patch_embedding.weight [dim, in, p0, p1, p2],
 * text_dim and freq_dim from the first embedding linears, ffn_dim from a
 * block's ffn.0.weight, out_dim from head.head, heads = dim / 128, layers
 * = highest block + 1. text_len and eps are not in the weights: the
 * published 512 and 1e-6. */
static int infer(conv_job *j) {
  static const struct {
    const char *key;
    int ndim;
  } need[] = {{"patch_embedding.weight", 5}, {"text_embedding.0.weight", 2},
              {"time_embedding.0.weight", 2}, {"blocks.0.ffn.0.weight", 2},
              {"head.head.weight", 2}};
  const conv_tensor *t[5];
  int ok = 1;
  const int64_t layers = conv_job_count(j, "blocks.");
  for (int i = 0; i < 5; i++) {
    const conv_src *s = conv_job_find(j, need[i].key);
    for (int64_t b = 1; !s && i == 3 && b < layers; b++) { /* any block's */
      char k[64];
      snprintf(k, sizeof k, "blocks.%lld.ffn.0.weight", (long long)b);
      s = conv_job_find(j, k);
    }
    char key[1200], sh[128] = "";
    conv_job_key(j, need[i].key, key, sizeof key);
    t[i] = s ? s->t : NULL;
    if (!s) {
      conv_problem(&j->p, "%s: missing tensor '%s' (needed to infer the config)", j->ck.label, key);
      ok = 0;
    } else if (s->t->ndim != need[i].ndim) {
      for (int d = 0; d < s->t->ndim; d++)
        snprintf(sh + strlen(sh), sizeof sh - strlen(sh), "%s%lld", d ? ", " : "",
                 (long long)s->t->shape[d]);
      conv_problem(&j->p, "%s: tensor '%s': shape [%s], expected %d dims",
                   conv_path(&j->ck, s->t), s->t->key, sh, need[i].ndim);
      ok = 0;
    }
  }
  if (!ok) return -1;
  wan_file_config *f = j->config;
  wan_config *c = &f->c;
  wan_preset("wan2.1-tiny", c); /* the fixed fields: text_len, eps */
  f->experts = 1;
  c->dim = t[0]->shape[0];
  c->in_dim = t[0]->shape[1];
  for (int i = 0; i < 3; i++) c->patch[i] = t[0]->shape[2 + i];
  c->text_dim = t[1]->shape[1];
  c->freq_dim = t[2]->shape[1];
  c->ffn_dim = t[3]->shape[0];
  c->heads = c->dim % 128 == 0 ? c->dim / 128 : 0;
  c->layers = layers;
  int64_t pp = c->patch[0] * c->patch[1] * c->patch[2]; /* each dim < 2^62: no overflow below */
  if (c->patch[0] > 64 || c->patch[1] > 64 || c->patch[2] > 64 || pp == 0 ||
      t[4]->shape[0] % pp != 0) {
    conv_problem(&j->p, "%s: tensor '%s': %lld outputs are not a multiple of the patch size",
                 conv_path(&j->ck, t[4]), t[4]->key, (long long)t[4]->shape[0]);
    return -1;
  }
  c->out_dim = t[4]->shape[0] / pp;
  char err[256];
  if (c->heads == 0) {
    conv_problem(&j->p, "%s: tensor '%s': dim %lld is not a multiple of head_dim 128",
                 conv_path(&j->ck, t[0]), t[0]->key, (long long)c->dim);
    return -1;
  }
  if (wan_config_check(c, err, sizeof err) != 0) {
    conv_problem(&j->p, "%s: inferred config is not supported: %s", j->ck.label, err);
    return -1;
  }
  sp_log_info("convert: inferred dim %lld, ffn_dim %lld, heads %lld, layers %lld, in %lld, "
              "out %lld, text_dim %lld, freq_dim %lld", (long long)c->dim, (long long)c->ffn_dim,
              (long long)c->heads, (long long)c->layers, (long long)c->in_dim,
              (long long)c->out_dim, (long long)c->text_dim, (long long)c->freq_dim);
  return 0;
}

/* A GGUF checkpoint (ComfyUI-GGUF's Wan files) must say it holds a Wan
 * DiT: general.architecture "wan" (MODEL.md "GGUF weights"). */
static int screen(conv_job *j) {
  for (int s = 0; s < j->ck.nf; s++) {
    const conv_file *f = &j->ck.f[s];
    if (strcmp(f->reader->name, "gguf") != 0) continue;
    const char *arch = conv_file_meta(f, "general.architecture");
    if (!arch || strcmp(arch, "wan") != 0) {
      sp_log_error("%s: a GGUF file of architecture '%s': a Wan 2.1/2.2 DiT's says 'wan' "
                   "(general.architecture)", f->path, arch ? arch : "(none)");
      return SP_ERR_INPUT;
    }
  }
  return SP_OK;
}

static const conv_dtype dtypes[] = {CONV_F32, CONV_F16, CONV_BF16, CONV_F8_E4M3, CONV_BLOCKS};

const conv_net conv_wan = {
    .what = "a Wan 2.1 T2V model",
    .short_what = "Wan 2.1 DiT",
    .schema = &wan_schema,
    .layouts = layouts,
    .default_layout = 1,
    .dtypes = dtypes,
    .ndtypes = (int)(sizeof dtypes / sizeof dtypes[0]),
    .skip_what = "tensors",
    .copy_metadata = 1,
    .known = known,
    .screen = screen,
    .infer = infer,
};

/* ---- the whole conversion ------------------------------------------------------------- */

/* The config fields of two experts that differ, named in err. */
static int same_config(const wan_config *a, const wan_config *b, char *err, size_t n) {
  struct {
    const char *name;
    int64_t x, y;
  } f[] = {{"dim", a->dim, b->dim},           {"ffn_dim", a->ffn_dim, b->ffn_dim},
           {"heads", a->heads, b->heads},     {"layers", a->layers, b->layers},
           {"in_dim", a->in_dim, b->in_dim},  {"out_dim", a->out_dim, b->out_dim},
           {"text_dim", a->text_dim, b->text_dim}, {"freq_dim", a->freq_dim, b->freq_dim},
           {"text_len", a->text_len, b->text_len}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (f[i].x != f[i].y) {
      snprintf(err, n, "%s: high %lld, low %lld", f[i].name, (long long)f[i].x, (long long)f[i].y);
      return -1;
    }
  return 0;
}

/* The root dtype of the file: a GGUF checkpoint's is "quant" (its blocks'
 * linear weights kept in their formats, the rest bf16) or "quant-fp32"
 * (the rest fp32: --dtype fp32); --dtype fp8 and int8 would quantise
 * again and are refused. Any other checkpoint's is od's. */
static const char *root_of(const conv_job *jobs, int n, kern_dtype od) {
  int gguf = 0;
  for (int e = 0; e < n; e++) gguf |= conv_ckpt_has(&jobs[e].ck, "gguf");
  if (!gguf) return rank_model_root_of(od);
  if (od == KERN_DTYPE_BF16 || od == KERN_DTYPE_F32) return od == KERN_DTYPE_F32 ? "quant-fp32" : "quant";
  sp_log_error("--dtype %s: a GGUF checkpoint keeps its quantized bytes; --dtype chooses the "
               "other tensors' dtype: bf16 (the default) or fp32", rank_model_root_of(od));
  return NULL;
}

/* Writes the n experts of jobs (one checked config) into out_path. */
static int write_model(const conv_job *jobs, int n, const char *out_path, kern_dtype od,
                       int progress) {
  wan_file_config f;
  const wan_config *c = &((const wan_file_config *)jobs[0].config)->c;
  memset(&f, 0, sizeof f);
  f.c = *c;
  f.experts = 1;
  if (n > 1) wan_experts_defaults(c, &f); /* the published defaults of its task */
  const char *preset = wan_schema.preset_match(&f);
  const char *root = root_of(jobs, n, od);
  if (!root) return SP_ERR_INPUT;
  for (int e = 0; e < n; e++) conv_scales_info(&jobs[e], root);
  /* a block format (--dtype q8_0): the linear weights quantised to it */
  const conv_output o = {out_path, &f, root, preset ? preset : "", NULL, progress,
                         kern_dtype_size(od) == 0 ? od : KERN_DTYPE_COUNT};
  int rc = conv_write(&conv_wan, jobs, n, &o);
  if (rc == SP_OK)
    sp_log_info("convert: wrote %s (%s%s, %s)", out_path, preset ? preset : "custom config",
                n > 1 ? ", two experts" : "", root);
  return rc;
}

int rank_convert_run(int ninputs, char *const *inputs, const char *out_path, kern_dtype od,
                     int progress) {
  conv_job j;
  int rc = conv_prepare(&conv_wan, ninputs, inputs, out_path, &j);
  if (rc == SP_OK) rc = write_model(&j, 1, out_path, od, progress);
  conv_job_free(&j);
  return rc;
}

int rank_convert_experts_run(char *const paths[2], const char *out_path, kern_dtype od,
                             int progress) {
  conv_job j[2];
  memset(j, 0, sizeof j);
  int rc = SP_OK;
  for (int e = 0; e < 2 && rc == SP_OK; e++) {
    sp_log_info("convert: the %s-noise expert from %s", rank_model_expert_name(2, e), paths[e]);
    rc = conv_prepare(&conv_wan, 1, &paths[e], out_path, &j[e]);
  }
  char err[160];
  if (rc == SP_OK && same_config(&((wan_file_config *)j[0].config)->c,
                                 &((wan_file_config *)j[1].config)->c, err, sizeof err) != 0) {
    sp_log_error("--expert: the experts differ in their config (%s): both must have one "
                 "architecture; %s not written", err, out_path);
    rc = SP_ERR_INPUT;
  }
  if (rc == SP_OK) rc = write_model(j, 2, out_path, od, progress);
  for (int e = 0; e < 2; e++) conv_job_free(&j[e]);
  return rc;
}
