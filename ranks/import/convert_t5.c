/* safetensors -> T5 model file (see convert_t5.h). Reads top-down: fp8, the
 * key mapping of the two styles, the config inferred from the shapes, the
 * cross-check that reports every problem, the tokenizer, the copy in
 * bounded parts. Inputs (files, directories, index JSON) are resolved by
 * convert_inputs.c. */
#include "convert_t5.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert_impl.h"
#include "log.h"
#include "safetensors.h"
#include "t5_file.h"
#include "tokenizer.h"

#define PART_VALUES ((int64_t)1 << 24) /* values converted per part: 64 MiB of fp32 */
#define SPIECE_KEY "spiece_model"      /* ComfyUI's tokenizer tensor */
#define FP8_MARKER "scaled_fp8"        /* ComfyUI's marker of scaled fp8 files */
#define SCALE_W ".scale_weight"
#define SCALE_IN ".scale_input"

/* ---- key mapping ------------------------------------------------------------ */

const char *rank_convert_t5_style_name(rank_convert_t5_style s) {
  return s == RANK_CONVERT_T5_HF ? "transformers" : "wan";
}

static int has_suffix(const char *s, const char *x) {
  size_t n = strlen(s), m = strlen(x);
  return n >= m && strcmp(s + n - m, x) == 0;
}

/* transformers' leaves under encoder.block.N. against Wan's under blocks.N. */
static const struct {
  const char *hf, *wan;
} hf_leaf[] = {
    {"layer.0.layer_norm.weight", "norm1.weight"},
    {"layer.0.SelfAttention.q.weight", "attn.q.weight"},
    {"layer.0.SelfAttention.k.weight", "attn.k.weight"},
    {"layer.0.SelfAttention.v.weight", "attn.v.weight"},
    {"layer.0.SelfAttention.o.weight", "attn.o.weight"},
    {"layer.0.SelfAttention.relative_attention_bias.weight", "pos_embedding.embedding.weight"},
    {"layer.1.layer_norm.weight", "norm2.weight"},
    {"layer.1.DenseReluDense.wi_0.weight", "ffn.gate.0.weight"},
    {"layer.1.DenseReluDense.wi_1.weight", "ffn.fc1.weight"},
    {"layer.1.DenseReluDense.wo.weight", "ffn.fc2.weight"},
};
#define HF_BLOCK "encoder.block."

int rank_convert_t5_map_key(rank_convert_t5_style s, const char *key, char *buf, size_t n) {
  int w = -1;
  if (s == RANK_CONVERT_T5_WAN) {
    w = snprintf(buf, n, "%s", key);
  } else if (strcmp(key, "shared.weight") == 0 || strcmp(key, "encoder.embed_tokens.weight") == 0) {
    w = snprintf(buf, n, "token_embedding.weight");
  } else if (strcmp(key, "encoder.final_layer_norm.weight") == 0) {
    w = snprintf(buf, n, "norm.weight");
  } else if (rank_convert_has_prefix(key, HF_BLOCK)) {
    int64_t b;
    const char *rest = rank_convert_parse_index(key + strlen(HF_BLOCK), &b);
    for (size_t i = 0; rest && i < sizeof hf_leaf / sizeof hf_leaf[0]; i++)
      if (strcmp(rest, hf_leaf[i].hf) == 0)
        w = snprintf(buf, n, "blocks.%lld.%s", (long long)b, hf_leaf[i].wan);
  }
  return w < 0 || (size_t)w >= n ? -1 : 0;
}

/* Keys only a UMT5 encoder checkpoint has, in either style. */
static int is_t5_key(const char *key) {
  return strcmp(key, "shared.weight") == 0 || strcmp(key, "token_embedding.weight") == 0 ||
         strcmp(key, "encoder.final_layer_norm.weight") == 0 ||
         rank_convert_has_prefix(key, HF_BLOCK) ||
         has_suffix(key, ".pos_embedding.embedding.weight");
}

/* ---- the checkpoint ----------------------------------------------------------- */

typedef struct t5_ckpt {
  rank_convert_ckpt cp; /* names: Wan's keys */
  rank_convert_t5_style style;
  int skipped;  /* decoder, lm_head, tied copies, scale_input, markers */
  int fp8;      /* fp8 weights */
  umt5_config config;
  int slot[UMT5_MAX_TENSORS]; /* table entry -> src index, -1 if missing */
  const rank_convert_src *spiece;
} t5_ckpt;

static rank_convert_src *find_key(t5_ckpt *ck, const char *key) {
  for (int i = 0; i < ck->cp.nsrc; i++)
    if (strcmp(ck->cp.src[i].t->name, key) == 0) return &ck->cp.src[i];
  return NULL;
}

static int is_float_dtype(rank_st_dtype d) {
  return d == RANK_ST_F32 || d == RANK_ST_F16 || d == RANK_ST_BF16;
}
static int is_fp8(rank_st_dtype d) { return d == RANK_ST_F8_E4M3 || d == RANK_ST_F8_E5M2; }

/* Names every tensor, attaches the scales, counts what is skipped. */
static void classify(t5_ckpt *ck, problems *p) {
  int has_shared = find_key(ck, "shared.weight") != NULL;
  for (int i = 0; i < ck->cp.nsrc; i++) {
    rank_convert_src *s = &ck->cp.src[i];
    const char *k = s->t->name;
    if (strcmp(k, SPIECE_KEY) == 0) {
      ck->spiece = s;
    } else if (strcmp(k, FP8_MARKER) == 0 || has_suffix(k, SCALE_IN) ||
               (ck->style == RANK_CONVERT_T5_HF &&
                (rank_convert_has_prefix(k, "decoder.") || rank_convert_has_prefix(k, "lm_head.") ||
                 (has_shared && strcmp(k, "encoder.embed_tokens.weight") == 0)))) {
      ck->skipped++;
    } else if (has_suffix(k, SCALE_W)) {
      char base[RANK_ST_MAX_NAME + 16];
      snprintf(base, sizeof base, "%.*s.weight", (int)(strlen(k) - strlen(SCALE_W)), k);
      rank_convert_src *w = find_key(ck, base);
      if (!w || !is_fp8(w->t->dtype))
        rank_convert_problem(p, "%s: tensor '%s': a scale for '%s', which is %s", s->file->path,
                             k, base, w ? "not an fp8 tensor" : "missing");
      else if (s->t->numel != 1 || !is_float_dtype(s->t->dtype))
        rank_convert_problem(p, "%s: tensor '%s': a scale must be one F32/F16/BF16 value",
                             s->file->path, k);
      else {
        w->scale = s->t;
        w->sfile = s->file;
      }
    } else if (rank_convert_t5_map_key(ck->style, k, s->name, sizeof s->name) != 0) {
      s->name[0] = 0;
      rank_convert_problem(p, "%s: tensor '%s': not a tensor of a UMT5 encoder (%s keys)",
                           s->file->path, k, rank_convert_t5_style_name(ck->style));
    }
  }
}

/* The config from the shapes: vocab and dim from the embedding, layers from
 * the highest block index, dim_attn from q, ffn from fc1, buckets and heads
 * from layer 0's position table; max_dist is no shape: the published 128. */
static int infer_config(t5_ckpt *ck, problems *p) {
  umt5_config c;
  umt5_config_published(&c);
  static const char *const need[] = {"token_embedding.weight", "blocks.0.attn.q.weight",
                                     "blocks.0.ffn.fc1.weight",
                                     "blocks.0.pos_embedding.embedding.weight"};
  const rank_convert_src *s[4];
  for (int i = 0; i < 4; i++) {
    s[i] = rank_convert_ckpt_find(&ck->cp, need[i]);
    if (!s[i] || s[i]->t->ndim != 2) {
      rank_convert_problem(p, "%s: tensor '%s' %s (needed to infer the config)", ck->cp.label,
                           need[i], s[i] ? "is not 2-D" : "is missing (Wan's key)");
      return -1;
    }
  }
  c.vocab = s[0]->t->shape[0];
  c.dim = s[0]->t->shape[1];
  c.dim_attn = s[1]->t->shape[0];
  c.ffn = s[2]->t->shape[0];
  c.buckets = s[3]->t->shape[0];
  c.heads = s[3]->t->shape[1];
  int64_t layers = 0;
  for (int i = 0; i < ck->cp.nsrc; i++) {
    int64_t b;
    const char *k = ck->cp.src[i].name;
    if (rank_convert_has_prefix(k, "blocks.") && rank_convert_parse_index(k + 7, &b) &&
        b + 1 > layers)
      layers = b + 1;
  }
  c.layers = layers;
  ck->config = c; /* used only when the verdict is 0 */
  char err[256];
  return rank_convert_config_verdict(umt5_config_check(&c, err, sizeof err), err, ck->cp.label, p);
}

static void check_tensors(t5_ckpt *ck, problems *p) {
  const umt5_config *c = &ck->config;
  const int count = umt5_table_count(c);
  for (int i = 0; i < count; i++) ck->slot[i] = -1;
  static const rank_st_dtype ok[] = {RANK_ST_F32, RANK_ST_F16, RANK_ST_BF16, RANK_ST_F8_E4M3,
                                     RANK_ST_F8_E5M2};
  for (int i = 0; i < ck->cp.nsrc; i++) {
    rank_convert_src *s = &ck->cp.src[i];
    if (!s->name[0]) continue;
    int ti = umt5_table_find(c, s->name);
    if (ti < 0) {
      rank_convert_problem(p, "%s: tensor '%s': not a tensor of a UMT5 encoder of the inferred "
                           "config (%lld layers)",
                           s->file->path, s->t->name, (long long)c->layers);
      continue;
    }
    if (rank_convert_ckpt_claim(&ck->cp, ck->slot, ti, i, p) != 0) continue;
    umt5_tensor t;
    umt5_table_entry(c, ti, &t);
    rank_convert_check_shape(s->file->path, s->t, t.ndim, t.shape, p);
    rank_convert_check_dtype(s->file->path, s->t, ok, (int)(sizeof ok / sizeof ok[0]), p);
    if (is_fp8(s->t->dtype)) ck->fp8++;
  }
  for (int i = 0; i < count; i++) {
    if (ck->slot[i] >= 0) continue;
    umt5_tensor t;
    umt5_table_entry(c, i, &t);
    rank_convert_problem(p, "%s: missing tensor '%s' (Wan's key)", ck->cp.label, t.name);
  }
}

/* ---- the tokenizer -------------------------------------------------------------- */

static int load_tokenizer(const t5_ckpt *ck, const char *path, tok_model **out) {
  if (path) return tok_model_load(path, out);
  const rank_convert_src *s = ck->spiece;
  if (!s) {
    sp_log_error("%s: no tokenizer: pass --tokenizer PATH (the spiece.model or tokenizer.json "
                 "of google/umt5-xxl, as Wan ships it in google/umt5-xxl/)",
                 ck->cp.label);
    return SP_ERR_INPUT;
  }
  if (s->t->dtype != RANK_ST_U8 || s->t->numel > TOK_MAX_FILE_BYTES || s->t->numel == 0) {
    sp_log_error("%s: tensor '%s' is not a uint8 spiece.model of 1..%u bytes", s->file->path,
                 SPIECE_KEY, TOK_MAX_FILE_BYTES);
    return SP_ERR_INPUT;
  }
  uint8_t *buf = sp_xmalloc((size_t)s->t->numel);
  int rc = rank_st_read(s->file, s->t, 0, buf, (size_t)s->t->numel);
  tok_spec spec = {0};
  char err[512];
  if (rc == SP_OK && tok_spm_parse(buf, (size_t)s->t->numel, &spec, err, sizeof err) != 0) {
    sp_log_error("%s: tensor '%s' (spiece.model): %s", s->file->path, SPIECE_KEY, err);
    rc = SP_ERR_INPUT;
  }
  if (rc == SP_OK && tok_model_create(&spec, out, err, sizeof err) != 0) {
    sp_log_error("%s: tensor '%s' (spiece.model): %s", s->file->path, SPIECE_KEY, err);
    rc = SP_ERR_INPUT;
  }
  tok_spec_free(&spec);
  free(buf);
  if (rc == SP_OK) sp_log_info("convert: tokenizer from the checkpoint's '%s' tensor", SPIECE_KEY);
  return rc;
}

/* ---- the copy --------------------------------------------------------------------- */

static int read_scale(const rank_convert_src *s, float *scale) {
  *scale = 1.0f;
  if (!s->scale) return SP_OK;
  unsigned char raw[4];
  int rc = rank_st_read(s->sfile, s->scale, 0, raw, rank_st_dtype_size(s->scale->dtype));
  if (rc == SP_OK) rank_convert_to_f32(s->scale->dtype, raw, 1.0f, scale, 1);
  if (rc == SP_OK && (!isfinite(*scale) || *scale == 0.0f)) {
    sp_log_error("%s: tensor '%s' is %g; a scale must be finite and non-zero", s->sfile->path,
                 s->scale->name, (double)*scale);
    rc = SP_ERR_INPUT;
  }
  return rc;
}

static int copy_tensor(const rank_convert_src *s, const umt5_tensor *t, t5_model_writer *w,
                       unsigned char *raw, float *f) {
  float scale;
  int rc = read_scale(s, &scale);
  for (int64_t at = 0; rc == SP_OK && at < t->numel; at += PART_VALUES) {
    int64_t n = t->numel - at < PART_VALUES ? t->numel - at : PART_VALUES;
    rc = rank_convert_read_f32(s->file, s->t, at, n, scale, raw, f);
    if (rc == SP_OK) rc = t5_model_writer_put_part(w, t->name, f, at, n);
  }
  return rc;
}

static int write_file(const t5_ckpt *ck, const tok_model *tok, const char *out_path,
                      kern_dtype od) {
  const umt5_config *c = &ck->config;
  const char *preset = t5_preset_match(c);
  t5_model_writer *w = NULL;
  int rc = t5_model_writer_open(out_path, c, od, preset, tok, &w);
  if (rc != SP_OK) return rc;
  unsigned char *raw = sp_xmalloc((size_t)PART_VALUES * 4);
  float *f = sp_xmalloc((size_t)PART_VALUES * sizeof *f);
  const int count = umt5_table_count(c);
  for (int i = 0; i < count && rc == SP_OK; i++) {
    umt5_tensor t;
    umt5_table_entry(c, i, &t);
    rc = copy_tensor(&ck->cp.src[ck->slot[i]], &t, w, raw, f);
  }
  free(raw);
  free(f);
  if (rc != SP_OK) {
    t5_model_writer_abort(w);
    sp_log_error("%s: not converted; nothing written", out_path);
    return rc;
  }
  rc = t5_model_writer_commit(w);
  if (rc == SP_OK)
    sp_log_info("convert: wrote %s (UMT5 text encoder, %s, %s, %d tensors, %lld parameters, "
                "tokenizer of %d pieces)",
                out_path, preset ? preset : "custom config", kern_dtype_name(od), count,
                (long long)umt5_params(c), tok_model_spec(tok)->n_pieces);
  return rc;
}

/* ---- the whole conversion ------------------------------------------------------ */

int rank_convert_is_t5(int ninputs, char *const *args, int *is_t5) {
  return rank_convert_inputs_any_key(ninputs, args, is_t5_key, is_t5);
}

int rank_convert_t5_run(int ninputs, char *const *args, const char *tokenizer_path,
                        const char *out_path, kern_dtype od) {
  t5_ckpt *ck = sp_xcalloc(1, sizeof *ck);
  problems p = {0};
  tok_model *tok = NULL;
  int rc = rank_convert_ckpt_open(ninputs, args, &ck->cp, &p);
  if (rc != SP_OK) goto out;
  ck->style = RANK_CONVERT_T5_WAN;
  for (int i = 0; i < ck->cp.nsrc; i++) {
    const char *key = ck->cp.src[i].t->name;
    if (strcmp(key, "shared.weight") == 0 || rank_convert_has_prefix(key, HF_BLOCK))
      ck->style = RANK_CONVERT_T5_HF;
  }
  classify(ck, &p);
  if (infer_config(ck, &p) == 0) {
    const umt5_config *c = &ck->config;
    sp_log_info("convert: %d file(s), %d tensors, UMT5 encoder with %s keys: vocab %lld, dim "
                "%lld, dim_attn %lld, ffn %lld, %lld heads, %lld layers, %lld buckets "
                "(max_dist %lld, the published); %d tensors skipped (decoder, lm_head, tied "
                "copies, fp8 markers and input scales)",
                ck->cp.nf, ck->cp.nsrc, rank_convert_t5_style_name(ck->style), (long long)c->vocab,
                (long long)c->dim, (long long)c->dim_attn, (long long)c->ffn, (long long)c->heads,
                (long long)c->layers, (long long)c->buckets, (long long)c->max_dist, ck->skipped);
    check_tensors(ck, &p);
  }
  if ((rc = rank_convert_problems_end(&p, out_path)) != SP_OK) goto out;
  if (ck->fp8) sp_log_info("convert: %d fp8 tensors dequantised (value x scale_weight)", ck->fp8);
  if ((rc = load_tokenizer(ck, tokenizer_path, &tok)) != SP_OK) goto out;
  rc = write_file(ck, tok, out_path, od);
out:
  tok_model_free(tok);
  rank_convert_ckpt_close(&ck->cp);
  free(ck);
  return rc;
}
