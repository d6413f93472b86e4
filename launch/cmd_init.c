/* staticpipe init: write a synthetic model file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "log.h"
#include "model_file.h"
#include "path_check.h"
#include "progress.h"
#include "synth.h"
#include "t5_file.h"
#include "tokenizer.h"
#include "vae_file.h"
#include "wan_vae22_file.h"
#include "wan_vae22_schema.h"

enum { OPT_ARCH = JOB_OPT_COUNT, OPT_PRESET, OPT_SEED, OPT_DTYPE, OPT_LAYERS, OPT_TOKENIZER,
       OPT_ENCODER, OPT_OUT, OPT_QUIET, OPT_HELP };

static void init_table(cli_opts *t) {
  static const job_option own[] = {
      {OPT_ARCH, "arch", 'a', "PRESET", NULL, 0,
       "the preset (the list above) (required)"},
      {OPT_PRESET, "preset", 0, "PRESET", NULL, 0, "the same as --arch (give one of them)"},
      {OPT_SEED, "seed", 0, "N", "0", 0, "generator seed, 0..2^64-1"},
      {OPT_DTYPE, "dtype", 0, "T", NULL, 0,
       "bf16 or fp32 (default bf16 for a DiT and a text encoder,\n"
       "fp32 for a VAE); a DiT also fp8: the blocks' linear\n"
       "weights quantised to e4m3 per output channel from the\n"
       "bf16 weights (the weights of synth:PRESET:SEED run with\n"
       "--precision fp8), the rest bf16; or int8: the same with\n"
       "int8 codes (scale amax / 127, MODEL.md \"int8 weights\");\n"
       "or q8_0: GGUF's Q8_0 (ggml's quantiser, the rest bf16; a\n"
       "quant file, run weight-only)"},
      {OPT_TOKENIZER, "tokenizer", 0, "PATH", NULL, 0,
       "a text encoder's tokenizer (spiece.model or\n"
       "tokenizer.json), stored in the file; its pieces must fit\n"
       "the vocabulary (default: umt5-tiny's built-in one;\n"
       "required for umt5-xxl)"},
      {OPT_LAYERS, "layers", 0, "N", NULL, 0,
       "override the number of blocks of a DiT, 1..1024 (default:\n"
       "the preset's)"},
      {OPT_ENCODER, "encoder", 0, NULL, NULL, 0,
       "a Wan 2.1 VAE: write the encoder too (its weights as\n"
       "synth:PRESET:SEED has them), so the file can encode\n"
       "images and videos; without it the file holds the decoder\n"
       "alone (a Wan 2.2 VAE always holds both)"},
      {OPT_OUT, "out", 'o', "FILE", NULL, 0,
       "output file (required); written to a temporary name and\n"
       "renamed into place, so a failure leaves nothing behind"},
      {OPT_QUIET, "quiet", 'q', NULL, NULL, 0, "no progress or info lines"},
      {OPT_HELP, "help", 'h', NULL, NULL, 0, "this text"},
  };
  cli_opts_build(t, NULL, 0, own, (int)(sizeof own / sizeof own[0]));
}

static void usage(const cli_opts *t, FILE *f) {
  fprintf(f,
          "usage: staticpipe init --arch PRESET [options] -o FILE\n"
          "\n"
          "Writes a model file with synthetic weights: the same weights as the model\n"
          "spec synth:PRESET:SEED, from a counter-based generator keyed by (seed, tensor\n"
          "name, element index). The presets:\n"
          "  DiT: %s\n"
          "    (*-tiny: a few blocks, for tests; wan2.1-*: text to video; wan2.2-a14b,\n"
          "    wan2.2-tiny: two experts, text to video; wan2.2-i2v-*: two experts, image\n"
          "    to video, 36 input channels; wan2.2-ti2v-*: text and image to video with\n"
          "    the Wan 2.2 VAE's 48 channels)\n"
          "  Wan 2.1 VAE (the decoder; with --encoder the encoder too): %s\n"
          "  Wan 2.2 VAE (encoder and decoder): %s\n"
          "  text encoder: %s (umt5-tiny with its built-in tokenizer,\n"
          "    umt5-xxl with --tokenizer)\n"
          "\n",
          rank_model_preset_names(), vae_preset_names(), wan_vae22_schema.preset_names(),
          t5_preset_names());
  cli_opts_usage(t, f);
}

/* What init's flags say. */
typedef struct init_cli {
  const char *arch, *out, *tokenizer;
  uint64_t seed;
  int64_t layers;
  int quiet, dtype_set, encoder;
  kern_dtype dtype;
} init_cli;

static int init_opt(void *ctx, int id, const char *v) {
  init_cli *c = ctx;
  switch (id) {
  case OPT_ARCH:
  case OPT_PRESET:
    if (c->arch) { /* two names of one option */
      sp_log_error("init: --arch and --preset name one thing: give one of them");
      return SP_ERR_INPUT;
    }
    c->arch = v;
    return SP_OK;
  case OPT_SEED: return job_parse_uint64("--seed", v, &c->seed);
  case OPT_DTYPE:
    c->dtype_set = 1;
    return cli_parse_dit_dtype("--dtype", v, &c->dtype);
  case OPT_LAYERS: return job_parse_int64("--layers", v, 1, 1024, &c->layers);
  case OPT_TOKENIZER: c->tokenizer = v; return SP_OK;
  case OPT_ENCODER: c->encoder = 1; return SP_OK;
  case OPT_OUT: c->out = v; return SP_OK;
  case OPT_QUIET: c->quiet = 1; return SP_OK;
  default: return CLI_HELP;
  }
}

/* A text encoder preset: the tensors synth:PRESET:SEED generates (the
 * embedding in parts of rows), with the tokenizer of tok_path, or when it
 * is NULL the preset's built-in one. */
static int init_t5(const char *preset, uint64_t seed, kern_dtype dtype, const char *tok_path,
                   const char *out) {
  char spec[128], seedstr[32];
  snprintf(spec, sizeof spec, "synth:%s:%llu", preset, (unsigned long long)seed);
  snprintf(seedstr, sizeof seedstr, "%llu", (unsigned long long)seed);
  const char *builtin = t5_preset_tokenizer(preset);
  if (!tok_path && !builtin) {
    sp_log_error("init: --arch %s is a text encoder without a built-in tokenizer: --tokenizer "
                 "PATH is required (spiece.model or tokenizer.json; it is stored in the file)",
                 preset);
    return SP_ERR_INPUT;
  }
  t5_model *m = NULL;
  tok_model *tok = NULL;
  t5_model_writer *w = NULL;
  int rc = t5_model_open(spec, 0, &m);
  if (rc == SP_OK && tok_path) rc = tok_model_load(tok_path, &tok);
  if (rc != SP_OK) goto out;
  const umt5_config *c = &t5_model_get_info(m)->config;
  const int64_t rows = 4096, cap = umt5_layer_floats(c) > rows * c->dim
                                       ? umt5_layer_floats(c) : rows * c->dim;
  float *buf = sp_xmalloc((size_t)cap * sizeof *buf);
  int32_t *ids = sp_xmalloc((size_t)rows * sizeof *ids);
  /* without --tokenizer, the one synth: carries (the preset's built-in) */
  rc = t5_model_writer_open(out, c, dtype, preset, tok ? tok : t5_model_tokenizer(m), &w);
  if (rc == SP_OK) rc = t5_model_writer_attr(w, "synth_seed", seedstr);
  if (rc == SP_OK) rc = t5_model_writer_attr(w, "synth_preset", preset);
  const uint64_t esize = kern_dtype_size(dtype); /* the bytes of a value in the file */
  sp_progress_begin("init: writing weights", NULL, (uint64_t)umt5_params(c) * esize);
  for (int64_t r0 = 0; rc == SP_OK && r0 < c->vocab; r0 += rows) {
    const int64_t n = c->vocab - r0 < rows ? c->vocab - r0 : rows;
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)(r0 + i);
    rc = t5_model_read_embed(m, ids, n, buf);
    if (rc == SP_OK)
      rc = t5_model_writer_put_part(w, "token_embedding.weight", buf, r0 * c->dim, n * c->dim);
    sp_progress_add((uint64_t)(n * c->dim) * esize);
  }
  const int count = umt5_table_count(c);
  for (int l = 0; rc == SP_OK && l < c->layers; l++) {
    rc = t5_model_read_layer(m, l, buf);
    for (int i = 0; rc == SP_OK && i < count; i++) {
      umt5_tensor t;
      umt5_table_entry(c, i, &t);
      if (t.layer == l) rc = t5_model_writer_put(w, t.name, buf + t.offset, t.numel);
      if (t.layer == l) sp_progress_add((uint64_t)t.numel * esize);
    }
  }
  if (rc == SP_OK) rc = t5_model_read_norm(m, buf);
  if (rc == SP_OK) rc = t5_model_writer_put(w, "norm.weight", buf, c->dim);
  sp_progress_add((uint64_t)c->dim * esize);
  sp_progress_end();
  free(buf);
  free(ids);
  if (rc == SP_OK) {
    rc = t5_model_writer_commit(w);
    w = NULL;
    if (rc == SP_OK)
      sp_log_info("init: wrote %s (%s, %s, seed %llu, tokenizer %s%s)", out, preset,
                  kern_dtype_name(dtype), (unsigned long long)seed,
                  tok_path ? tok_path : "the built-in ", tok_path ? "" : builtin);
  }
out:
  if (w) t5_model_writer_abort(w);
  tok_model_free(tok);
  t5_model_close(m);
  return rc;
}

/* The tensors of table t, read by read from m (packed as t), into wr; the
 * progress line counts each tensor generated and written (esize bytes a
 * value in the file). */
static int put_vae_table(vae_model *m, vae_model_writer *wr, const wan_vae_table *t,
                         int (*read)(vae_model *, float *, int64_t), uint64_t esize) {
  float *packed = sp_xmalloc((size_t)t->packed_floats * sizeof *packed);
  int rc = read(m, packed, t->packed_floats);
  uint64_t values = 0;
  for (int i = 0; i < t->count; i++) values += (uint64_t)t->t[i].numel;
  sp_progress_add(values * esize);
  for (int i = 0; rc == SP_OK && i < t->count; i++) {
    rc = vae_model_writer_put(wr, t->t[i].name, packed + t->t[i].offset, t->t[i].numel);
    sp_progress_add((uint64_t)t->t[i].numel * esize);
  }
  free(packed);
  return rc;
}

/* A VAE preset: the tensors synth:PRESET:SEED generates, written one by
 * one: the decoder's, and the encoder's when encoder is set (a file
 * without them decodes only). */
static int init_vae(const char *preset, uint64_t seed, kern_dtype dtype, int encoder,
                    const char *out) {
  char spec[128];
  snprintf(spec, sizeof spec, "synth:%s:%llu", preset, (unsigned long long)seed);
  vae_model *m = NULL;
  int rc = vae_model_open(spec, 0, &m);
  if (rc != SP_OK) return rc;
  wan_vae_config c = vae_model_get_info(m)->config;
  c.encoder = encoder;
  static wan_vae_weights w;
  static wan_vae_enc_weights ew;
  static wan_vae_table t, et;
  wan_vae_table_make(&c, &w, &t);
  wan_vae_enc_table_make(&c, &ew, &et);
  vae_model_writer *wr = NULL;
  char seedstr[32];
  snprintf(seedstr, sizeof seedstr, "%llu", (unsigned long long)seed);
  /* progress: each part's weights generated (counted at once), then each written */
  const uint64_t esize = kern_dtype_size(dtype);
  const uint64_t values = (uint64_t)t.params + (encoder ? (uint64_t)et.params : 0);
  sp_progress_begin("init: generating and writing weights", NULL, 2 * values * esize);
  rc = vae_model_writer_open(out, &c, dtype, preset, &wr);
  if (rc == SP_OK) rc = vae_model_writer_attr(wr, "synth_seed", seedstr);
  if (rc == SP_OK) rc = vae_model_writer_attr(wr, "synth_preset", preset);
  if (rc == SP_OK) rc = put_vae_table(m, wr, &t, vae_model_read, esize);
  if (rc == SP_OK && encoder) rc = put_vae_table(m, wr, &et, vae_model_read_encoder, esize);
  sp_progress_end();
  if (rc == SP_OK) {
    rc = vae_model_writer_commit(wr);
    if (rc == SP_OK)
      sp_log_info("init: wrote %s (%s, %s, seed %llu, %d tensors%s)", out, preset,
                  kern_dtype_name(dtype), (unsigned long long)seed,
                  t.count + (encoder ? et.count : 0), encoder ? ", with the encoder" : "");
  } else {
    vae_model_writer_abort(wr);
  }
  vae_model_close(m);
  return rc;
}

/* A Wan 2.2 VAE preset: both parts' tensors as synth:PRESET:SEED
 * generates them, written one by one. */
static int init_vae22(const char *preset, uint64_t seed, kern_dtype dtype, const char *out) {
  char spec[128], seedstr[32];
  snprintf(spec, sizeof spec, "synth:%s:%llu", preset, (unsigned long long)seed);
  snprintf(seedstr, sizeof seedstr, "%llu", (unsigned long long)seed);
  wan_vae22_model *m = NULL;
  wan_vae22_writer *wr = NULL;
  int rc = wan_vae22_open(spec, 0, &m);
  if (rc != SP_OK) return rc;
  const wan_vae22_config *c = &wan_vae22_get_info(m)->config;
  static wan_vae22_weights w;
  static wan_vae_table t;
  rc = wan_vae22_writer_open(out, c, dtype, preset, &wr);
  if (rc == SP_OK) rc = wan_vae22_writer_attr(wr, "synth_seed", seedstr);
  if (rc == SP_OK) rc = wan_vae22_writer_attr(wr, "synth_preset", preset);
  /* progress: each part's weights generated (counted at once), then each
   * tensor written */
  const uint64_t esize = kern_dtype_size(dtype);
  sp_progress_begin("init: generating and writing weights", NULL,
                      2 * (uint64_t)wan_vae22_get_info(m)->size.params * esize);
  for (int p = 0; rc == SP_OK && p < WAN_VAE22_PARTS; p++) {
    wan_vae22_table_make(c, (wan_vae22_part)p, &w, &t);
    float *packed = sp_xmalloc((size_t)t.packed_floats * sizeof *packed);
    rc = wan_vae22_read(m, (wan_vae22_part)p, packed, t.packed_floats);
    uint64_t values = 0;
    for (int i = 0; i < t.count; i++) values += (uint64_t)t.t[i].numel;
    sp_progress_add(values * esize);
    for (int i = 0; rc == SP_OK && i < t.count; i++) {
      rc = wan_vae22_writer_put(wr, (wan_vae22_part)p, t.t[i].name, packed + t.t[i].offset,
                                t.t[i].numel);
      sp_progress_add((uint64_t)t.t[i].numel * esize);
    }
    free(packed);
  }
  sp_progress_end();
  if (rc == SP_OK) {
    rc = wan_vae22_writer_commit(wr);
    if (rc == SP_OK)
      sp_log_info("init: wrote %s (%s, %s, seed %llu, %d tensors)", out, preset,
                  kern_dtype_name(dtype), (unsigned long long)seed,
                  wan_vae22_get_info(m)->size.tensors);
  } else if (wr) {
    wan_vae22_writer_abort(wr);
  }
  wan_vae22_close(m);
  return rc;
}

/* What every tensor of init_dit shares: the writer, the config and
 * experts, the seed, the file's dtype, and the buffers of one tensor at a
 * time: the generated values (bf16 or fp32), and for a quantized file
 * their fp32 widening, which the writer quantises. */
typedef struct synth_dit {
  rank_model_writer *w;
  const wan_config *c;
  const rank_model_experts *x;
  uint64_t seed;
  kern_dtype dtype;
  void *buf, *tmp;
  float *wide;
  size_t cap;
} synth_dit;

/* Tensor t of group g, block b, expert e, as synth: generates it, written
 * in the file's dtype: a quantized file's (E4M3, I8, Q8_0) from the bf16
 * weights, quantised by the writer (rank_model_writer_put_value). */
static int put_synth(synth_dit *d, int e, wan_group g, int b, const wan_tensor *t) {
  const int quant = cli_dtype_quantized(d->dtype);
  if (t->bytes > d->cap) {
    free(d->buf);
    free(d->tmp);
    free(d->wide);
    d->cap = t->bytes;
    d->buf = sp_xmalloc(d->cap);
    d->tmp = quant ? sp_xmalloc(d->cap) : NULL;
    d->wide = quant ? sp_xmalloc((size_t)t->numel * sizeof(float)) : NULL;
  }
  rank_synth_tensor(d->c, d->seed, rank_synth_expert_prefix(d->x->count, e), g, b, t,
                    quant ? KERN_DTYPE_BF16 : d->dtype, d->buf);
  if (!quant) return rank_model_writer_put_expert(d->w, e, g, b, t->name, d->buf, t->bytes);
  kern_bf16_to_f32_n(d->buf, d->wide, (size_t)t->numel);
  return rank_model_writer_put_value(d->w, e, g, b, t->name, d->wide, d->tmp);
}

/* A DiT of config c (with x's experts) with synthetic weights: every
 * tensor from rank_synth_tensor, written block by block (progress.h).
 * layers_set: --layers changed the preset's count, so the
 * file does not name the preset. */
static int init_dit(const char *arch, const wan_config *c, const rank_model_experts *x,
                    uint64_t seed, kern_dtype dtype, int layers_set, const char *out) {
  rank_model_writer *w = NULL;
  int rc = rank_model_writer_open_experts(out, c, dtype, layers_set ? "" : arch, x, &w);
  if (rc != SP_OK) return rc;
  char seedstr[32];
  snprintf(seedstr, sizeof seedstr, "%llu", (unsigned long long)seed);
  if ((rc = rank_model_writer_attr(w, "synth_seed", seedstr)) != SP_OK) goto fail;
  if ((rc = rank_model_writer_attr(w, "synth_preset", arch)) != SP_OK) goto fail;

  /* the tables in the generated dtype (a quantized file's: bf16) */
  const kern_dtype gen = cli_dtype_quantized(dtype) ? KERN_DTYPE_BF16 : dtype;
  synth_dit d = {.w = w, .c = c, .x = x, .seed = seed, .dtype = dtype};
  uint64_t total = 0; /* progress: the bytes generated */
  for (int g = 0; g < 3; g++) {
    wan_layout l;
    wan_layout_make(c, (wan_group)g, gen, &l);
    total += (uint64_t)l.data_bytes * (g == WAN_GROUP_BLOCK ? (uint64_t)c->layers : 1) *
             (uint64_t)x->count;
  }
  sp_progress_begin("init: writing weights", NULL, total);
  for (int e = 0; e < x->count && rc == SP_OK; e++)
  for (int g = 0; g < 3 && rc == SP_OK; g++) {
    wan_layout l;
    wan_layout_make(c, (wan_group)g, gen, &l);
    int nb = g == WAN_GROUP_BLOCK ? (int)c->layers : 1;
    for (int b = 0; b < nb && rc == SP_OK; b++) {
      for (int i = 0; i < l.count && rc == SP_OK; i++) {
        rc = put_synth(&d, e, (wan_group)g, b, &l.t[i]);
        sp_progress_add(l.t[i].bytes);
      }
    }
  }
  sp_progress_end();
  free(d.buf);
  free(d.tmp);
  free(d.wide);
  if (rc != SP_OK) goto fail;
  rc = rank_model_writer_commit(w);
  if (rc == SP_OK) sp_log_info("init: wrote %s (%s, %s, seed %llu)", out, arch,
                               rank_model_root_of(dtype), (unsigned long long)seed);
  return rc;
fail:
  rank_model_writer_abort(w);
  return rc;
}

int cmd_init(int argc, char **argv) {
  static const cli_command cmd = {"init", init_table, init_opt, usage, 0};
  init_cli cl = {.dtype = KERN_DTYPE_BF16};
  cli_result res;
  int rc0 = cli_command_parse(&cmd, argc, argv, NULL, &cl, &res);
  if (rc0 != SP_OK || res.help) return rc0;
  const char *arch = cl.arch, *out = cl.out, *tokenizer = cl.tokenizer;
  const uint64_t seed = cl.seed;
  const int64_t layers = cl.layers;
  const int dtype_set = cl.dtype_set, encoder = cl.encoder;
  if (cl.quiet) sp_log_set_level(0); /* warnings and errors only: no info or progress lines */
  const kern_dtype dtype = cl.dtype;
  if (!arch || !out) {
    sp_log_error("init: %s is required", !arch ? "--arch" : "--out");
    return cli_bad_usage("init");
  }
  if (job_output_not_video("--out", out, "a model file (HDF5)") != SP_OK) return SP_ERR_INPUT;
  rank_path_arg in[1] = {{"--tokenizer", tokenizer}};
  if (rank_path_check_output("--out", out, in, 1) != SP_OK) return SP_ERR_INPUT;
  umt5_config tc;
  wan_vae_config vc;
  wan_vae22_config v22;
  const int is_vae22 = wan_vae22_schema.preset(arch, &v22) == 0;
  if (cli_dtype_quantized(dtype) &&
      (t5_preset(arch, &tc) == 0 || vae_preset(arch, &vc) == 0 || is_vae22)) {
    sp_log_error("--dtype %s: only a DiT has %s weights; %s takes bf16 or fp32",
                 cli_dit_dtype_word(dtype), cli_dit_dtype_word(dtype), arch);
    return SP_ERR_INPUT;
  }
  if (encoder && vae_preset(arch, &vc) != 0 && !is_vae22) {
    sp_log_error("--encoder: %s is not a VAE (%s, %s are)", arch, vae_preset_names(),
                 wan_vae22_schema.preset_names());
    return SP_ERR_INPUT;
  }
  if (t5_preset(arch, &tc) == 0) {
    if (layers) {
      sp_log_error("--layers: %s is a text encoder: the preset fixes its layers", arch);
      return SP_ERR_INPUT;
    }
    if (tokenizer && rank_path_check_input("--tokenizer", tokenizer, RANK_PATH_FILE) != SP_OK)
      return SP_ERR_INPUT;
    return init_t5(arch, seed, dtype, tokenizer, out);
  }
  if (tokenizer) {
    sp_log_error("--tokenizer: %s is not a text encoder (%s are)", arch, t5_preset_names());
    return SP_ERR_INPUT;
  }
  if (vae_preset(arch, &vc) == 0) {
    if (layers) {
      sp_log_error("--layers: %s is a VAE decoder, which has no blocks to count", arch);
      return SP_ERR_INPUT;
    }
    return init_vae(arch, seed, dtype_set ? dtype : KERN_DTYPE_F32, encoder, out);
  }
  if (is_vae22) {
    if (layers) {
      sp_log_error("--layers: %s is a VAE, which has no blocks to count", arch);
      return SP_ERR_INPUT;
    }
    return init_vae22(arch, seed, dtype_set ? dtype : KERN_DTYPE_F32, out);
  }
  wan_config c;
  rank_model_experts x;
  if (rank_model_preset(arch, &c, &x) != 0) {
    sp_log_error("--arch: unknown preset '%s' (known: %s, %s, %s, %s)", arch,
                 rank_model_preset_names(), vae_preset_names(), wan_vae22_schema.preset_names(),
                 t5_preset_names());
    return SP_ERR_INPUT;
  }
  if (layers) c.layers = layers;
  return init_dit(arch, &c, &x, seed, dtype, layers != 0, out);
}
