/* staticpipe convert: import a Wan 2.1 T2V or Wan 2.1 VAE safetensors
 * checkpoint. Before the converter runs, every file it would read (the
 * shards an index names, the files of a directory) is checked as an input
 * and against the output, and a LoRA file is sent to run --lora. */
#include <dirent.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"
#include "convert.h"
#include "convert_t5.h"
#include "convert_vae.h"
#include "convert_vae22.h"
#include "file_read.h"
#include "json_in.h"
#include "log.h"
#include "model_file.h"
#include "path_check.h"
#include "safetensors.h"

enum { OPT_EXPERT = JOB_OPT_COUNT, OPT_OUT, OPT_DTYPE, OPT_TOKENIZER, OPT_QUIET, OPT_HELP };

static void convert_table(cli_opts *t) {
  static const job_option own[] = {
      {OPT_EXPERT, "expert", 'e', "E=PATH", NULL, 0,
       "the checkpoint (a file, a directory or an index) of one\n"
       "expert of Wan 2.2 A14B, E high or low; given twice (high\n"
       "and low, of one config), instead of IN: one model file\n"
       "with both experts and the published defaults (boundary\n"
       "0.875, cfg 4,3, shift 12, 40 steps)"},
      {OPT_OUT, "out", 'o', "FILE", NULL, 0,
       "output file (required); written to a temporary name and\n"
       "renamed into place, so a failure leaves nothing behind"},
      {OPT_DTYPE, "dtype", 0, "T", NULL, 0,
       "bf16 (rounded to nearest even) or fp32 (full precision,\n"
       "for the CPU reference); default bf16 for a DiT, fp32 for\n"
       "a VAE (73M parameters: 293 MB); a DiT also fp8: the\n"
       "blocks' linear weights (self/cross attention q, k, v, o\n"
       "and the FFN's two) in e4m3 with a float32 scale per output\n"
       "channel (amax / 448, round to nearest even, saturating),\n"
       "the rest bf16 (MODEL.md \"fp8 weights\"); or int8: the\n"
       "same with int8 codes (amax / 127, round to nearest even,\n"
       "MODEL.md \"int8 weights\"); or q8_0: GGUF's Q8_0 (ggml's\n"
       "quantiser; the rest bf16). A GGUF checkpoint's linear\n"
       "weights keep their formats: bf16 or fp32 here is the\n"
       "rest's"},
      {OPT_TOKENIZER, "tokenizer", 0, "PATH", NULL, 0,
       "the text encoder's spiece.model or tokenizer.json (needed\n"
       "unless the checkpoint holds a spiece_model tensor)"},
      {OPT_QUIET, "quiet", 'q', NULL, NULL, 0, "no progress lines"},
      {OPT_HELP, "help", 'h', NULL, NULL, 0, "this text"},
  };
  cli_opts_build(t, NULL, 0, own, (int)(sizeof own / sizeof own[0]));
  cli_opts_allow_repeat(t, OPT_EXPERT); /* high and low */
}

static void usage(const cli_opts *t, FILE *f) {
  fprintf(f,
          "usage: staticpipe convert IN.safetensors [IN2 ...] -o OUT.h5 [options]\n"
          "       staticpipe convert IN.gguf -o OUT.h5 [options]\n"
          "       staticpipe convert --expert high=PATH --expert low=PATH -o OUT.h5 [options]\n"
          "\n"
          "Converts a Wan 2.1 T2V checkpoint, or a Wan 2.1 video VAE, into a staticpipe\n"
          "model file. The inputs are safetensors files, directories of them, or the\n"
          "*.safetensors.index.json that ships with sharded checkpoints. The key style\n"
          "(official Wan, diffusers, ComfyUI 'model.diffusion_model.') is detected and the\n"
          "config inferred from the shapes; every tensor is checked and every problem\n"
          "reported by name. Tensors are streamed one at a time: memory stays near the\n"
          "largest tensor, not the checkpoint.\n"
          "\n"
          "A checkpoint with encoder.* or decoder.* keys is a VAE (WanVAE_ keys as in\n"
          "ComfyUI's wan_2.1_vae.safetensors, or diffusers' AutoencoderKLWan): its decoder\n"
          "is written as a VAE file (inspect shows it); the encoder is skipped and a\n"
          "NaN or infinite weight is refused. A Wan 2.2 VAE (TI2V-5B's: Wan2_2_VAE keys as\n"
          "in ComfyUI's wan2.2_vae.safetensors, or diffusers' AutoencoderKLWan of\n"
          "Wan2.2-TI2V-5B-Diffusers/vae) is written whole, encoder and decoder.\n"
          "\n"
          "A checkpoint of the UMT5-XXL text encoder (transformers' UMT5EncoderModel keys\n"
          "as in diffusers' text_encoder/ and ComfyUI's umt5_xxl_fp16.safetensors, its\n"
          "scaled fp8 form (dequantised), or Wan's own keys) is written as a text encoder\n"
          "file with its tokenizer, for encode.\n"
          "\n"
          "A GGUF file of the DiT (ComfyUI-GGUF's Wan files: general.architecture wan,\n"
          "official or 'model.diffusion_model.' names; one per expert with --expert) keeps\n"
          "its blocks' linear weights in their formats (Q8_0 ... Q2_K, F16, BF16, F32:\n"
          "MODEL.md \"GGUF weights\"); the rest is dequantised to --dtype.\n"
          "\n"
          "A LoRA (lora_down/lora_up, lora_A/lora_B or diff keys) is not converted: run\n"
          "applies it as it is (run --lora FILE[:STRENGTH]).\n"
          "\n");
  cli_opts_usage(t, f);
  fprintf(f,
          "\n"
          "Input dtypes F32, F16, BF16 and, for ComfyUI's fp8 checkpoints, F8_E4M3 (with\n"
          "KEY.scale_weight when scaled; F8_E5M2 too for the text encoder): dequantised\n"
          "to --dtype; with --dtype fp8 the blocks' F8_E4M3 linear weights keep their\n"
          "bytes and their scale_weight (or 1) becomes every output channel's scale.\n"
          "Exit 2 for a bad or incomplete checkpoint.\n");
}

/* What convert's flags say. */
typedef struct convert_cli {
  const char *out, *tokenizer;
  char *experts[2]; /* high, low */
  int quiet, dtype_set;
  kern_dtype dtype;
} convert_cli;

static int convert_opt(void *ctx, int id, const char *v) {
  convert_cli *c = ctx;
  switch (id) {
  case OPT_EXPERT: {
    const int e = strncmp(v, "high=", 5) == 0 ? 0 : strncmp(v, "low=", 4) == 0 ? 1 : -1;
    if (e < 0 || !v[e == 0 ? 5 : 4]) {
      sp_log_error("--expert: '%s' is not high=PATH or low=PATH", v);
      return SP_ERR_INPUT;
    }
    if (c->experts[e]) {
      sp_log_error("--expert: %s given twice", e == 0 ? "high" : "low");
      return SP_ERR_INPUT;
    }
    c->experts[e] = (char *)v + (e == 0 ? 5 : 4);
    return SP_OK;
  }
  case OPT_OUT: c->out = v; return SP_OK;
  case OPT_DTYPE:
    c->dtype_set = 1;
    return cli_parse_dit_dtype("--dtype", v, &c->dtype);
  case OPT_TOKENIZER: c->tokenizer = v; return SP_OK;
  case OPT_QUIET: c->quiet = 1; return SP_OK;
  default: return CLI_HELP;
  }
}

/* ---- the files the converter would read ---- */

/* Every file the inputs name: a file itself, a directory's *.safetensors
 * (as the converter lists them), an index's shards beside it. */
typedef struct file_list {
  char **path;
  int n, cap;
} file_list;

static void list_add(file_list *l, const char *dir, const char *name) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 16;
    l->path = realloc(l->path, (size_t)l->cap * sizeof *l->path);
    if (!l->path) sp_fatal("out of host memory listing the inputs");
  }
  const size_t n = (dir ? strlen(dir) + 1 : 0) + strlen(name) + 1;
  l->path[l->n] = sp_xmalloc(n);
  snprintf(l->path[l->n++], n, "%s%s%s", dir ? dir : "", dir ? "/" : "", name);
}

static void list_free(file_list *l) {
  for (int i = 0; i < l->n; i++) free(l->path[i]);
  free(l->path);
}

static int ends_with(const char *s, const char *suf) {
  const size_t a = strlen(s), b = strlen(suf);
  return a >= b && strcmp(s + a - b, suf) == 0;
}

/* An index's shards (its weight_map's values, beside it); nothing when
 * it cannot be read as one (the converter says why). */
static void index_shards(const char *path, file_list *l) {
  FILE *f = NULL;
  struct stat st;
  if (rank_file_fopen_read(path, &f) != SP_OK) return;
  if (fstat(fileno(f), &st) != 0 || (uint64_t)st.st_size > RANK_ST_MAX_HEADER) {
    fclose(f);
    return;
  }
  char *text = sp_xmalloc((size_t)st.st_size + 1), err[256];
  const size_t n = fread(text, 1, (size_t)st.st_size, f);
  fclose(f);
  json_object *root = NULL, *wm = NULL;
  if (io_json_parse(text, n, RANK_ST_MAX_HEADER, &root, err, sizeof err) == 0 &&
      json_object_object_get_ex(root, "weight_map", &wm) &&
      json_object_is_type(wm, json_type_object)) {
    char *dir = sp_xstrdup(path), *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    const int first = l->n;
    json_object_object_foreach(wm, k, v) {
      (void)k;
      const char *s = json_object_get_string(v);
      int seen = !json_object_is_type(v, json_type_string) || !*s || strchr(s, '/');
      for (int i = first; i < l->n && !seen; i++) seen = ends_with(l->path[i], s);
      if (!seen) list_add(l, slash ? dir : NULL, s);
    }
    free(dir);
  }
  json_object_put(root);
  free(text);
}

/* The files the arguments name into l. */
static void files_of(int n, char *const *args, file_list *l) {
  for (int i = 0; i < n; i++) {
    struct stat st;
    if (stat(args[i], &st) == 0 && S_ISDIR(st.st_mode)) {
      DIR *d = opendir(args[i]);
      for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.' && ends_with(e->d_name, ".safetensors"))
          list_add(l, args[i], e->d_name);
      if (d) closedir(d);
    } else if (ends_with(args[i], ".index.json")) {
      list_add(l, NULL, args[i]);
      index_shards(args[i], l);
    } else {
      list_add(l, NULL, args[i]);
    }
  }
}

/* A key of a LoRA file (lora.h's styles): a low-rank pair or a difference. */
static int lora_key(const char *k) {
  static const char *const parts[] = {".lora_down.", ".lora_up.", ".lora_A.", ".lora_B.",
                                      "lora_unet_"};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    if (strstr(k, parts[i])) return 1;
  return ends_with(k, ".diff") || ends_with(k, ".diff_b");
}

/* A LoRA among the files is refused: run applies it (--lora). */
static int refuse_lora(const file_list *l) {
  for (int i = 0; i < l->n; i++) {
    rank_st_file *f = NULL;
    /* A bad file is the converter's to report, once: read quietly here. */
    const int level = sp_log_level();
    sp_log_set_level(-1);
    const int rc = ends_with(l->path[i], ".safetensors") ? rank_st_open(l->path[i], &f)
                                                          : SP_ERR_INPUT;
    sp_log_set_level(level);
    if (rc != SP_OK) continue;
    const char *key = NULL;
    for (int t = 0; t < f->h.count && !key; t++)
      if (lora_key(f->h.t[t].name)) key = f->h.t[t].name;
    if (key)
      sp_log_error("convert: %s is a LoRA (key '%.120s'), not a checkpoint: it is not "
                   "converted; run applies it as it is: staticpipe run ... --lora %s[:STRENGTH]",
                   l->path[i], key, l->path[i]);
    rank_st_close(f);
    if (key) return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* The arguments (inputs, or the experts' checkpoints), every file they
 * name, the tokenizer: inputs of regular files (or directories among the
 * arguments), none of them the output, and no LoRA. */
static int inputs_check(int n, char *const *args, const convert_cli *c) {
  file_list l = {0};
  int rc = SP_OK;
  for (int i = 0; i < n && rc == SP_OK; i++)
    rc = rank_path_check_input("convert", args[i], RANK_PATH_FILE_OR_DIR);
  if (rc == SP_OK) files_of(n, args, &l);
  if (c->tokenizer) list_add(&l, NULL, c->tokenizer);
  rank_path_arg *in = sp_xcalloc((size_t)l.n + 1, sizeof *in);
  for (int i = 0; i < l.n && rc == SP_OK; i++) {
    const int tok = c->tokenizer && i == l.n - 1;
    in[i] = (rank_path_arg){tok ? "--tokenizer" : "convert", l.path[i]};
    rc = rank_path_check_input(in[i].flag, l.path[i], RANK_PATH_FILE);
  }
  if (rc == SP_OK && job_output_not_video("--out", c->out, "a model file (HDF5)") != SP_OK)
    rc = SP_ERR_INPUT;
  if (rc == SP_OK) rc = rank_path_check_output("--out", c->out, in, l.n);
  if (rc == SP_OK) rc = refuse_lora(&l);
  free(in);
  list_free(&l);
  return rc;
}

/* --dtype fp8, int8 or q8_0 for a checkpoint that is not a DiT. */
static int quant_refused(const char *what, kern_dtype dtype) {
  sp_log_error("--dtype %s: only a DiT has %s weights; this %s takes bf16 or fp32",
               cli_dit_dtype_word(dtype), cli_dit_dtype_word(dtype), what);
  return SP_ERR_INPUT;
}

int cmd_convert(int argc, char **argv) {
  static const cli_command cmd = {"convert", convert_table, convert_opt, usage, -1};
  convert_cli c = {.dtype = KERN_DTYPE_BF16};
  cli_result res;
  int rc = cli_command_parse(&cmd, argc, argv, NULL, &c, &res);
  if (rc != SP_OK || res.help) return rc;
  const int first = res.first_operand, n = argc - first;
  char *const *inputs = argv + first;
  const kern_dtype dtype = c.dtype;
  if (c.experts[0] || c.experts[1]) {
    if (!c.experts[0] || !c.experts[1] || n > 0 || !c.out) {
      sp_log_error("convert: %s", !c.out ? "--out is required"
                                  : n > 0 ? "--expert takes each expert's checkpoint: "
                                            "give no other input"
                                          : "a two-expert model needs both --expert "
                                            "high=PATH and --expert low=PATH");
      return SP_ERR_INPUT;
    }
    if (inputs_check(2, c.experts, &c) != SP_OK) return SP_ERR_INPUT;
    return rank_convert_experts_run(c.experts, c.out, dtype, !c.quiet);
  }
  if (!c.out || n < 1) {
    sp_log_error("convert: %s is required", !c.out ? "--out" : "an input checkpoint");
    return cli_bad_usage("convert");
  }
  if (inputs_check(n, inputs, &c) != SP_OK) return SP_ERR_INPUT;
  /* The text encoder first: its transformers keys start with encoder., as a VAE's do. */
  int is_t5 = 0, is_vae = 0;
  rc = rank_convert_is_t5(n, inputs, &is_t5);
  if (rc != SP_OK) return rc;
  const int quant = cli_dtype_quantized(dtype);
  if (is_t5 && quant) return quant_refused("text encoder", dtype);
  if (is_t5) return rank_convert_t5_run(n, inputs, c.tokenizer, c.out, dtype);
  if (c.tokenizer) {
    sp_log_error("convert: --tokenizer is for a text encoder checkpoint; this one is not");
    return SP_ERR_INPUT;
  }
  /* A Wan 2.2 VAE before a Wan 2.1 one: both have encoder.* and decoder.* keys. */
  rc = rank_convert_is_vae22(n, inputs, &is_vae);
  if (rc != SP_OK) return rc;
  if (is_vae && quant) return quant_refused("VAE", dtype);
  if (is_vae) return rank_convert_vae22_run(n, inputs, c.out, c.dtype_set ? dtype : KERN_DTYPE_F32);
  rc = rank_convert_is_vae(n, inputs, &is_vae);
  if (rc != SP_OK) return rc;
  if (is_vae && quant) return quant_refused("VAE", dtype);
  if (is_vae)
    return rank_convert_vae_run(n, inputs, c.out, c.dtype_set ? dtype : KERN_DTYPE_F32);
  return rank_convert_run(n, inputs, c.out, dtype, !c.quiet);
}
