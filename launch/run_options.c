/* staticpipe run: its flags and --help. */
#include <getopt.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "inputs.h"
#include "log.h"
#include "model_plan.h"
#include "noise.h"
#include "pipeline.h"
#include "preview.h"
#include "run.h"
#include "sampler.h"

void run_usage(FILE *f) {
  fprintf(f,
          "usage: staticpipe run --model MODEL --cond FILE [options] -o FILE\n"
          "       staticpipe run --model MODEL --jobs FILE [options]\n"
          "       mpirun -np N staticpipe run ...     (a pipeline of N ranks; srun works too)\n"
          "\n"
          "Samples a clip: the flow-matching loop of Wan 2.1 with classifier-free guidance.\n"
          "Under mpirun the blocks are split over the ranks by the planner; the latents are\n"
          "bit-identical for any number of ranks.\n"
          "\n"
          "  -m, --model MODEL     model file or synth:PRESET[:SEED] (required)\n"
          "  -c, --cond FILE       HDF5 with 'context' float32 [L, 4096], L <= 512, and, when\n"
          "                        --cfg is not 1, 'context_null' (the encoded negative\n"
          "                        prompt); see launch/encode_prompt.py (required without\n"
          "                        --jobs)\n"
          "  -f, --frames N        frames, 4k+1 (default 81)\n"
          "  -s, --size HxW        height x width in pixels, multiples of 16 (default 480x832)\n"
          "  -n, --steps N         sampling steps (default 50)\n"
          "  -g, --cfg G           guidance scale; 1 runs the conditional branch only\n"
          "                        (default 5)\n"
          "      --shift S         schedule shift (default 5)\n"
          "      --sampler NAME    unipc (default; the published UniPC, order 2, bh2) or euler\n"
          "      --seed K          noise seed (default 0): Philox keyed by element index,\n"
          "                        identical on every machine and rank count\n"
          "      --noise FILE      initial noise: dataset 'noise' float32 [16, F, H/8, W/8];\n"
          "                        overrides --seed\n"
          "      --save-noise FILE write the initial noise (dataset 'noise') to FILE, to start\n"
          "                        another run or another implementation from the same noise\n"
          "  -o, --out FILE        output: dataset 'latents' float32 [16, F, H/8, W/8] with the\n"
          "                        settings as attributes, and a preview FILE.png; both written\n"
          "                        atomically by the last rank (required without --jobs)\n"
          "      --jobs FILE       many jobs, one model load: one job per line of key=value\n"
          "                        fields, '#' starts a comment:\n"
          "                          cond=FILE out=FILE [seed=K | noise=FILE] [frames=N]\n"
          "                          [size=HxW] [steps=N] [cfg=G] [shift=S] [sampler=NAME]\n"
          "                        keys left out take the values of the flags above; jobs run\n"
          "                        in order, up to one per rank in flight together when they\n"
          "                        share latent shape and steps (their micro-batches fill the\n"
          "                        pipeline; each result equals a separate run); a bad line or\n"
          "                        a failed job is reported and the rest go on; a summary at\n"
          "                        the end; exit status non-zero when any job failed\n"
          "  -b, --budget STR      memory budget per rank (default auto); see 'staticpipe plan\n"
          "                        --help' for the forms (bytes, ratio, fraction, auto)\n"
          "  -d, --device DEV      auto (default: cuda when a GPU is visible), cuda or cpu\n"
          "      --devices LIST    CUDA devices to use, e.g. 0,2: a rank takes LIST[local rank\n"
          "                        mod its length] (default: local rank mod the devices\n"
          "                        visible; CUDA_VISIBLE_DEVICES is honoured)\n"
          "      --attn NAME       CUDA attention: auto (default: cudnn where cuDNN takes the\n"
          "                        shape, else flash), cudnn, flash (own kernel), simple\n"
          "      --transport T     auto (default: nccl when every rank has a GPU of its own\n"
          "                        and the stages run on GPUs, else mpi), mpi or nccl\n"
          "      --timeout S       longest any rank may go without hearing from a peer it\n"
          "                        waits on; ranks exchange heartbeats, so slow work never\n"
          "                        trips it, a dead, stopped or deadlocked rank does and the\n"
          "                        whole job ends (default 300 s)\n"
          "      --log-dir DIR     also write each rank's log to DIR/rank-N.log\n"
          "      --no-preview      do not write FILE.png\n"
          "      --no-verify       do not check the weights' checksums while loading\n"
          "      --trace FILE      a Chrome/Perfetto trace (chrome://tracing, ui.perfetto.dev):\n"
          "                        one process per rank, spans for embed, blocks, head,\n"
          "                        sampler, every wait on a peer and every step; NVTX ranges\n"
          "                        with the CUDA backend; written by rank 0 at the end\n"
          "      --profile         CUDA: time every op of every block; after each call of a\n"
          "                        stage's blocks, each op's mean time against its floor\n"
          "      --order O         order of work at a stage: auto (default: the planner's\n"
          "                        choice by predicted step time), micro (micro-batch-major:\n"
          "                        stages overlap on different micro-batches; a streamed\n"
          "                        block is copied once per micro-batch) or block\n"
          "                        (block-major: each block runs every micro-batch of the\n"
          "                        step while on the GPU, copied once per step; no overlap\n"
          "                        between stages within a step)\n"
          "      --stream-frac F   stream at least this fraction (0..1) of each rank's blocks\n"
          "                        from pinned host memory, whatever the budget allows\n"
          "                        (benchmarks of hybrid residency); the budget still holds\n"
          "      --chunk-rows N    process the block transients in chunks of at most N\n"
          "                        tokens (default: the planner's choice, unchunked when the\n"
          "                        budget allows); latents are the same either way\n"
          "      --mem-trace       CUDA: per block, device memory in use before and after and\n"
          "                        the arena's peak, beside the planner's prediction, as a\n"
          "                        table and as counters in --trace (synchronises each block)\n"
          "  -q, --quiet           no progress lines\n"
          "  -j, --json            print a JSON summary on stdout (the plan, and per rank its\n"
          "                        blocks, bytes loaded and times)\n"
          "  -h, --help            this text\n"
          "Threads per rank: OMP_NUM_THREADS (results do not depend on it).\n");
}

static int set_path(const char *flag, const char *v, char *dst) {
  size_t len = strlen(v);
  if (len == 0 || len >= RANK_JOBS_PATH) {
    sp_log_error("%s: the path is empty or longer than %d bytes", flag, RANK_JOBS_PATH - 1);
    return SP_ERR_INPUT;
  }
  memcpy(dst, v, len + 1);
  return SP_OK;
}

int run_parse(int argc, char **argv, run_opts *o, int *help) {
  enum { O_SHIFT = 1000, O_SAMPLER, O_SEED, O_NOISE, O_TIMEOUT, O_NO_PREVIEW, O_NO_VERIFY,
         O_JOBS, O_LOG_DIR, O_TRANSPORT, O_ATTN, O_DEVICES, O_SAVE_NOISE, O_TRACE, O_PROFILE,
         O_ORDER, O_STREAM_FRAC, O_CHUNK_ROWS, O_MEM_TRACE };
  static const struct option opts[] = {
      {"model", required_argument, 0, 'm'},   {"cond", required_argument, 0, 'c'},
      {"frames", required_argument, 0, 'f'},  {"size", required_argument, 0, 's'},
      {"steps", required_argument, 0, 'n'},   {"cfg", required_argument, 0, 'g'},
      {"shift", required_argument, 0, O_SHIFT}, {"sampler", required_argument, 0, O_SAMPLER},
      {"seed", required_argument, 0, O_SEED}, {"noise", required_argument, 0, O_NOISE},
      {"out", required_argument, 0, 'o'},     {"budget", required_argument, 0, 'b'},
      {"device", required_argument, 0, 'd'},  {"timeout", required_argument, 0, O_TIMEOUT},
      {"no-preview", no_argument, 0, O_NO_PREVIEW}, {"no-verify", no_argument, 0, O_NO_VERIFY},
      {"quiet", no_argument, 0, 'q'},         {"help", no_argument, 0, 'h'},
      {"json", no_argument, 0, 'j'},          {"jobs", required_argument, 0, O_JOBS},
      {"log-dir", required_argument, 0, O_LOG_DIR},
      {"transport", required_argument, 0, O_TRANSPORT},
      {"attn", required_argument, 0, O_ATTN},  {"devices", required_argument, 0, O_DEVICES},
      {"save-noise", required_argument, 0, O_SAVE_NOISE},
      {"trace", required_argument, 0, O_TRACE},
      {"profile", no_argument, 0, O_PROFILE},
      {"order", required_argument, 0, O_ORDER},
      {"stream-frac", required_argument, 0, O_STREAM_FRAC},
      {"chunk-rows", required_argument, 0, O_CHUNK_ROWS},
      {"mem-trace", no_argument, 0, O_MEM_TRACE},
      {0, 0, 0, 0}};
  memset(o, 0, sizeof *o);
  o->timeout = 300;
  o->verify = o->preview = 1;
  o->device = "auto";
  o->transport = COMM_TRANSPORT_AUTO;
  o->stream_frac = -1;
  rank_jobspec *j = &o->job;
  j->frames = 81;
  j->height = 480;
  j->width = 832;
  j->steps = 50;
  j->cfg = 5;
  j->shift = 5;
  j->sampler = RANK_SAMPLER_UNIPC;
  int64_t v;
  cli_getopt_reset();
  int ch;
  while ((ch = getopt_long(argc, argv, "m:c:f:s:n:g:o:b:d:qjh", opts, NULL)) != -1) {
    switch (ch) {
    case 'm': o->model = optarg; break;
    case 'c':
      if (set_path("--cond", optarg, j->cond)) return SP_ERR_INPUT;
      break;
    case 'f':
      if (cli_parse_int64("--frames", optarg, 1, 4097, &j->frames)) return SP_ERR_INPUT;
      break;
    case 's':
      if (cli_parse_size_hw("--size", optarg, &j->height, &j->width)) return SP_ERR_INPUT;
      break;
    case 'n':
      if (cli_parse_int64("--steps", optarg, 1, 10000, &v)) return SP_ERR_INPUT;
      j->steps = (int)v;
      break;
    case 'g':
      if (cli_parse_double("--cfg", optarg, 0, 100, &j->cfg)) return SP_ERR_INPUT;
      break;
    case O_SHIFT:
      if (cli_parse_double("--shift", optarg, 1e-3, 1e3, &j->shift)) return SP_ERR_INPUT;
      break;
    case O_SAMPLER:
      if (rank_sampler_kind_parse(optarg, &j->sampler)) return SP_ERR_INPUT;
      break;
    case O_SEED:
      if (cli_parse_uint64("--seed", optarg, &j->seed)) return SP_ERR_INPUT;
      break;
    case O_NOISE:
      if (set_path("--noise", optarg, j->noise)) return SP_ERR_INPUT;
      break;
    case 'o':
      if (set_path("--out", optarg, j->out)) return SP_ERR_INPUT;
      break;
    case 'b': o->budget = optarg; break;
    case 'd': o->device = optarg; break;
    case O_TIMEOUT:
      if (cli_parse_double("--timeout", optarg, 1, 1e6, &o->timeout)) return SP_ERR_INPUT;
      break;
    case O_JOBS: o->jobs = optarg; break;
    case O_LOG_DIR: o->log_dir = optarg; break;
    case O_ATTN:
      if (rank_attn_parse(optarg, &o->attn)) return SP_ERR_INPUT;
      break;
    case O_DEVICES: o->devices = optarg; break;
    case O_SAVE_NOISE: o->save_noise = optarg; break;
    case O_TRACE: o->trace = optarg; break;
    case O_PROFILE: o->profile = 1; break;
    case O_ORDER: {
      char err[256];
      if (plan_parse_order(optarg, &o->order, err, sizeof err) != PLAN_OK) {
        sp_log_error("--order: %s", err);
        return SP_ERR_INPUT;
      }
      break;
    }
    case O_STREAM_FRAC:
      if (cli_parse_double("--stream-frac", optarg, 0, 1, &o->stream_frac)) return SP_ERR_INPUT;
      break;
    case O_CHUNK_ROWS:
      if (cli_parse_int64("--chunk-rows", optarg, 1, INT64_MAX / 2, &o->chunk_rows))
        return SP_ERR_INPUT;
      break;
    case O_MEM_TRACE: o->mem_trace = 1; break;
    case O_TRANSPORT:
      if (comm_transport_parse(optarg, &o->transport)) return SP_ERR_INPUT;
      break;
    case O_NO_PREVIEW: o->preview = 0; break;
    case O_NO_VERIFY: o->verify = 0; break;
    case 'q': o->quiet = 1; break;
    case 'j': o->json = 1; break;
    case 'h': *help = 1; return SP_OK;
    default: return cli_bad_usage("run");
    }
  }
  if (optind < argc) {
    sp_log_error("run: unexpected argument '%s'", argv[optind]);
    return cli_bad_usage("run");
  }
  if (o->jobs && o->save_noise) {
    sp_log_error("run: --save-noise is for a single run, not --jobs");
    return cli_bad_usage("run");
  }
  if (o->jobs && (j->cond[0] || j->out[0] || j->noise[0])) {
    sp_log_error("run: --jobs takes cond=, out= and noise= from each line, not --cond/--out/"
                 "--noise");
    return cli_bad_usage("run");
  }
  const char *missing = !o->model                 ? "--model"
                        : o->jobs                 ? NULL
                        : !j->cond[0]             ? "--cond"
                        : !j->out[0]              ? "--out"
                                                  : NULL;
  if (missing) {
    sp_log_error("run: %s is required", missing);
    return cli_bad_usage("run");
  }
  if ((j->frames - 1) % 4 != 0) {
    sp_log_error("--frames: %lld is not of the form 4k+1 (81, 41, 17, 5, 1, ...)",
                 (long long)j->frames);
    return SP_ERR_INPUT;
  }
  if (j->height % 16 || j->width % 16) {
    sp_log_error("--size: %lldx%lld: height and width must be multiples of 16",
                 (long long)j->height, (long long)j->width);
    return SP_ERR_INPUT;
  }
  if (rank_device_parse(o->device, &o->dev) != SP_OK) return SP_ERR_INPUT;
  return SP_OK;
}
