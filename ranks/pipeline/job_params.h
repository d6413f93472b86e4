/* A job's plain parameters: what a command line (or a --jobs line) says,
 * filled by parsing and fully checked there, before anything runs (before
 * MPI starts, for run): every number in range, the budget's syntax, the
 * layout, every path (inputs regular files, outputs writable, none the
 * same file as another). No model, stage, transport or file handle lives
 * here: the runtime state of a job is the session's (job_session.h), as
 * the device a run resolves, its GPU and the LoRA mode it settles on.
 *
 *   job_params_default   every option at its table default (job_option.h)
 *   job_params_set       one option from its text (--frames 81)
 *   job_spec_set         one key of a --jobs line (frames=81)
 *   job_params_check     every limit and rule; errors name the flag
 *   job_params_check_paths  every path, inputs and outputs, by identity
 *
 * Files: job_params.c (setters, defaults), job_check.c (the validator,
 * schedules, LoRA lists), job_paths.c (the paths), job_parse.c (numbers),
 * job_option.c (the table). */
#ifndef JOB_PARAMS_H
#define JOB_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "job_option.h"
#include "kern_attn_backend.h" /* --attn */
#include "lora_spec.h"         /* --lora, --lora-mode */
#include "plan.h"              /* --layout (plan_grid), --order, PLAN_MAX_RANKS */
#include "sampler.h"           /* --sampler, --timesteps, --sigmas */
#include "step_cache.h"        /* --cache */
#include "wan_vae_gpu.h"       /* --vae-precision */
#include "wan_weights.h"       /* --precision */

enum { JOB_PATH = 1024, JOB_FILE_MAX = 4096, JOB_LORA_TEXT = 4096, JOB_PROMPT = 4096 };

/* One sampling: run's own flags, or one line of a --jobs file. */
typedef struct job_spec {
  int line;              /* line number in the jobs file (0: the command line) */
  int bad;               /* the line was refused (already logged) */
  char cond[JOB_PATH];   /* --cond */
  /* --prompt / --negative (UTF-8, "" when not given): encoded with --t5 on
   * rank 0 before the model is placed, instead of a cond file (job_prompt.c) */
  char prompt[JOB_PROMPT], negative[JOB_PROMPT];
  char noise[JOB_PATH];  /* --noise, "" for the seed */
  char out[JOB_PATH];    /* --out, "" when -o named the video (job_spec_video_out) */
  char video[JOB_PATH];  /* --video, "" for none */
  /* Image to video (I2V.md): --image, encoded with --vae's encoder on rank
   * 0 before the model is placed (job_image.c), or --image-latents, the
   * image already encoded; "" for none. max_area: --max-area, the image's
   * pixel budget (0: the model's default). The job's size (and, from
   * image latents, its frames) is the image's, set when it is read. */
  char image[JOB_PATH], image_latents[JOB_PATH];
  int64_t max_area;
  double fps;            /* --fps of the video */
  uint64_t seed;
  int64_t frames, height, width;
  /* Given, not defaults: a model's own defaults fill the rest
   * (job_params_apply_model; TI2V-5B: 121 frames of 704x1280 at 24). */
  int frames_given, size_given, fps_given;
  int steps;
  double cfg, shift;
  /* Two experts (MODEL.md "Wan 2.2 A14B"): cfg is the high-noise expert's
   * guidance and cfg_low the low-noise one's (one value given: both);
   * boundary splits the steps (0: the model's). cfg_pair: two values given. */
  double cfg_low, boundary;
  int cfg_pair;
  rank_sampler_kind sampler;
  /* --timesteps / --sigmas: an explicit schedule of sched_n values (a
   * trailing sigma 0 dropped), or RANK_SCHEDULE_SHIFTED (steps, shift). */
  rank_schedule_kind sched;
  int sched_n;
  double sched_v[RANK_SCHEDULE_MAX_LIST];
  /* Given here, not inherited: a list sets steps unless steps was given
   * (then they must agree); --timesteps and --sigmas exclude each other. */
  int steps_given, sched_given;
  /* A --jobs line's lora= keys (repeatable, in order): their values, each
   * ended by '\n' ("none" gives no LoRA); lora_given 0: the line names
   * none and the job takes --lora (job_spec_loras). */
  char lora[JOB_LORA_TEXT];
  int lora_given;
  /* Given, not defaults: a two-expert model's own defaults fill the rest
   * (job_params_apply_model). */
  int cfg_given, shift_given, boundary_given;
  rank_cache_spec cache; /* --cache (ranks/sampling/step_cache.h) */
  /* A refused or failed job: its error line (rank 0, for the report). */
  char error[256];
} job_spec;

/* --precision (MODEL.md "fp8 weights", "int8 weights"): not given, the
 * model file's; else 1 + the wan_precision it names. */
enum {
  JOB_PRECISION_FILE = 0,
  JOB_PRECISION_BF16 = 1 + WAN_PRECISION_BF16,
  JOB_PRECISION_FP8 = 1 + WAN_PRECISION_FP8,
  JOB_PRECISION_INT8 = 1 + WAN_PRECISION_INT8
};

/* Everything a command line says about a job. The strings point into the
 * command line (argv) that was parsed. */
typedef struct job_params {
  const char *model; /* --model: a file or synth:PRESET[:SEED] */
  const char *t5;    /* --t5: the text encoder of --prompt and prompt= */
  const char *vae;   /* --vae: the decoder of --video */
  const char *jobs, *log_dir, *save_noise, *trace;
  /* --budget: its syntax checked when set (for any rank count); the rules
   * that depend on the ranks when the plan is made */
  const char *budget;
  const char *device;    /* --device: auto, cpu or cuda (job_device_resolve) */
  const char *transport; /* --transport: auto, mpi or nccl */
  const char *devices;   /* --devices LIST of GPU indices (each checked when set) */
  job_spec job; /* the command line's job; the defaults of --jobs lines */
  double timeout;
  int verify, quiet, preview;
  kern_attn_backend attn; /* --attn */
  int precision;          /* --precision: JOB_PRECISION_FILE (not given), _BF16, _FP8, _INT8 */
  int fp8_fast_accum;     /* --fp8-accum fast (1) or full (0, the default) */
  int profile;            /* --profile (CUDA) */
  int order;              /* --order: PLAN_ORDER_AUTO, _MICRO or _BLOCK */
  double stream_frac;     /* --stream-frac, -1: the budget decides */
  int64_t chunk_rows;     /* --chunk-rows, -1: the planner decides */
  int mem_trace;          /* --mem-trace (CUDA) */
  wan_vae_gpu_precision vae_precision; /* --vae-precision (CUDA decoder) */
  rank_lora_spec lora[RANK_LORA_MAX]; /* --lora, in the order given */
  int nlora;
  rank_lora_mode lora_mode; /* --lora-mode as given (the session settles auto) */
  int probe_links;          /* --probe-links */
  int json;                 /* run --json: one JSON line per finished job on stdout */
  plan_grid layout;         /* --layout RxSxU (layout_mode PLAN_GRID_GIVEN) */
  int layout_mode;          /* PLAN_GRID_PIPELINE (the default), _AUTO or _GIVEN:
                               job_layout_resolve decides from it */
  double speed[PLAN_MAX_RANKS]; /* --speed: relative speeds, per rank or per replica */
  int nspeed;                   /* values --speed gave (0: the replicas' speeds equal) */
} job_params;

/* Every option at its table default. */
void job_params_default(job_params *p);
/* Sets option id from its text; a switch takes value NULL. Checks the
 * value's syntax (the budget, the layout, a --speed or --devices list
 * whole); the ranges and the rules between options are job_params_check's.
 * SP_OK or SP_ERR_INPUT after one line naming the flag. */
int job_params_set(job_params *p, int id, const char *value);
/* The same for a per-job option of one --jobs line: errors say
 * "where: key=value ..." (where is "FILE:LINE"). */
int job_spec_set(job_spec *j, int id, const char *value, const char *where);

/* What job_params_check checks besides the limits every job obeys. */
enum {
  JOB_CHECK_RUN = 1, /* run's rules: --model and --cond/--out or --jobs, what goes with what */
};
/* Every limit and rule of the options, in one place; errors name the flag.
 * SP_OK or SP_ERR_INPUT (logged once). Applies run's -o rule
 * (job_spec_video_out) to p->job. */
int job_params_check(job_params *p, int what);
/* The limits of one job's values, the latent's size among them
 * (job_workload_check); where is NULL for the command line, else the
 * "FILE:LINE" of a --jobs line. */
int job_spec_check(const job_spec *j, const char *where);
/* A job's image rules (where as for job_spec_check): --image and
 * --image-latents exclude each other, --max-area goes with --image, and
 * --image needs --vae (its encoder). SP_OK or SP_ERR_INPUT (one line). */
int job_image_check(const job_params *p, const job_spec *j, const char *where);
/* A video name on -o (out=): .mp4, .mkv, .mov or .webm. With --vae and no
 * --video (video=) it becomes the job's video and no latents file is
 * written; otherwise it is refused (the latents are HDF5 or a .latent):
 * SP_ERR_INPUT after one line. */
int job_spec_video_out(const job_params *p, job_spec *j, const char *where);
/* 1 when path ends in a video file's extension (.mp4, .mkv, .mov, .webm). */
int job_path_is_video(const char *path);

/* The latent's size a workload of frames x height x width pixels may have:
 * frames 1..JOB_FRAMES_MAX, each side 16..JOB_SIDE_MAX, and at most
 * JOB_TOKENS_MAX tokens (the planner's limit, planner/plan.h), checked
 * before anything is allocated for it. what names the source ("--frames 81
 * --size 480x832", "--latents FILE"). SP_OK or SP_ERR_INPUT (one line). */
int job_workload_check(const char *what, int64_t frames, int64_t height, int64_t width);

/* ---- paths (job_paths.c) ---- */

/* Every path of the parameters, before any work: --model, --vae, --t5,
 * --jobs, every --lora, the command line's job (--cond, --noise), and the
 * outputs (--out and its preview, --video, --save-noise, --trace), each
 * output against every input and every other output by identity
 * (io/path_check.h). --log-dir a directory that exists or can be made.
 * SP_OK or SP_ERR_INPUT (logged once). */
int job_params_check_paths(const job_params *p);
/* One job's outputs: out and out.png (unless --no-preview) and video,
 * each checked against every input of the run (--model, --vae, --t5,
 * --jobs, --lora, the job's cond, noise and lora=) and each other; where
 * as for job_spec_check. */
int job_spec_check_paths(const job_params *p, const job_spec *j, const char *where);
/* An output that is not a video (a model file, latents, a trace): a video
 * file name on it is refused, one line saying what flag writes. */
int job_output_not_video(const char *flag, const char *path, const char *what);
/* A model spec that is a file (not synth:) must be an input file. */
int job_model_path_check(const char *flag, const char *spec);

/* ---- LoRAs and schedules (job_check.c) ---- */

/* The LoRAs job j runs with, into out[0..RANK_LORA_MAX): its line's lora=
 * keys when it has any, else --lora. Returns their count. */
int job_spec_loras(const job_params *p, const job_spec *j, rank_lora_spec *out);
/* 1 when two lists name the same LoRAs (files as spelled, strengths,
 * experts) in the same order. */
int job_loras_same(const rank_lora_spec *a, int na, const rank_lora_spec *b, int nb);

/* A job's schedule (sampler.h): the shifted one of steps and shift, or its
 * explicit list. sigmas: steps+1 floats; timesteps: steps int64. SP_OK, or
 * SP_ERR_INPUT logged naming the flag (where: NULL) or "where: key=...". */
int job_schedule_make(const job_spec *j, const char *where, float *sigmas, int64_t *timesteps);
/* The explicit list as text ("1000,750,500,250"), "" for the shifted
 * schedule; its flag name ("timesteps", "sigmas") or NULL. */
void job_schedule_format(const job_spec *j, char *buf, size_t n);
const char *job_schedule_key(const job_spec *j);

#endif
