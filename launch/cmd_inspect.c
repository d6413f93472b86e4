/* staticpipe inspect: a model's arch, config, sizes and checksum. */
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "job_params.h"
#include "log.h"
#include "model_file.h"
#include "t5_file.h"
#include "umt5_encode.h"
#include "vae_file.h"
#include "wan_vae22_file.h"

enum { OPT_VERIFY = JOB_OPT_COUNT, OPT_JSON, OPT_HELP };

static void inspect_table(cli_opts *t) {
  static const job_option own[] = {
      {OPT_VERIFY, "verify", 'v', NULL, NULL, 0,
       "also read every dataset and check its checksum (a file\n"
       "model; for a VAE file also the root checksum over the\n"
       "datasets')"},
      {OPT_JSON, "json", 'j', NULL, NULL, 0,
       "JSON on stdout (keys arch, preset, dtype, config,\n"
       "num_blocks, block_bytes, embed_bytes, head_bytes (per\n"
       "expert), total_bytes, formats (per stored format:\n"
       "tensors, bytes), experts, defaults (two experts:\n"
       "boundary, cfg, shift, steps), checksum; for a VAE: arch,\n"
       "preset, dtype, config, mid_dim, level_dims, tensors,\n"
       "params, file_bytes, checksum; for a text encoder: arch,\n"
       "preset, dtype, config, tensors, params, file_bytes,\n"
       "layer_bytes, tokenizer_pieces, encode_host_bytes (512\n"
       "tokens), checksum)"},
      {OPT_HELP, "help", 'h', NULL, NULL, 0, "this text"},
  };
  cli_opts_build(t, NULL, 0, own, (int)(sizeof own / sizeof own[0]));
}

static void usage(const cli_opts *t, FILE *f) {
  fprintf(f,
          "usage: staticpipe inspect MODEL [options]\n"
          "\n"
          "Prints a model's arch, config, blocks, bytes per block, embeddings, head, total,\n"
          "dtype and checksum. Reads metadata only: no weights are read or generated.\n"
          "A DiT's dtype is bf16, fp32, fp8 or int8 (the blocks' linear weights e4m3 or\n"
          "int8 with a scale per output channel, the rest bf16; its block bytes count the\n"
          "scales; --verify also checks every scale is finite and positive), or quant /\n"
          "quant-fp32 (a GGUF checkpoint's: the blocks' linear weights in GGUF's formats,\n"
          "q8_0 ... q2_k, fp16, bf16, fp32, as it held them; the rest bf16 or fp32). The\n"
          "formats line counts the tensors and bytes stored in each format.\n"
          "MODEL is a model file or synth:PRESET[:SEED]; a VAE decoder (a file made by\n"
          "convert or init, or synth:wan2.1-vae, synth:wan2.1-vae-tiny) is shown with its\n"
          "config, widths per level, tensors, parameters, bytes, dtype and checksum; a\n"
          "Wan 2.2 VAE (arch wan2.2-vae, synth:wan2.2-vae, synth:wan2.2-vae-tiny) the\n"
          "same for its encoder and decoder; a\n"
          "text encoder (a file from convert or init, or synth:umt5-xxl, synth:umt5-tiny)\n"
          "with its config, tensors, parameters, bytes, tokenizer pieces and checksum.\n"
          "\n");
  cli_opts_usage(t, f);
}

typedef struct inspect_cli {
  int json, verify;
} inspect_cli;

static int inspect_opt(void *ctx, int id, const char *value) {
  inspect_cli *c = ctx;
  (void)value;
  if (id == OPT_HELP) return CLI_HELP;
  if (id == OPT_JSON) c->json = 1;
  if (id == OPT_VERIFY) c->verify = 1;
  return SP_OK;
}

/* The tensors and bytes stored in each format: {"bf16": {"tensors", "bytes"}, ...}. */
static json_object *formats_json(const rank_model *m) {
  rank_model_format_count fc[KERN_DTYPE_COUNT];
  const int nf = rank_model_format_counts(m, fc);
  json_object *fo = json_object_new_object();
  for (int k = 0; k < nf; k++) {
    json_object *e = json_object_new_object();
    json_object_object_add(e, "tensors", json_object_new_int(fc[k].tensors));
    json_object_object_add(e, "bytes", json_object_new_int64((int64_t)fc[k].bytes));
    json_object_object_add(fo, kern_dtype_name(fc[k].dtype), e);
  }
  return fo;
}

/* "formats    bf16 N tensors X MB, q4_k ...": the same as one line. */
static void formats_print(const rank_model *m) {
  rank_model_format_count fc[KERN_DTYPE_COUNT];
  const int nf = rank_model_format_counts(m, fc);
  printf("formats   ");
  for (int k = 0; k < nf; k++)
    printf(" %s %d tensor%s %.2f MB%s", kern_dtype_name(fc[k].dtype), fc[k].tensors,
           fc[k].tensors == 1 ? "" : "s", (double)fc[k].bytes / 1e6, k + 1 < nf ? "," : "\n");
}

static json_object *config_json(const wan_config *c) {
  json_object *o = json_object_new_object();
  json_object_object_add(o, "dim", json_object_new_int64(c->dim));
  json_object_object_add(o, "ffn_dim", json_object_new_int64(c->ffn_dim));
  json_object_object_add(o, "heads", json_object_new_int64(c->heads));
  json_object_object_add(o, "head_dim", json_object_new_int64(wan_head_dim(c)));
  json_object_object_add(o, "layers", json_object_new_int64(c->layers));
  json_object_object_add(o, "in_dim", json_object_new_int64(c->in_dim));
  json_object_object_add(o, "out_dim", json_object_new_int64(c->out_dim));
  json_object *p = json_object_new_array();
  for (int i = 0; i < 3; i++) json_object_array_add(p, json_object_new_int64(c->patch[i]));
  json_object_object_add(o, "patch", p);
  json_object_object_add(o, "text_len", json_object_new_int64(c->text_len));
  json_object_object_add(o, "text_dim", json_object_new_int64(c->text_dim));
  json_object_object_add(o, "freq_dim", json_object_new_int64(c->freq_dim));
  json_object_object_add(o, "eps", json_object_new_double(c->eps));
  return o;
}

/* The keys every model's JSON starts with: source, arch, preset, synthetic
 * and dtype (its name as the model shows it). */
static json_object *id_json(const model_file_id *id, const char *dtype) {
  json_object *o = json_object_new_object();
  json_object_object_add(o, "source", json_object_new_string(id->source));
  json_object_object_add(o, "arch", json_object_new_string(id->arch));
  json_object_object_add(o, "preset", json_object_new_string(id->preset));
  json_object_object_add(o, "synthetic", json_object_new_boolean(id->synthetic));
  json_object_object_add(o, "dtype", json_object_new_string(dtype));
  return o;
}

/* The keys of a table model's size: tensors, params, file_bytes. */
static void size_json(json_object *o, const model_file_size *s) {
  json_object_object_add(o, "tensors", json_object_new_int(s->tensors));
  json_object_object_add(o, "params", json_object_new_int64(s->params));
  json_object_object_add(o, "file_bytes", json_object_new_int64(s->file_bytes));
}

/* The lines every model's text starts with: model, arch (what the network
 * is, " (VAE decoder)" or "", and the preset) and dtype (then note). */
static void id_print(const model_file_id *id, const char *what, const char *dtype,
                     const char *note) {
  printf("model      %s\n", id->source);
  printf("arch       %s%s%s%s\n", id->arch, what, id->preset[0] ? ", preset " : "", id->preset);
  printf("dtype      %s%s\n", dtype, note);
}

/* --verify: every dataset read and checked (the model-file layer's
 * mfile_verify, one rule for every network); the line that says so. */
static int verified(int rc, uint64_t bytes, int synthetic) {
  if (rc == SP_OK && !synthetic)
    sp_log_info("verify: %llu bytes read, every checksum matches, every weight is finite",
                (unsigned long long)bytes);
  return rc;
}

/* ---- a VAE decoder ---- */

/* Whether spec names a VAE: synth: with a VAE preset, or a file whose arch
 * says so. Anything else goes to the DiT's reader, which reports. */
static int is_vae(const char *spec) {
  if (rank_model_spec_is_synth(spec)) {
    char preset[64];
    snprintf(preset, sizeof preset, "%s", spec + 6);
    char *colon = strchr(preset, ':');
    if (colon) *colon = 0;
    wan_vae_config c;
    return vae_preset(preset, &c) == 0;
  }
  char arch[64];
  return model_file_arch(spec, arch, sizeof arch) == 0 && strcmp(arch, VAE_MODEL_ARCH) == 0;
}

static void int_list(const int64_t *v, int n, char *buf, size_t len) {
  buf[0] = 0;
  for (int i = 0; i < n; i++)
    snprintf(buf + strlen(buf), len - strlen(buf), "%s%lld", i ? ", " : "", (long long)v[i]);
}

static int inspect_vae(const char *spec, int json, int verify) {
  vae_model *m = NULL;
  int rc = vae_model_open(spec, verify, &m);
  if (rc != SP_OK) return rc;
  const vae_model_info *in = vae_model_get_info(m);
  const wan_vae_config *c = &in->config;
  uint64_t bytes = 0;
  if (verify && (rc = verified(vae_model_verify(m, &bytes), bytes, in->id.synthetic)) != SP_OK) {
    vae_model_close(m);
    return rc;
  }
  int64_t levels[WAN_VAE_MAX_LEVELS], temporal[WAN_VAE_MAX_LEVELS];
  for (int i = 0; i < c->n_mult; i++) levels[i] = wan_vae_level_dim(c, i);
  for (int i = 0; i + 1 < c->n_mult; i++) temporal[i] = c->temporal_up[i];
  int64_t read_bytes = in->size.params * (int64_t)sizeof(float);
  if (json) {
    json_object *o = id_json(&in->id, kern_dtype_name(in->id.dtype));
    json_object *cfg = json_object_new_object();
    json_object *dm = json_object_new_array(), *tu = json_object_new_array(),
                *ld = json_object_new_array();
    for (int i = 0; i < c->n_mult; i++) {
      json_object_array_add(dm, json_object_new_int64(c->dim_mult[i]));
      json_object_array_add(ld, json_object_new_int64(levels[i]));
    }
    for (int i = 0; i + 1 < c->n_mult; i++)
      json_object_array_add(tu, json_object_new_int64(temporal[i]));
    json_object_object_add(cfg, "dim", json_object_new_int64(c->dim));
    json_object_object_add(cfg, "z_dim", json_object_new_int64(c->z_dim));
    json_object_object_add(cfg, "dim_mult", dm);
    json_object_object_add(cfg, "num_res_blocks", json_object_new_int64(c->num_res_blocks));
    json_object_object_add(cfg, "temporal_up", tu);
    json_object_object_add(o, "config", cfg);
    json_object_object_add(o, "mid_dim", json_object_new_int64(wan_vae_level_dim(c, -1)));
    json_object_object_add(o, "level_dims", ld);
    json_object_object_add(o, "out_scale", json_object_new_int64(wan_vae_out_scale(c)));
    if (c->encoder) { /* absent: the file decodes only (its output as before the encoder) */
      json_object *enc = json_object_new_object();
      json_object_object_add(enc, "tensors", json_object_new_int(in->enc_tensors));
      json_object_object_add(enc, "params", json_object_new_int64(in->enc_params));
      json_object_object_add(o, "encoder", enc);
    }
    size_json(o, &in->size);
    json_object_object_add(o, "fp32_bytes", json_object_new_int64(read_bytes));
    json_object_object_add(o, "checksum", json_object_new_string(in->id.checksum));
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
    json_object_put(o);
  } else {
    char dm[96], ld[96], tu[96];
    int_list(c->dim_mult, c->n_mult, dm, sizeof dm);
    int_list(levels, c->n_mult, ld, sizeof ld);
    int_list(temporal, c->n_mult - 1, tu, sizeof tu);
    id_print(&in->id, c->encoder ? " (VAE decoder and encoder)" : " (VAE decoder)",
             kern_dtype_name(in->id.dtype), "");
    printf("config     dim %lld, z_dim %lld, dim_mult (%s), num_res_blocks %lld, "
           "temporal_up (%s)\n",
           (long long)c->dim, (long long)c->z_dim, dm, (long long)c->num_res_blocks, tu);
    printf("widths     middle %lld; levels %s\n", (long long)wan_vae_level_dim(c, -1), ld);
    printf("video      1 + %lld (F - 1) frames from F latent frames, %lldx height and width\n",
           (long long)(wan_vae_out_frames(c, 2) - 1), (long long)wan_vae_out_scale(c));
    if (c->encoder)
      printf("encoder    yes: %d tensors, %lld parameters (encode --vae takes this file)\n",
             in->enc_tensors, (long long)in->enc_params);
    else
      printf("encoder    none: this file decodes only\n");
    printf("tensors    %d, %lld parameters\n", in->size.tensors, (long long)in->size.params);
    if (in->id.synthetic)
      printf("bytes      none stored (synthetic); %lld as fp32 when read\n", (long long)read_bytes);
    else
      printf("bytes      %lld stored (%.1f MB); %lld as fp32 when read\n",
             (long long)in->size.file_bytes, (double)in->size.file_bytes / 1e6,
             (long long)read_bytes);
    printf("checksum   %s\n", in->id.checksum);
  }
  vae_model_close(m);
  return SP_OK;
}

/* ---- a Wan 2.2 VAE ---- */

/* The encoder's or decoder's widths dims[0..n_mult]. */
static void vae22_widths(const wan_vae22_config *c, int enc, int64_t *out) {
  for (int i = 0; i <= c->n_mult; i++)
    out[i] = enc ? wan_vae22_enc_dim(c, i) : wan_vae22_dec_dim(c, i);
}

static json_object *vae22_json(const wan_vae22_info *in) {
  const wan_vae22_config *c = &in->config;
  json_object *o = id_json(&in->id, kern_dtype_name(in->id.dtype));
  json_object *cfg = json_object_new_object();
  json_object *dm = json_object_new_array(), *td = json_object_new_array();
  for (int i = 0; i < c->n_mult; i++)
    json_object_array_add(dm, json_object_new_int64(c->dim_mult[i]));
  for (int i = 0; i + 1 < c->n_mult; i++)
    json_object_array_add(td, json_object_new_int64(c->temporal_down[i]));
  json_object_object_add(cfg, "dim", json_object_new_int64(c->dim));
  json_object_object_add(cfg, "dec_dim", json_object_new_int64(c->dec_dim));
  json_object_object_add(cfg, "z_dim", json_object_new_int64(c->z_dim));
  json_object_object_add(cfg, "dim_mult", dm);
  json_object_object_add(cfg, "num_res_blocks", json_object_new_int64(c->num_res_blocks));
  json_object_object_add(cfg, "temporal_down", td);
  json_object_object_add(o, "config", cfg);
  for (int p = 0; p < WAN_VAE22_PARTS; p++) {
    int64_t w[WAN_VAE22_MAX_LEVELS + 1];
    vae22_widths(c, p == WAN_VAE22_ENCODER, w);
    json_object *part = json_object_new_object(), *wj = json_object_new_array();
    for (int i = 0; i <= c->n_mult; i++) json_object_array_add(wj, json_object_new_int64(w[i]));
    json_object_object_add(part, "widths", wj);
    size_json(part, &in->part[p]);
    json_object_object_add(o, wan_vae22_part_name((wan_vae22_part)p), part);
  }
  json_object_object_add(o, "time_factor", json_object_new_int64(wan_vae22_time_factor(c)));
  json_object_object_add(o, "space_factor", json_object_new_int64(wan_vae22_space_factor(c)));
  size_json(o, &in->size);
  json_object_object_add(o, "checksum", json_object_new_string(in->id.checksum));
  return o;
}

static void vae22_print(const wan_vae22_info *in) {
  const wan_vae22_config *c = &in->config;
  char dm[96], td[96];
  int64_t t[WAN_VAE22_MAX_LEVELS];
  for (int i = 0; i + 1 < c->n_mult; i++) t[i] = c->temporal_down[i];
  int_list(c->dim_mult, c->n_mult, dm, sizeof dm);
  int_list(t, c->n_mult - 1, td, sizeof td);
  id_print(&in->id, " (Wan 2.2 VAE: encoder and decoder)", kern_dtype_name(in->id.dtype), "");
  printf("config     dim %lld, dec_dim %lld, z_dim %lld, dim_mult (%s), num_res_blocks %lld, "
         "temporal_down (%s)\n", (long long)c->dim, (long long)c->dec_dim, (long long)c->z_dim,
         dm, (long long)c->num_res_blocks, td);
  for (int p = WAN_VAE22_PARTS - 1; p >= 0; p--) {
    int64_t w[WAN_VAE22_MAX_LEVELS + 1];
    char wl[128];
    vae22_widths(c, p == WAN_VAE22_ENCODER, w);
    int_list(w, c->n_mult + 1, wl, sizeof wl);
    printf("%-10s widths %s; %d tensors, %lld parameters\n",
           wan_vae22_part_name((wan_vae22_part)p), wl, in->part[p].tensors,
           (long long)in->part[p].params);
  }
  printf("video      (3, 1 + %lld k, %lld h, %lld w) <-> latents (%lld, 1 + k, h, w)\n",
         (long long)wan_vae22_time_factor(c), (long long)wan_vae22_space_factor(c),
         (long long)wan_vae22_space_factor(c), (long long)c->z_dim);
  printf("tensors    %d, %lld parameters\n", in->size.tensors, (long long)in->size.params);
  if (in->id.synthetic)
    printf("bytes      none stored (synthetic); %lld as fp32 when read\n",
           (long long)(in->size.params * 4));
  else
    printf("bytes      %lld stored (%.1f MB)\n", (long long)in->size.file_bytes,
           (double)in->size.file_bytes / 1e6);
  printf("checksum   %s\n", in->id.checksum);
}

static int inspect_vae22(const char *spec, int json, int verify) {
  wan_vae22_model *m = NULL;
  int rc = wan_vae22_open(spec, verify, &m);
  if (rc != SP_OK) return rc;
  const wan_vae22_info *in = wan_vae22_get_info(m);
  uint64_t bytes = 0;
  if (verify) rc = verified(wan_vae22_verify(m, &bytes), bytes, in->id.synthetic);
  if (rc == SP_OK && json) {
    json_object *o = vae22_json(in);
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
    json_object_put(o);
  } else if (rc == SP_OK) {
    vae22_print(in);
  }
  wan_vae22_close(m);
  return rc;
}

/* ---- a text encoder ---- */

/* The preset of a synth: spec ("synth:umt5-tiny:3" -> "umt5-tiny"). */
static void synth_preset(const char *spec, char *preset, size_t n) {
  snprintf(preset, n, "%s", spec + 6);
  char *colon = strchr(preset, ':');
  if (colon) *colon = 0;
}

/* Whether spec names a text encoder: synth: with a T5 preset, or a file
 * whose arch says so. */
static int is_t5(const char *spec) {
  char arch[64];
  umt5_config c;
  if (!rank_model_spec_is_synth(spec))
    return model_file_arch(spec, arch, sizeof arch) == 0 && strcmp(arch, T5_MODEL_ARCH) == 0;
  synth_preset(spec, arch, sizeof arch);
  return t5_preset(arch, &c) == 0;
}

static int inspect_t5(const char *spec, int json, int verify) {
  t5_model *m = NULL;
  int rc = t5_model_open(spec, verify, &m);
  uint64_t bytes = 0;
  if (rc == SP_OK && verify)
    rc = verified(t5_model_verify(m, &bytes), bytes, rank_model_spec_is_synth(spec));
  if (rc != SP_OK) {
    t5_model_close(m);
    return rc;
  }
  const t5_model_info *in = t5_model_get_info(m);
  const umt5_config *c = &in->config;
  const int64_t layer_bytes = umt5_layer_floats(c) * 4;
  const uint64_t host = umt5_encode_host_bytes(in, TOK_CONTEXT, TOK_CONTEXT);
  const int64_t cfg[8] = {c->vocab, c->dim, c->dim_attn, c->ffn,
                          c->heads, c->layers, c->buckets, c->max_dist};
  static const char *const keys[8] = {"vocab", "dim",    "dim_attn", "ffn",
                                      "heads", "layers", "buckets",  "max_dist"};
  if (json) {
    json_object *o = id_json(&in->id, kern_dtype_name(in->id.dtype));
    json_object *co = json_object_new_object();
    for (int i = 0; i < 8; i++) json_object_object_add(co, keys[i], json_object_new_int64(cfg[i]));
    json_object_object_add(o, "config", co);
    size_json(o, &in->size);
    json_object_object_add(o, "layer_bytes", json_object_new_int64(layer_bytes));
    json_object_object_add(o, "tokenizer_pieces", json_object_new_int(in->tok_pieces));
    json_object_object_add(o, "encode_host_bytes", json_object_new_int64((int64_t)host));
    json_object_object_add(o, "checksum", json_object_new_string(in->id.checksum));
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
    json_object_put(o);
  } else {
    id_print(&in->id, " (text encoder)", kern_dtype_name(in->id.dtype), "");
    printf("config     vocab %lld, dim %lld, dim_attn %lld, ffn %lld, heads %lld, layers %lld,\n"
           "           buckets %lld, max_dist %lld\n",
           (long long)cfg[0], (long long)cfg[1], (long long)cfg[2], (long long)cfg[3],
           (long long)cfg[4], (long long)cfg[5], (long long)cfg[6], (long long)cfg[7]);
    printf("tensors    %d, %lld parameters\n", in->size.tensors, (long long)in->size.params);
    if (in->id.synthetic)
      printf("bytes      none stored (synthetic)\n");
    else
      printf("bytes      %lld stored (%.2f GB)\n", (long long)in->size.file_bytes,
             (double)in->size.file_bytes / 1e9);
    printf("encode     CPU, fp32, one layer at a time: %lld bytes per layer, peak %.2f GiB of "
           "host memory for %d tokens\n",
           (long long)layer_bytes, (double)host / (1 << 30), TOK_CONTEXT);
    if (in->tok_pieces)
      printf("tokenizer  %d pieces (%s)\n", in->tok_pieces,
             in->id.synthetic ? "built in" : "stored");
    else
      printf("tokenizer  none (synthetic: encode --tokenizer PATH)\n");
    printf("checksum   %s\n", in->id.checksum);
  }
  t5_model_close(m);
  return SP_OK;
}

int cmd_inspect(int argc, char **argv) {
  static const cli_command cmd = {"inspect", inspect_table, inspect_opt, usage, 1};
  inspect_cli cl = {0};
  cli_result res;
  int rc0 = cli_command_parse(&cmd, argc, argv, NULL, &cl, &res);
  if (rc0 != SP_OK || res.help) return rc0;
  const int json = cl.json, verify = cl.verify, at = res.first_operand;
  if (at != argc - 1) {
    sp_log_error("inspect: expected exactly one MODEL argument");
    return cli_bad_usage("inspect");
  }
  if (job_model_path_check("inspect", argv[at]) != SP_OK) return SP_ERR_INPUT;
  if (is_vae(argv[at])) return inspect_vae(argv[at], json, verify);
  if (wan_vae22_spec_is(argv[at])) return inspect_vae22(argv[at], json, verify);
  if (is_t5(argv[at])) return inspect_t5(argv[at], json, verify);
  rank_model *m = NULL;
  int rc = rank_model_open(argv[at], verify, &m);
  if (rc != SP_OK) return rc;
  uint64_t bytes = 0;
  if (verify && (rc = verified(rank_model_verify(m, &bytes), bytes,
                               rank_model_get_info(m)->id.synthetic)) != SP_OK) {
    rank_model_close(m);
    return rc;
  }
  const rank_model_info *in = rank_model_get_info(m);
  const wan_config *c = &in->config;
  size_t block = (size_t)rank_model_block_file_bytes(m);
  size_t embed = rank_model_layout(m, WAN_GROUP_EMBED)->data_bytes;
  size_t head = rank_model_layout(m, WAN_GROUP_HEAD)->data_bytes;
  const rank_model_experts *x = &in->experts;
  unsigned long long total = rank_model_total_bytes(m);
  if (json) {
    json_object *o = id_json(&in->id, rank_model_dtype_name(in));
    json_object_object_add(o, "config", config_json(c));
    json_object_object_add(o, "num_blocks", json_object_new_int64(c->layers));
    json_object_object_add(o, "block_params", json_object_new_int64(wan_block_params(c)));
    json_object *arr = json_object_new_array();
    for (int64_t b = 0; b < c->layers; b++)
      json_object_array_add(arr,
                            json_object_new_int64((int64_t)rank_model_block_bytes(m, 0, (int)b)));
    json_object_object_add(o, "block_bytes", arr);
    json_object_object_add(o, "formats", formats_json(m));
    json_object_object_add(o, "embed_bytes", json_object_new_int64((int64_t)embed));
    json_object_object_add(o, "head_bytes", json_object_new_int64((int64_t)head));
    json_object_object_add(o, "total_bytes", json_object_new_int64((int64_t)total));
    json_object_object_add(o, "experts", json_object_new_int(x->count));
    if (x->count > 1) {
      json_object *d = json_object_new_object(), *cfg = json_object_new_array();
      json_object_object_add(d, "boundary", json_object_new_double(x->boundary));
      json_object_array_add(cfg, json_object_new_double(x->cfg[0]));
      json_object_array_add(cfg, json_object_new_double(x->cfg[1]));
      json_object_object_add(d, "cfg", cfg);
      json_object_object_add(d, "shift", json_object_new_double(x->shift));
      json_object_object_add(d, "steps", json_object_new_int(x->steps));
      json_object_object_add(o, "defaults", d);
    }
    json_object_object_add(o, "checksum", json_object_new_string(in->id.checksum));
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
    json_object_put(o);
  } else {
    id_print(&in->id, "", rank_model_dtype_name(in),
             in->fp8    ? " (the blocks' linear weights e4m3 with a float32 scale per output "
                          "channel, every other tensor bf16)"
             : in->precision == WAN_PRECISION_INT8
                 ? " (the blocks' linear weights int8 with a float32 scale per output "
                   "channel, every other tensor bf16)"
             : in->quant ? " (the blocks' linear weights in GGUF's formats, as stored)"
                         : "");
    printf("config     dim %lld, ffn_dim %lld, heads %lld x %lld, layers %lld, in/out %lld/%lld,\n"
           "           patch (%lld,%lld,%lld), text_len %lld, text_dim %lld, freq_dim %lld, eps %g\n",
           (long long)c->dim, (long long)c->ffn_dim, (long long)c->heads,
           (long long)wan_head_dim(c), (long long)c->layers, (long long)c->in_dim,
           (long long)c->out_dim, (long long)c->patch[0], (long long)c->patch[1],
           (long long)c->patch[2], (long long)c->text_len, (long long)c->text_dim,
           (long long)c->freq_dim, c->eps);
    if (x->count > 1) {
      printf("experts    2: high noise (t >= %g x 1000), then low noise; every size below is "
             "per expert but total\n", x->boundary);
      printf("defaults   cfg %g,%g (high,low), shift %g, %d steps\n", x->cfg[0], x->cfg[1],
             x->shift, x->steps);
    }
    if (block == rank_model_block_bytes(m, 0, 0))
      printf("blocks     %lld x %zu bytes (%lld parameters each, %.1f MB)\n",
             (long long)c->layers, block, (long long)wan_block_params(c), (double)block / 1e6);
    else
      printf("blocks     %lld of up to %zu bytes (%lld parameters each, %.1f MB)\n",
             (long long)c->layers, block, (long long)wan_block_params(c), (double)block / 1e6);
    printf("embed      %zu bytes\n", embed);
    printf("head       %zu bytes\n", head);
    printf("total      %llu bytes (%.2f GB)\n", total, (double)total / 1e9);
    formats_print(m);
    printf("checksum   %s\n", in->id.checksum);
  }
  rank_model_close(m);
  return SP_OK;
}
