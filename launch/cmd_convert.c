/* staticpipe convert: import a Wan 2.1 T2V or Wan 2.1 VAE safetensors checkpoint. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "convert.h"
#include "convert_t5.h"
#include "convert_vae.h"
#include "log.h"
#include "model_file.h"
#include "path_check.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: staticpipe convert IN.safetensors [IN2 ...] -o OUT.h5 [options]\n"
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
          "NaN or infinite weight is refused.\n"
          "\n"
          "A checkpoint of the UMT5-XXL text encoder (transformers' UMT5EncoderModel keys\n"
          "as in diffusers' text_encoder/ and ComfyUI's umt5_xxl_fp16.safetensors, its\n"
          "scaled fp8 form (dequantised), or Wan's own keys) is written as a text encoder\n"
          "file with its tokenizer, for encode.\n"
          "\n"
          "  -e, --expert E=PATH the checkpoint (a file, a directory or an index) of one\n"
          "                      expert of Wan 2.2 A14B, E high or low; given twice (high\n"
          "                      and low, of one config), instead of IN: one model file\n"
          "                      with both experts and the published defaults (boundary\n"
          "                      0.875, cfg 4,3, shift 12, 40 steps)\n"
          "  -o, --out FILE      output file (required); written to a temporary name and\n"
          "                      renamed into place, so a failure leaves nothing behind\n"
          "      --dtype T       bf16 (rounded to nearest even) or fp32 (full precision,\n"
          "                      for the CPU reference); default bf16 for a DiT, fp32 for\n"
          "                      a VAE (73M parameters: 293 MB); a DiT also fp8: the\n"
          "                      blocks' linear weights (self/cross attention q, k, v, o\n"
          "                      and the FFN's two) in e4m3 with a float32 scale per output\n"
          "                      channel (amax / 448, round to nearest even, saturating),\n"
          "                      the rest bf16 (MODEL.md \"fp8 weights\"); or int8: the\n"
          "                      same with int8 codes (amax / 127, round to nearest\n"
          "                      even, MODEL.md \"int8 weights\"); or q8_0: GGUF's Q8_0\n"
          "                      (ggml's quantiser; the rest bf16)\n"
          "      --tokenizer PATH the text encoder's spiece.model or tokenizer.json (needed\n"
          "                      unless the checkpoint holds a spiece_model tensor)\n"
          "  -q, --quiet         no progress lines\n"
          "  -h, --help          this text\n"
          "\n"
          "Input dtypes F32, F16, BF16 and, for ComfyUI's fp8 checkpoints, F8_E4M3 (with\n"
          "KEY.scale_weight when scaled; F8_E5M2 too for the text encoder): dequantised\n"
          "to --dtype; with --dtype fp8 the blocks' F8_E4M3 linear weights keep their\n"
          "bytes and their scale_weight (or 1) becomes every output channel's scale.\n"
          "Exit 2 for a bad or incomplete checkpoint.\n");
}

/* --dtype fp8 or int8 for a checkpoint that is not a DiT. */
static int fp8_refused(const char *what, kern_dtype dtype) {
  sp_log_error("--dtype %s: only a DiT has quantized weights; this %s takes bf16 or fp32",
               kern_dtype_name(dtype), what);
  return SP_ERR_INPUT;
}

int cmd_convert(int argc, char **argv) {
  static const struct option opts[] = {{"out", required_argument, 0, 'o'},
                                       {"expert", required_argument, 0, 'e'},
                                       {"dtype", required_argument, 0, 256}, /* -d: --device */
                                       {"quiet", no_argument, 0, 'q'},
                                       {"tokenizer", required_argument, 0, 257}, /* -t: --timestep */
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *out = NULL, *tokenizer = NULL;
  char *experts[2] = {NULL, NULL}; /* high, low */
  int quiet = 0;
  kern_dtype dtype = KERN_DTYPE_BF16;
  int dtype_set = 0;
  cli_getopt_reset();
  int ch;
  while ((ch = getopt_long(argc, argv, "o:e:qh", opts, NULL)) != -1) {
    switch (ch) {
    case 'o': out = optarg; break;
    case 'e': {
      const int e = strncmp(optarg, "high=", 5) == 0 ? 0 : strncmp(optarg, "low=", 4) == 0 ? 1 : -1;
      if (e < 0 || !optarg[e == 0 ? 5 : 4]) {
        sp_log_error("--expert: '%s' is not high=PATH or low=PATH", optarg);
        return SP_ERR_INPUT;
      }
      if (experts[e]) {
        sp_log_error("--expert: %s given twice", e == 0 ? "high" : "low");
        return SP_ERR_INPUT;
      }
      experts[e] = optarg + (e == 0 ? 5 : 4);
      break;
    }
    case 256:
      if (cli_parse_dit_dtype("--dtype", optarg, &dtype)) return SP_ERR_INPUT;
      dtype_set = 1;
      break;
    case 'q': quiet = 1; break;
    case 257: tokenizer = optarg; break;
    case 'h': usage(stdout); return SP_OK;
    default: return cli_bad_usage("convert");
    }
  }
  if (experts[0] || experts[1]) {
    if (!experts[0] || !experts[1] || optind < argc || !out) {
      sp_log_error("convert: %s", !out ? "--out is required"
                                  : optind < argc ? "--expert takes each expert's checkpoint: "
                                                    "give no other input"
                                                  : "a two-expert model needs both --expert "
                                                    "high=PATH and --expert low=PATH");
      return SP_ERR_INPUT;
    }
    if (rank_path_check_io("convert", experts, 2, RANK_PATH_FILE_OR_DIR, "--out", out) != SP_OK)
      return SP_ERR_INPUT;
    return rank_convert_experts_run(experts, out, dtype, !quiet);
  }
  if (!out || optind >= argc) {
    sp_log_error("convert: %s is required", !out ? "--out" : "an input checkpoint");
    return cli_bad_usage("convert");
  }
  if (rank_path_check_io("convert", argv + optind, argc - optind, RANK_PATH_FILE_OR_DIR, "--out",
                         out) != SP_OK)
    return SP_ERR_INPUT;
  if (tokenizer) {
    rank_path_arg tok = {"--tokenizer", tokenizer};
    if (rank_path_check_input("--tokenizer", tokenizer, RANK_PATH_FILE) != SP_OK ||
        rank_path_check_output("--out", out, &tok, 1) != SP_OK)
      return SP_ERR_INPUT;
  }
  /* The text encoder first: its transformers keys start with encoder., as a VAE's do. */
  int is_t5 = 0, is_vae = 0;
  int rc = rank_convert_is_t5(argc - optind, argv + optind, &is_t5);
  if (rc != SP_OK) return rc;
  const int quant = dtype != KERN_DTYPE_BF16 && dtype != KERN_DTYPE_F32;
  if (is_t5 && quant) return fp8_refused("text encoder", dtype);
  if (is_t5)
    return rank_convert_t5_run(argc - optind, argv + optind, tokenizer, out, dtype);
  if (tokenizer) {
    sp_log_error("convert: --tokenizer is for a text encoder checkpoint; this one is not");
    return SP_ERR_INPUT;
  }
  rc = rank_convert_is_vae(argc - optind, argv + optind, &is_vae);
  if (rc != SP_OK) return rc;
  if (is_vae && quant) return fp8_refused("VAE", dtype);
  if (is_vae)
    return rank_convert_vae_run(argc - optind, argv + optind, out,
                                dtype_set ? dtype : KERN_DTYPE_F32);
  return rank_convert_run(argc - optind, argv + optind, out, dtype, !quiet);
}
