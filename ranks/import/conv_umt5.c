/* The UMT5 text encoder through the converter pipeline (conv.h;
 * convert_t5.h is its API): Wan's keys and transformers' (UMT5.md
 * "Checkpoint keys") as tables, the config from the shapes, the tokenizer
 * (--tokenizer, or ComfyUI's spiece_model tensor) stored beside it. */
#include "convert_t5.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"
#include "log.h"
#include "mfile.h"
#include "t5_file.h"
#include "tokenizer.h"
#include "umt5_schema.h"

#define SPIECE_KEY "spiece_model" /* ComfyUI's tokenizer tensor */

/* ---- the layouts ------------------------------------------------------------- */

static const conv_rule wan_rules[] = {
    CONV_EXACT("token_embedding.weight", "token_embedding.weight"),
    CONV_EXACT("norm.weight", "norm.weight"),
    CONV_RENAME("blocks.#.", "blocks.#."),
    CONV_END,
};

/* transformers' leaves under encoder.block.N. against Wan's under blocks.N. */
static const conv_rule hf_leaf[] = {
    CONV_EXACT("layer.0.layer_norm.weight", "norm1.weight"),
    CONV_EXACT("layer.0.SelfAttention.q.weight", "attn.q.weight"),
    CONV_EXACT("layer.0.SelfAttention.k.weight", "attn.k.weight"),
    CONV_EXACT("layer.0.SelfAttention.v.weight", "attn.v.weight"),
    CONV_EXACT("layer.0.SelfAttention.o.weight", "attn.o.weight"),
    CONV_EXACT("layer.0.SelfAttention.relative_attention_bias.weight",
               "pos_embedding.embedding.weight"),
    CONV_EXACT("layer.1.layer_norm.weight", "norm2.weight"),
    CONV_EXACT("layer.1.DenseReluDense.wi_0.weight", "ffn.gate.0.weight"),
    CONV_EXACT("layer.1.DenseReluDense.wi_1.weight", "ffn.fc1.weight"),
    CONV_EXACT("layer.1.DenseReluDense.wo.weight", "ffn.fc2.weight"),
    CONV_END,
};

static const conv_rule hf_rules[] = {
    CONV_EXACT("shared.weight", "token_embedding.weight"),
    /* the tied copy of shared.weight */
    {.from = "encoder.embed_tokens.weight", .to = "token_embedding.weight", .exact = 1, .tied = 1},
    CONV_EXACT("encoder.final_layer_norm.weight", "norm.weight"),
    CONV_TREE("encoder.block.#.", "blocks.#.", hf_leaf),
    CONV_END,
};

/* A full UMT5's decoder and language-model head: not the encoder's. */
static const char *const hf_skip[] = {"decoder.", "lm_head.", SPIECE_KEY, NULL};
static const char *const wan_skip[] = {SPIECE_KEY, NULL};

static const conv_layout wan = {"wan", "", wan_rules, wan_skip};
static const conv_layout hf = {"transformers", "", hf_rules, hf_skip};
static const conv_layout *const layouts[] = {&wan, &hf, NULL};

/* Keys only a UMT5 encoder checkpoint has, in either layout. */
static int is_t5_key(const char *key) {
  size_t n = strlen(key), k = strlen(".pos_embedding.embedding.weight");
  return strcmp(key, "shared.weight") == 0 || strcmp(key, "token_embedding.weight") == 0 ||
         strcmp(key, "encoder.final_layer_norm.weight") == 0 ||
         strncmp(key, "encoder.block.", 14) == 0 ||
         (n >= k && strcmp(key + n - k, ".pos_embedding.embedding.weight") == 0);
}

int rank_convert_is_t5(int ninputs, char *const *inputs, int *is_t5) {
  return conv_any_key(ninputs, inputs, is_t5_key, is_t5);
}

/* ---- the config from the shapes ------------------------------------------------ */

/* vocab and dim from the embedding, layers from the highest block index,
 * dim_attn from q, ffn from fc1, buckets and heads from layer 0's position
 * table; max_dist is no shape: the published 128. */
static int infer(conv_job *j) {
  static const char *const need[] = {"token_embedding.weight", "blocks.0.attn.q.weight",
                                     "blocks.0.ffn.fc1.weight",
                                     "blocks.0.pos_embedding.embedding.weight"};
  const conv_tensor *t[4];
  for (int i = 0; i < 4; i++) {
    const conv_src *s = conv_job_find(j, need[i]);
    char key[1200];
    conv_job_key(j, need[i], key, sizeof key);
    if (!s || s->t->ndim != 2) {
      conv_problem(&j->p, "%s: tensor '%s' %s (needed to infer the config)", j->ck.label, key,
                   s ? "is not 2-D" : "is missing");
      return -1;
    }
    t[i] = s->t;
  }
  umt5_config *c = j->config;
  umt5_config_published(c);
  c->vocab = t[0]->shape[0];
  c->dim = t[0]->shape[1];
  c->dim_attn = t[1]->shape[0];
  c->ffn = t[2]->shape[0];
  c->buckets = t[3]->shape[0];
  c->heads = t[3]->shape[1];
  c->layers = conv_job_count(j, "blocks.");
  char err[256];
  if (umt5_config_check(c, err, sizeof err) != 0) {
    conv_problem(&j->p, "%s: inferred config is not supported: %s", j->ck.label, err);
    return -1;
  }
  sp_log_info("convert: inferred a UMT5 encoder: vocab %lld, dim %lld, dim_attn %lld, ffn %lld, "
              "%lld heads, %lld layers, %lld buckets (max_dist %lld, the published)",
              (long long)c->vocab, (long long)c->dim, (long long)c->dim_attn, (long long)c->ffn,
              (long long)c->heads, (long long)c->layers, (long long)c->buckets,
              (long long)c->max_dist);
  return 0;
}

static const conv_dtype dtypes[] = {CONV_F32, CONV_F16, CONV_BF16, CONV_F8_E4M3, CONV_F8_E5M2};

const conv_net conv_umt5 = {
    .what = "a UMT5 encoder",
    .short_what = "UMT5 encoder",
    .schema = &umt5_schema,
    .layouts = layouts,
    .default_layout = 0,
    .dtypes = dtypes,
    .ndtypes = (int)(sizeof dtypes / sizeof dtypes[0]),
    .skip_what = "tensors (decoder, lm_head, tied copies, the tokenizer)",
    .infer = infer,
};

/* ---- the tokenizer ---------------------------------------------------------------- */

static int load_tokenizer(const conv_job *j, const char *path, tok_model **out) {
  if (path) return tok_model_load(path, out);
  const conv_tensor *t = NULL;
  for (int i = 0; i < j->ck.n && !t; i++)
    if (strcmp(j->ck.t[i]->key, SPIECE_KEY) == 0) t = j->ck.t[i];
  if (!t) {
    sp_log_error("%s: no tokenizer: pass --tokenizer PATH (the spiece.model or tokenizer.json "
                 "of google/umt5-xxl, as Wan ships it in google/umt5-xxl/)", j->ck.label);
    return SP_ERR_INPUT;
  }
  const char *where = conv_path(&j->ck, t);
  if (t->dtype != CONV_U8 || t->numel > TOK_MAX_FILE_BYTES || t->numel == 0) {
    sp_log_error("%s: tensor '%s' is not a uint8 spiece.model of 1..%u bytes", where, SPIECE_KEY,
                 TOK_MAX_FILE_BYTES);
    return SP_ERR_INPUT;
  }
  uint8_t *buf = sp_xmalloc((size_t)t->numel);
  int rc = conv_read(&j->ck, t, 0, buf, (size_t)t->numel);
  tok_spec spec = {0};
  char err[512];
  if (rc == SP_OK && tok_spm_parse(buf, (size_t)t->numel, &spec, err, sizeof err) != 0) {
    sp_log_error("%s: tensor '%s' (spiece.model): %s", where, SPIECE_KEY, err);
    rc = SP_ERR_INPUT;
  }
  if (rc == SP_OK && tok_model_create(&spec, out, err, sizeof err) != 0) {
    sp_log_error("%s: tensor '%s' (spiece.model): %s", where, SPIECE_KEY, err);
    rc = SP_ERR_INPUT;
  }
  tok_spec_free(&spec);
  free(buf);
  if (rc == SP_OK) sp_log_info("convert: tokenizer from the checkpoint's '%s' tensor", SPIECE_KEY);
  return rc;
}

/* ---- the whole conversion -------------------------------------------------------- */

int rank_convert_t5_run(int ninputs, char *const *args, const char *tokenizer_path,
                        const char *out_path, kern_dtype od) {
  conv_job j;
  tok_model *tok = NULL;
  mfile_hooks hooks;
  int rc = conv_prepare(&conv_umt5, ninputs, args, out_path, &j);
  if (rc == SP_OK) rc = load_tokenizer(&j, tokenizer_path, &tok);
  const umt5_config *c = j.config;
  if (rc == SP_OK) rc = t5_model_tok_hooks(out_path, c, tok, &hooks);
  const char *preset = rc == SP_OK ? t5_preset_match(c) : NULL;
  if (rc == SP_OK) {
    conv_scales_info(&j, kern_dtype_name(od));
    const conv_output o = {out_path, c,     kern_dtype_name(od), preset,
                           &hooks,   0,     KERN_DTYPE_COUNT};
    rc = conv_write(&conv_umt5, &j, 1, &o);
  }
  if (rc == SP_OK)
    sp_log_info("convert: wrote %s (UMT5 text encoder, %s, %s, %d tensors, %lld parameters, "
                "tokenizer of %d pieces)", out_path, preset ? preset : "custom config",
                kern_dtype_name(od), j.nt, (long long)umt5_params(c),
                tok_model_spec(tok)->n_pieces);
  tok_model_free(tok);
  conv_job_free(&j);
  return rc;
}
