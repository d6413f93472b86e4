/* staticpipe init: write a synthetic model file. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "log.h"
#include "model_file.h"
#include "path_check.h"
#include "synth.h"
#include "t5_file.h"
#include "tokenizer.h"
#include "vae_file.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: staticpipe init --arch PRESET [options] -o FILE\n"
          "\n"
          "Writes a model file with synthetic weights: the same weights as the model\n"
          "spec synth:PRESET:SEED, from a counter-based generator keyed by (seed, tensor\n"
          "name, element index).\n"
          "\n"
          "  -a, --arch PRESET   DiT: wan2.1-tiny (4 blocks, for tests), wan2.1-1.3b,\n"
          "                      wan2.1-14b; two experts (Wan 2.2 A14B): wan2.2-a14b,\n"
          "                      wan2.2-tiny (two wan2.1-tiny DiTs, for tests);\n"
          "                      VAE decoder: %s;\n"
          "                      text encoder: %s (with --tokenizer)\n"
          "                      (required)\n"
          "  -p, --preset PRESET the same as --arch\n"
          "      --seed N        generator seed (default 0)\n"
          "      --dtype T       bf16 or fp32 (default bf16 for a DiT and a text encoder,\n"
          "                      fp32 for a VAE); a DiT also fp8: the blocks' linear\n"
          "                      weights quantised to e4m3 per output channel from the\n"
          "                      bf16 weights (the weights of synth:PRESET:SEED run with\n"
          "                      --precision fp8), the rest bf16; or int8: the same\n"
          "                      with int8 codes (scale amax / 127, MODEL.md \"int8\n"
          "                      weights\"); or q8_0: GGUF's Q8_0 (ggml's quantiser, the\n"
          "                      rest bf16; a quant file, run weight-only)\n"
          "      --tokenizer P   a text encoder's tokenizer (spiece.model or tokenizer.json),\n"
          "                      stored in the file (required for a text encoder: synth:\n"
          "                      weights have none); its pieces must fit the vocabulary\n"
          "      --layers N      override the number of blocks of a DiT (default: the\n"
          "                      preset's)\n"
          "  -o, --out FILE      output file (required); written to a temporary name and\n"
          "                      renamed into place, so a failure leaves nothing behind\n"
          "  -q, --quiet         no progress lines\n"
          "  -h, --help          this text\n",
          vae_preset_names(), t5_preset_names());
}

/* A text encoder preset: the tensors synth:PRESET:SEED generates (the
 * embedding in parts of rows), with the tokenizer of tok_path. */
static int init_t5(const char *preset, uint64_t seed, kern_dtype dtype, const char *tok_path,
                   const char *out, int quiet) {
  char spec[128], seedstr[32];
  snprintf(spec, sizeof spec, "synth:%s:%llu", preset, (unsigned long long)seed);
  snprintf(seedstr, sizeof seedstr, "%llu", (unsigned long long)seed);
  if (!tok_path) {
    sp_log_error("init: --arch %s is a text encoder: --tokenizer PATH is required (spiece.model "
                 "or tokenizer.json; it is stored in the file)",
                 preset);
    return SP_ERR_INPUT;
  }
  t5_model *m = NULL;
  tok_model *tok = NULL;
  t5_model_writer *w = NULL;
  int rc = t5_model_open(spec, 0, &m);
  if (rc == SP_OK) rc = tok_model_load(tok_path, &tok);
  if (rc != SP_OK) goto out;
  const umt5_config *c = &t5_model_get_info(m)->config;
  const int64_t rows = 4096, cap = umt5_layer_floats(c) > rows * c->dim
                                       ? umt5_layer_floats(c) : rows * c->dim;
  float *buf = sp_xmalloc((size_t)cap * sizeof *buf);
  int32_t *ids = sp_xmalloc((size_t)rows * sizeof *ids);
  rc = t5_model_writer_open(out, c, dtype, preset, tok, &w);
  if (rc == SP_OK) rc = t5_model_writer_attr(w, "synth_seed", seedstr);
  if (rc == SP_OK) rc = t5_model_writer_attr(w, "synth_preset", preset);
  for (int64_t r0 = 0; rc == SP_OK && r0 < c->vocab; r0 += rows) {
    const int64_t n = c->vocab - r0 < rows ? c->vocab - r0 : rows;
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)(r0 + i);
    rc = t5_model_read_embed(m, ids, n, buf);
    if (rc == SP_OK)
      rc = t5_model_writer_put_part(w, "token_embedding.weight", buf, r0 * c->dim, n * c->dim);
  }
  const int count = umt5_table_count(c);
  for (int l = 0; rc == SP_OK && l < c->layers; l++) {
    rc = t5_model_read_layer(m, l, buf);
    for (int i = 0; rc == SP_OK && i < count; i++) {
      umt5_tensor t;
      umt5_table_entry(c, i, &t);
      if (t.layer == l) rc = t5_model_writer_put(w, t.name, buf + t.offset, t.numel);
    }
    if (rc == SP_OK && !quiet)
      sp_log_info("init: layer %d/%lld written", l + 1, (long long)c->layers);
  }
  if (rc == SP_OK) rc = t5_model_read_norm(m, buf);
  if (rc == SP_OK) rc = t5_model_writer_put(w, "norm.weight", buf, c->dim);
  free(buf);
  free(ids);
  if (rc == SP_OK) {
    rc = t5_model_writer_commit(w);
    w = NULL;
    if (rc == SP_OK && !quiet)
      sp_log_info("init: wrote %s (%s, %s, seed %llu, tokenizer %s)", out, preset,
                  kern_dtype_name(dtype), (unsigned long long)seed, tok_path);
  }
out:
  if (w) t5_model_writer_abort(w);
  tok_model_free(tok);
  t5_model_close(m);
  return rc;
}

/* A VAE preset: the tensors synth:PRESET:SEED generates, written one by one. */
static int init_vae(const char *preset, uint64_t seed, kern_dtype dtype, const char *out,
                    int quiet) {
  char spec[128];
  snprintf(spec, sizeof spec, "synth:%s:%llu", preset, (unsigned long long)seed);
  vae_model *m = NULL;
  int rc = vae_model_open(spec, 0, &m);
  if (rc != SP_OK) return rc;
  const wan_vae_config *c = &vae_model_get_info(m)->config;
  static wan_vae_weights w;
  static wan_vae_table t;
  wan_vae_table_make(c, &w, &t);
  float *packed = sp_xmalloc((size_t)t.packed_floats * sizeof *packed);
  vae_model_writer *wr = NULL;
  char seedstr[32];
  snprintf(seedstr, sizeof seedstr, "%llu", (unsigned long long)seed);
  rc = vae_model_read(m, packed, t.packed_floats);
  if (rc == SP_OK) rc = vae_model_writer_open(out, c, dtype, preset, &wr);
  if (rc == SP_OK) rc = vae_model_writer_attr(wr, "synth_seed", seedstr);
  if (rc == SP_OK) rc = vae_model_writer_attr(wr, "synth_preset", preset);
  for (int i = 0; rc == SP_OK && i < t.count; i++)
    rc = vae_model_writer_put(wr, t.t[i].name, packed + t.t[i].offset, t.t[i].numel);
  if (rc == SP_OK) {
    rc = vae_model_writer_commit(wr);
    if (rc == SP_OK && !quiet)
      sp_log_info("init: wrote %s (%s, %s, seed %llu, %d tensors)", out, preset,
                  kern_dtype_name(dtype), (unsigned long long)seed, t.count);
  } else {
    vae_model_writer_abort(wr);
  }
  free(packed);
  vae_model_close(m);
  return rc;
}

/* The buffers of one tensor at a time (init_dit): the generated values
 * (bf16 or fp32), and for an fp8 or int8 file their fp32 widening, which
 * the writer quantises. */
typedef struct synth_bufs {
  void *buf, *tmp;
  float *wide;
  size_t cap;
} synth_bufs;

/* Tensor t of group g, block b, expert e, as synth: generates it, written
 * in the file's dtype: an fp8 or int8 file's (dtype E4M3, I8) from the
 * bf16 weights, quantised by the writer (rank_model_writer_put_value). */
static int put_synth(rank_model_writer *w, const wan_config *c, uint64_t seed,
                     const rank_model_experts *x, int e, wan_group g, int b, const wan_tensor *t,
                     kern_dtype dtype, synth_bufs *sb) {
  const int fp8 = dtype != KERN_DTYPE_BF16 && dtype != KERN_DTYPE_F32; /* quantised */
  if (t->bytes > sb->cap) {
    free(sb->buf);
    free(sb->tmp);
    free(sb->wide);
    sb->cap = t->bytes;
    sb->buf = sp_xmalloc(sb->cap);
    sb->tmp = fp8 ? sp_xmalloc(sb->cap) : NULL;
    sb->wide = fp8 ? sp_xmalloc((size_t)t->numel * sizeof(float)) : NULL;
  }
  rank_synth_tensor(c, seed, rank_synth_expert_prefix(x->count, e), g, b, t,
                    fp8 ? KERN_DTYPE_BF16 : dtype, sb->buf);
  if (!fp8) return rank_model_writer_put_expert(w, e, g, b, t->name, sb->buf, t->bytes);
  kern_bf16_to_f32_n(sb->buf, sb->wide, (size_t)t->numel);
  return rank_model_writer_put_value(w, e, g, b, t->name, sb->wide, sb->tmp);
}

/* A DiT of config c (with x's experts) with synthetic weights: every
 * tensor from rank_synth_tensor, written block by block with a progress
 * line per block. layers_set: --layers changed the preset's count, so the
 * file does not name the preset. */
static int init_dit(const char *arch, const wan_config *c, const rank_model_experts *x,
                    uint64_t seed, kern_dtype dtype, int layers_set, const char *out, int quiet) {
  rank_model_writer *w = NULL;
  int rc = rank_model_writer_open_experts(out, c, dtype, layers_set ? "" : arch, x, &w);
  if (rc != SP_OK) return rc;
  char seedstr[32];
  snprintf(seedstr, sizeof seedstr, "%llu", (unsigned long long)seed);
  if ((rc = rank_model_writer_attr(w, "synth_seed", seedstr)) != SP_OK) goto fail;
  if ((rc = rank_model_writer_attr(w, "synth_preset", arch)) != SP_OK) goto fail;

  /* the tables in the generated dtype (an fp8 or int8 file's: bf16) */
  const int fp8 = dtype != KERN_DTYPE_BF16 && dtype != KERN_DTYPE_F32; /* quantised */
  const kern_dtype gen = fp8 ? KERN_DTYPE_BF16 : dtype;
  synth_bufs sb = {0};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  double total = 0, done = 0;
  for (int g = 0; g < 3; g++) {
    wan_layout l;
    wan_layout_make(c, (wan_group)g, gen, &l);
    total += (double)l.data_bytes * (g == WAN_GROUP_BLOCK ? (double)c->layers : 1.0) * x->count;
  }
  for (int e = 0; e < x->count && rc == SP_OK; e++)
  for (int g = 0; g < 3 && rc == SP_OK; g++) {
    wan_layout l;
    wan_layout_make(c, (wan_group)g, gen, &l);
    int nb = g == WAN_GROUP_BLOCK ? (int)c->layers : 1;
    for (int b = 0; b < nb && rc == SP_OK; b++) {
      for (int i = 0; i < l.count && rc == SP_OK; i++) {
        rc = put_synth(w, c, seed, x, e, (wan_group)g, b, &l.t[i], dtype, &sb);
        done += (double)l.t[i].bytes;
      }
      if (!quiet && (g == WAN_GROUP_BLOCK)) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        sp_log_info("init: %s%sblock %d/%lld written, %.2f of %.2f GB, %.0f MB/s",
                    rank_model_expert_name(x->count, e), x->count > 1 ? " expert, " : "", b + 1,
                    (long long)c->layers, done / 1e9, total / 1e9, s > 0 ? done / 1e6 / s : 0.0);
      }
    }
  }
  free(sb.buf);
  free(sb.tmp);
  free(sb.wide);
  if (rc != SP_OK) goto fail;
  rc = rank_model_writer_commit(w);
  if (rc == SP_OK && !quiet) sp_log_info("init: wrote %s (%s, %s, seed %llu)", out, arch,
                                         rank_model_root_of(dtype),
                                         (unsigned long long)seed);
  return rc;
fail:
  rank_model_writer_abort(w);
  return rc;
}

enum { OPT_SEED = 256, OPT_DTYPE, OPT_LAYERS, OPT_TOKENIZER }; /* long-only options */

int cmd_init(int argc, char **argv) {
  static const struct option opts[] = {
      {"arch", required_argument, 0, 'a'},  {"preset", required_argument, 0, 'p'},
      /* No short forms: -s, -d and -l mean --size, --device and --latent
       * in the other commands (README "Commands"). */
      {"seed", required_argument, 0, OPT_SEED},
      {"dtype", required_argument, 0, OPT_DTYPE}, {"layers", required_argument, 0, OPT_LAYERS},
      {"tokenizer", required_argument, 0, OPT_TOKENIZER},
      {"out", required_argument, 0, 'o'},   {"quiet", no_argument, 0, 'q'},
      {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
  const char *arch = NULL, *out = NULL, *tokenizer = NULL;
  uint64_t seed = 0;
  int64_t layers = 0;
  int quiet = 0;
  kern_dtype dtype = KERN_DTYPE_BF16;
  int dtype_set = 0;
  cli_getopt_reset();
  int ch;
  while ((ch = getopt_long(argc, argv, "a:p:o:qh", opts, NULL)) != -1) {
    switch (ch) {
    case 'a':
    case 'p': arch = optarg; break;
    case OPT_SEED:
      if (job_parse_uint64("--seed", optarg, &seed)) return SP_ERR_INPUT;
      break;
    case OPT_DTYPE:
      if (cli_parse_dit_dtype("--dtype", optarg, &dtype)) return SP_ERR_INPUT;
      dtype_set = 1;
      break;
    case OPT_LAYERS:
      if (job_parse_int64("--layers", optarg, 1, 1024, &layers)) return SP_ERR_INPUT;
      break;
    case OPT_TOKENIZER: tokenizer = optarg; break;
    case 'o': out = optarg; break;
    case 'q': quiet = 1; break;
    case 'h': usage(stdout); return SP_OK;
    default: return cli_bad_usage("init");
    }
  }
  if (optind < argc) {
    sp_log_error("init: unexpected argument '%s'", argv[optind]);
    return cli_bad_usage("init");
  }
  if (!arch || !out) {
    sp_log_error("init: %s is required", !arch ? "--arch" : "--out");
    return cli_bad_usage("init");
  }
  rank_path_arg in[1] = {{"--tokenizer", tokenizer}};
  if (rank_path_check_output("--out", out, in, 1) != SP_OK) return SP_ERR_INPUT;
  umt5_config tc;
  wan_vae_config vc;
  if (dtype != KERN_DTYPE_BF16 && dtype != KERN_DTYPE_F32 &&
      (t5_preset(arch, &tc) == 0 || vae_preset(arch, &vc) == 0)) {
    sp_log_error("--dtype %s: only a DiT has quantized weights; %s takes bf16 or fp32",
                 kern_dtype_name(dtype), arch);
    return SP_ERR_INPUT;
  }
  if (t5_preset(arch, &tc) == 0) {
    if (layers) {
      sp_log_error("--layers: %s is a text encoder: the preset fixes its layers", arch);
      return SP_ERR_INPUT;
    }
    if (tokenizer && rank_path_check_input("--tokenizer", tokenizer, RANK_PATH_FILE) != SP_OK)
      return SP_ERR_INPUT;
    return init_t5(arch, seed, dtype, tokenizer, out, quiet);
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
    return init_vae(arch, seed, dtype_set ? dtype : KERN_DTYPE_F32, out, quiet);
  }
  wan_config c;
  rank_model_experts x;
  if (rank_model_preset(arch, &c, &x) != 0) {
    sp_log_error("--arch: unknown preset '%s' (known: %s, %s, %s)", arch,
                 rank_model_preset_names(), vae_preset_names(), t5_preset_names());
    return SP_ERR_INPUT;
  }
  if (layers) c.layers = layers;
  return init_dit(arch, &c, &x, seed, dtype, layers != 0, out, quiet);
}
