/* staticpipe convert: import a Wan 2.1 T2V safetensors checkpoint. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "convert.h"
#include "log.h"
#include "path_check.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: staticpipe convert IN.safetensors [IN2 ...] -o OUT.h5 [options]\n"
          "\n"
          "Converts a Wan 2.1 T2V checkpoint into a staticpipe model file. The inputs are\n"
          "safetensors files, directories of them, or the *.safetensors.index.json that\n"
          "ships with sharded checkpoints. The key style (official Wan, diffusers, ComfyUI\n"
          "'model.diffusion_model.') is detected and the config inferred from the shapes;\n"
          "every tensor is checked and every problem reported by name. Tensors are streamed\n"
          "one at a time: memory stays near the largest tensor, not the checkpoint.\n"
          "\n"
          "  -o, --out FILE      output file (required); written to a temporary name and\n"
          "                      renamed into place, so a failure leaves nothing behind\n"
          "  -d, --dtype T       bf16 (default; rounded to nearest even) or fp32 (full\n"
          "                      precision, for the CPU reference)\n"
          "  -q, --quiet         no progress lines\n"
          "  -h, --help          this text\n"
          "\n"
          "Input dtypes F32, F16 and BF16. Exit 2 for a bad or incomplete checkpoint.\n");
}

int cmd_convert(int argc, char **argv) {
  static const struct option opts[] = {{"out", required_argument, 0, 'o'},
                                       {"dtype", required_argument, 0, 'd'},
                                       {"quiet", no_argument, 0, 'q'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *out = NULL;
  int quiet = 0;
  kern_dtype dtype = KERN_DTYPE_BF16;
  cli_getopt_reset();
  int ch;
  while ((ch = getopt_long(argc, argv, "o:d:qh", opts, NULL)) != -1) {
    switch (ch) {
    case 'o': out = optarg; break;
    case 'd':
      if (cli_parse_dtype("--dtype", optarg, &dtype)) return SP_ERR_INPUT;
      break;
    case 'q': quiet = 1; break;
    case 'h': usage(stdout); return SP_OK;
    default: return cli_bad_usage("convert");
    }
  }
  if (!out || optind >= argc) {
    sp_log_error("convert: %s is required", !out ? "--out" : "an input checkpoint");
    return cli_bad_usage("convert");
  }
  if (rank_path_check_io("convert", argv + optind, argc - optind, RANK_PATH_FILE_OR_DIR, "--out",
                         out) != SP_OK)
    return SP_ERR_INPUT;
  return rank_convert_run(argc - optind, argv + optind, out, dtype, !quiet);
}
