/* staticpipe: entry point and subcommand dispatch. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "jobs.h"
#include "sp_build_info.h"
#include "stage.h"
#include "video_backend.h"
#include "log.h"

typedef struct command {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *summary;
} command;

static const command commands[] = {
    {"init", cmd_init, "write a synthetic model file (DiT presets wan2.1-*, wan2.2-*; VAE wan2.1-vae*)"},
    {"convert", cmd_convert, "import safetensors: Wan DiT (2.1, 2.2 experts), VAE, UMT5; official, diffusers, ComfyUI"},
    {"inspect", cmd_inspect, "print a model's (DiT or VAE) config, sizes and checksum"},
    {"bench", cmd_bench, "sweep run over ranks, budgets, frames and sizes; JSON, CSV, table, plot"},
    {"run", cmd_run, "sample a clip (one process, or mpirun -np N for a pipeline)"},
    {"plan", cmd_plan, "dry-run the split of a model over GPUs you may not have (no GPU, no MPI)"},
    {"encode", cmd_encode, "prompts to --cond files (UMT5-XXL, --t5); images, videos to latents (--vae)"},
    {"decode", cmd_decode, "latents to video (.mp4, .h5, PNG frames) through the Wan VAE decoder"},
    {"forward", cmd_forward, "one DiT forward on given inputs (checks a conversion)"},
    {"commcheck", cmd_commcheck, "check the transports between ranks byte by byte, with bandwidth (mpirun)"},
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: staticpipe COMMAND [options] [args]\n"
          "\n"
          "Runs the Wan 2.1 and 2.2 text-to-video DiTs as a static pipeline of MPI ranks, one per\n"
          "GPU, and turns their latents into video.\n"
          "\n"
          "commands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(f,
          "\n"
          "'staticpipe COMMAND --help' lists the options of a command.\n"
          "A model is an HDF5 file written by init or convert, or synth:PRESET[:SEED] for\n"
          "the same synthetic weights generated lazily (no file).\n"
          "exit codes: 0 success, 1 runtime failure, 2 bad usage or bad input.\n");
}

int main(int argc, char **argv) {
  /* Before anything opens a file: a closed descriptor 0 is held, so it is
   * not the model file that run --jobs - would read as jobs. */
  job_stdin_record();
  if (argc < 2) {
    usage(stderr);
    return SP_ERR_INPUT;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
      strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return SP_OK;
  }
  if (strcmp(argv[1], "--version") == 0) {
    /* What was built and what it finds: the commit, then each backend. */
    char cuda[256];
    rank_cuda_versions(cuda, sizeof cuda);
    printf("staticpipe %s (commit %s)\n", SP_VERSION, SP_BUILD_COMMIT);
    printf("cuda: %s\n", cuda);
    printf("ffmpeg: %s\n", video_ffmpeg_status());
    return SP_OK;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(argv[1], commands[i].name) == 0) return commands[i].fn(argc - 1, argv + 1);
  sp_log_error("unknown command '%s' (run 'staticpipe --help' for the list)", argv[1]);
  return SP_ERR_INPUT;
}
