/* The job: what a sampling run is (its workload and how to run it), the
 * one place its limits and rules are checked, the facts derived from it,
 * and the calls that plan, load, sample and write it. The commands (run,
 * plan, bench, forward) parse flags into a job_opts and print; the --jobs
 * file fills one job_spec per line through the same setters.
 *
 *   job_opts_default        every option at the default its table entry names
 *   job_opts_set            one option from its text (--frames 81, frames=81)
 *   job_opts_check          every limit and rule; errors name the flag
 *   job_latent_shape, job_micro_batches, job_tokens, job_plan_inputs
 *   job_session_open ... job_session_close   plan, load, sample, write
 *
 * Files: job_opts.c (the option table, setters, validator), job_plan.c
 * (derived facts, device, plan), job_io.c (a job's inputs and outputs),
 * job_session.c (the session: open, plan, summary, close), job_run.c (the
 * jobs sampled in groups), job_stage.c (this rank's stage: load, re-layout),
 * job_cache.c (the step cache's decisions),
 * job_lora.c (merged or bypassed LoRAs), jobs.c (the --jobs lines),
 * job_stream.c (--jobs from standard input or a named pipe, and the report
 * of each finished job). */
#ifndef JOB_H
#define JOB_H

#include <stdint.h>

#include "comm.h"
#include "gpu_share.h"
#include "lora.h"
#include "model_file.h"
#include "plan.h"
#include "sampler.h"
#include "stage.h"
#include "step_cache.h"
#include "tensor_io.h"
#include "transport.h"
#include "wan_config.h"
#include "wan_vae_gpu.h"

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
  char out[JOB_PATH];    /* --out */
  char video[JOB_PATH];  /* --video, "" for none */
  double fps;            /* --fps of the video */
  uint64_t seed;
  int64_t frames, height, width;
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
   * (job_opts_apply_model). */
  int cfg_given, shift_given, boundary_given;
  rank_cache_spec cache; /* --cache (ranks/sampling/step_cache.h) */
  /* A refused or failed job: its error line (rank 0, for the report). */
  char error[256];
} job_spec;

/* The workload and how to run it: every option of the job table. */
typedef struct job_opts {
  const char *model, *budget, *device, *jobs, *log_dir;
  const char *t5; /* --t5: the text encoder of --prompt and prompt= */
  job_spec job; /* the command line's job; the defaults of --jobs lines */
  double timeout;
  comm_transport_kind transport;
  int verify, quiet, preview;
  rank_device dev;        /* from --device (job_opts_check with JOB_CHECK_DEVICE) */
  kern_attn_backend attn;         /* --attn */
  int precision;          /* --precision: JOB_PRECISION_FILE (not given), _BF16, _FP8, _INT8 */
  const char *devices;    /* --devices LIST */
  const char *save_noise; /* --save-noise FILE */
  const char *trace;      /* --trace FILE.json */
  int profile;            /* --profile (CUDA) */
  int order;              /* --order: PLAN_ORDER_AUTO, _MICRO or _BLOCK */
  double stream_frac;     /* --stream-frac, -1: the budget decides */
  int64_t chunk_rows;     /* --chunk-rows, -1: the planner decides */
  int mem_trace;          /* --mem-trace (CUDA) */
  int cuda_device;        /* this rank's GPU (job_session_open) */
  comm_gpu_share gpu;     /* its identity and the node's ranks on it (job_session_open) */
  const char *vae;        /* --vae: the decoder of --video */
  wan_vae_gpu_precision vae_precision; /* --vae-precision (CUDA decoder) */
  rank_lora_spec lora[RANK_LORA_MAX]; /* --lora, in the order given */
  int nlora;
  rank_lora_mode lora_mode; /* --lora-mode (auto resolved by job_session_plan) */
  /* bypass: the room every job's pairs fit in, per block (the largest
   * rank_lora_bypass_room; job_session_plan): the plan and the stage hold it */
  uint64_t lora_block_elems;
  int64_t lora_rank;
  int probe_links;          /* --probe-links */
  int json;                 /* run --json: one JSON line per finished job on stdout */
  int cache_any;            /* some job caches steps (job_session_plan): the plan counts it */
  plan_grid layout;         /* --layout RxSxU (layout_mode PLAN_GRID_GIVEN) */
  int layout_mode;          /* PLAN_GRID_PIPELINE (the default), _AUTO or _GIVEN:
                               job_layout_resolve decides from it */
  double speed[PLAN_MAX_RANKS]; /* --speed: relative speeds, per rank or per replica */
  int nspeed;                   /* values --speed gave (0: the replicas' speeds equal) */
} job_opts;

/* The job's options: one entry each, from which the commands build their
 * getopt table and --help text, and with whose names the --jobs keys are
 * spelled (per_job). A command's own options use the same struct with ids
 * from JOB_OPT_COUNT on. */
typedef enum job_opt_id {
  JOB_OPT_MODEL, JOB_OPT_COND, JOB_OPT_FRAMES, JOB_OPT_SIZE, JOB_OPT_STEPS, JOB_OPT_CFG,
  JOB_OPT_SHIFT, JOB_OPT_SAMPLER, JOB_OPT_SEED, JOB_OPT_NOISE, JOB_OPT_SAVE_NOISE,
  JOB_OPT_OUT, JOB_OPT_JOBS, JOB_OPT_BUDGET, JOB_OPT_DEVICE, JOB_OPT_DEVICES, JOB_OPT_ATTN,
  JOB_OPT_TRANSPORT, JOB_OPT_TIMEOUT, JOB_OPT_LOG_DIR, JOB_OPT_NO_PREVIEW, JOB_OPT_NO_VERIFY,
  JOB_OPT_TRACE, JOB_OPT_PROFILE, JOB_OPT_ORDER, JOB_OPT_STREAM_FRAC, JOB_OPT_CHUNK_ROWS,
  JOB_OPT_MEM_TRACE, JOB_OPT_QUIET, JOB_OPT_VAE, JOB_OPT_VIDEO, JOB_OPT_FPS,
  JOB_OPT_VAE_PRECISION, JOB_OPT_LORA, JOB_OPT_LORA_MODE, JOB_OPT_TIMESTEPS, JOB_OPT_SIGMAS,
  JOB_OPT_PROBE_LINKS, JOB_OPT_BOUNDARY, JOB_OPT_T5, JOB_OPT_PROMPT, JOB_OPT_NEGATIVE,
  JOB_OPT_LAYOUT, JOB_OPT_SPEED, JOB_OPT_PRECISION, JOB_OPT_CACHE, JOB_OPT_COUNT
} job_opt_id;

typedef struct job_option {
  int id;           /* a job_opt_id, or a command's own id >= JOB_OPT_COUNT */
  const char *name; /* the long flag without "--"; the key of a --jobs line */
  char short_name;  /* 0: none */
  const char *arg;  /* the value's name in --help; NULL: a switch */
  const char *def;  /* the default, as text; NULL: none or said in help */
  int per_job;      /* may differ per line of a --jobs file */
  const char *help; /* --help text; lines after the first indented by the printer */
} job_option;

/* The entry of option id (0 <= id < JOB_OPT_COUNT); the entry named name
 * (NULL when none). */
const job_option *job_option_get(int id);
const job_option *job_option_find(const char *name);

/* Every option at its table default. */
void job_opts_default(job_opts *o);
/* Sets option id from its text; a switch takes value NULL. Checks the
 * syntax only (the limits are job_opts_check's). SP_OK or SP_ERR_INPUT
 * after one line naming the flag. */
int job_opts_set(job_opts *o, int id, const char *value);
/* The same for a per-job option of one --jobs line: errors say
 * "where: key=value ..." (where is "FILE:LINE"). */
int job_spec_set(job_spec *j, int id, const char *value, const char *where);

/* What job_opts_check checks besides the limits every job obeys. */
enum {
  JOB_CHECK_RUN = 1,    /* run's rules: --model and --cond/--out or --jobs */
  JOB_CHECK_DEVICE = 2, /* resolve --device into o->dev */
};
/* The LoRAs job j runs with, into out[0..RANK_LORA_MAX): its line's lora=
 * keys when it has any, else --lora. Returns their count. */
int job_spec_loras(const job_opts *o, const job_spec *j, rank_lora_spec *out);
/* 1 when two lists name the same LoRAs (files as spelled, strengths,
 * experts) in the same order. */
int job_loras_same(const rank_lora_spec *a, int na, const rank_lora_spec *b, int nb);

/* Every limit and rule of the job's options, in one place; errors name the
 * flag (for a --jobs line, "where: key=value"). SP_OK or SP_ERR_INPUT
 * (logged once). */
int job_opts_check(job_opts *o, int what);
/* The limits of one job's values; where is NULL for the command line, else
 * the "FILE:LINE" of a --jobs line. */
int job_spec_check(const job_spec *j, const char *where);
/* What depends on the model: a two-expert model's defaults (boundary, cfg
 * pair, shift, steps: its root attributes) fill what o->job was not given;
 * a one-expert model refuses two --cfg values and --boundary (one line
 * naming the flag). SP_OK or SP_ERR_INPUT. */
int job_opts_apply_model(job_opts *o, const rank_model_info *mi);
/* The same check for one job (a --jobs line, where "FILE:LINE"). */
int job_spec_check_model(const job_spec *j, const rank_model_info *mi, const char *where);
/* Each step's expert of job j on a model of experts experts (from its
 * schedule's timesteps: MODEL.md "Wan 2.2 A14B"), into expert[steps];
 * nothing for one expert. */
void job_step_experts(const job_spec *j, int experts, const int64_t *timesteps,
                      uint8_t *expert);

/* Number parsers shared by every command's flags: each logs
 * "flag: 'text' is not ..." once and returns SP_ERR_INPUT. */
int job_parse_int64(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);
int job_parse_uint64(const char *flag, const char *s, uint64_t *out);
int job_parse_double(const char *flag, const char *s, double lo, double hi, double *out);
/* "HxW" (480x832) into h and w, each in 1..65536. */
int job_parse_size_hw(const char *flag, const char *s, int64_t *h, int64_t *w);

/* A job's schedule (sampler.h): the shifted one of steps and shift, or its
 * explicit list. sigmas: steps+1 floats; timesteps: steps int64. SP_OK, or
 * SP_ERR_INPUT logged naming the flag (where: NULL) or "where: key=...". */
int job_schedule_make(const job_spec *j, const char *where, float *sigmas, int64_t *timesteps);
/* The explicit list as text ("1000,750,500,250"), "" for the shifted
 * schedule; its flag name ("timesteps", "sigmas") or NULL. */
void job_schedule_format(const job_spec *j, char *buf, size_t n);
const char *job_schedule_key(const job_spec *j);

/* --precision (MODEL.md "fp8 weights", "int8 weights"): not given, the
 * model file's. */
enum {
  JOB_PRECISION_FILE = 0,
  JOB_PRECISION_BF16 = 1,
  JOB_PRECISION_FP8 = 2,
  JOB_PRECISION_INT8 = 3
};
/* How the DiT's blocks run: --precision, or not given the file's
 * (rank_model_info.precision). */
wan_precision job_precision(const job_opts *o, const rank_model_info *mi);
/* The precision against the model (rank_stage_precision_check: fp8 on an
 * int8 file, int8 or fp8 on a GGUF-converted one). SP_OK or SP_ERR_INPUT
 * after one line. job_opts_apply_model calls it. */
int job_precision_check(const job_opts *o, const rank_model_info *mi);

/* ---- derived facts (job_plan.c) ---- */

/* Micro-batches of a job: 2 (the conditional and the unconditional branch)
 * for any guidance scale other than 1 (either expert's), else 1. */
int job_micro_batches(const job_spec *j);
/* The latent [channels, F, H, W]: channels from the model (in_dim), F from
 * the 4x temporal VAE (first frame alone), H and W 8x spatial. */
void job_latent_shape(const job_spec *j, const wan_config *c, int64_t lat[4]);
/* Tokens of the job's latent after the patch embedding. */
int64_t job_tokens(const job_spec *j, const wan_config *c);
/* The plan's workload for one job with batch items each (plan --batch). */
plan_workload job_workload(const job_spec *j, const wan_config *c, int batch);
/* Sets the planner's options the job gives: --order, --stream-frac,
 * --chunk-rows (the others stay). */
void job_plan_options(const job_opts *o, plan_options *po);
/* Device bytes the last rank keeps for the CUDA VAE decoder of --video
 * (weights and workspace, wan_vae_gpu_bytes) at the latent size of wl. */
uint64_t job_decoder_bytes(const wan_vae_config *vae_config, wan_vae_gpu_precision p,
                           const plan_workload *wl);
/* Rank 0 of each group: the planner's input for a set of jobs run
 * together (the largest latent, two micro-batches when any uses CFG),
 * times in_flight jobs. Returns the index of the job with the largest
 * latent, -1 when every job is bad. */
int job_workload_of(const job_spec *jobs, int n, const wan_config *c, int in_flight,
                    plan_workload *wl);

/* ---- one job's inputs and output (job_io.c) ---- */

/* One job's inputs on rank 0: the contexts and the initial noise. */
typedef struct job_inputs {
  rank_tensor ctx[2], noise;
} job_inputs;

void job_inputs_free(job_inputs *in);
/* dataset (L, text_dim) with 1 <= L <= text_len. */
int job_read_context(const char *path, const char *name, const wan_config *c, rank_tensor *out);
/* dataset (in_dim, F, H, W), H and W even; with want non-NULL the shape
 * must equal it exactly. A path ending in .latent is read as a ComfyUI
 * latent file instead (io/latent_file.h), whatever name says. */
int job_read_latent(const char *path, const char *name, const wan_config *c,
                    const int64_t *want, rank_tensor *out);

/* Paths, checked on rank 0 before any work (io/path_check.h: inputs are
 * regular files, outputs regular files or new paths, no output is an input
 * or another output). A model spec that is a file must be an input file. */
int job_model_path_check(const char *flag, const char *spec);
/* One job's outputs: out and out.png (unless --no-preview), each checked
 * against --model, --jobs and the job's cond and noise; where as for
 * job_spec_check. */
int job_spec_check_paths(const job_opts *o, const job_spec *j, const char *where);
/* Every path of the options: --model, --jobs, the command line's job,
 * --save-noise and --trace. SP_OK or SP_ERR_INPUT (logged once). */
int job_paths_check(const job_opts *o);

/* ---- prompts encoded in the run (job_prompt.c) ---- */

/* The contexts of every job's prompt, held on rank 0 from the encoding
 * (before the model is placed) until the job reads its inputs. */
typedef struct job_prompts job_prompts;
void job_prompts_free(job_prompts *p);
/* --prompt, --negative, prompt=, negative=: the text into dst (JOB_PROMPT
 * bytes); empty refused unless allow_empty. SP_OK or SP_ERR_INPUT naming
 * flag. */
int job_prompt_set(const char *flag, const char *v, char *dst, int allow_empty);
/* run's rules of --t5, --prompt and --negative against --cond and --jobs
 * (called by job_opts_check). SP_OK or SP_ERR_INPUT (one line). */
int job_prompt_check_run(const job_opts *o);
/* Where a run encodes its prompts and what that needs: rank 0, before the
 * model is placed, so nothing else is in its memory then; on the CPU (fp32,
 * umt5_encode_host_bytes) or, when the run is on CUDA, on its GPU (bf16,
 * every layer resident: umt5_gpu_bytes, the planner's layout). */
typedef struct job_t5_cost {
  const char *device;    /* "cpu" or "cuda" */
  uint64_t host_bytes;   /* peak host bytes of the encoding (the CPU encoder's) */
  uint64_t device_bytes; /* cuda: device bytes (weights, activations, workspace) */
  uint64_t layer_bytes;  /* one layer's weights (fp32 on the CPU, bf16 on the GPU) */
  int64_t tokens;        /* the tokens it was counted for */
  int64_t layers, dim;
  char preset[64];
} job_t5_cost;
/* The cost of encoding sequences of total tokens (the longest longest) with
 * the encoder t5 (a file or synth:; metadata only), on the GPU when cuda.
 * SP_OK or SP_ERR_INPUT (logged, naming --t5). */
int job_prompt_cost(const char *t5, int64_t total, int64_t longest, int cuda,
                    job_t5_cost *out);

/* A --jobs line's: cond= or prompt=, not both (negative=, or --negative,
 * applies to prompt= lines). where is "FILE:LINE". */
int job_prompt_check_line(const job_spec *j, const char *where);

/* ---- the session: plan, load, sample, write (job_session.c, job_run.c) ---- */

/* What a rank did, gathered on rank 0 for the summary. */
typedef struct job_rank_stats {
  int first, last;
  uint64_t bytes_loaded;
  double load_s, compute_s, wait_s, send_s, queue_s;
  double sample_s;     /* wall time of the sampling loops */
  double first_step_s; /* rank 0: the first step of each group (one-time costs) */
  int groups;          /* sampling loops run (each has a first step) */
  int steps;           /* steps run, over every job */
  int order;           /* PLAN_ORDER_MICRO or _BLOCK: this rank's order of work */
  int streamed;        /* blocks streamed from host memory */
  uint64_t h2d_bytes;  /* streamed weight bytes copied while sampling */
  uint64_t arena_bytes, device_in_use, device_peak; /* the last stage loaded */
  uint64_t plan_peak_bytes; /* the planner's device peak for this rank */
  double weights_s;         /* reading and placing the weights (within load_s) */
  double link_gbs;          /* the probed activation rate to the next stage, 0 on the last */
  uint64_t act_bytes;       /* one activation message */
  double switch_s, other_s; /* rank 0: steps that switch experts, other steps but each
                               loop's first (rank_pipe_stats) */
  int switch_steps, other_steps;
} job_rank_stats;

typedef struct job_session job_session;

/* After each phase every rank learns the worst status (comm_phase_end). */
int job_phase(const comm_world *w, int rc, const char *what);

/* Opens the log directory, the watchdog, this rank's GPU, the transport and
 * the model (o->cuda_device is set). *out is set even on failure (close it). */
int job_session_open(const comm_world *w, job_opts *o, job_session **out);
/* Rank 0 reads the jobs (o->jobs, else the command line's one job); every
 * rank gets the same list; reads the single job's inputs; plans. */
int job_session_plan(job_session *s);
/* The plan every rank follows (after job_session_plan). */
const plan *job_session_get_plan(const job_session *s);
/* Runs every job, in groups in flight together; each job's output written
 * by the last rank. Returns the worst job status (a failed load ends the
 * run: *fatal). */
int job_session_run(job_session *s);
/* Logs the --jobs summary, gathers each rank's stats on rank 0 (*all, a
 * w->size array, free() it; NULL elsewhere). */
int job_session_finish(job_session *s, int rc, job_rank_stats **all);
/* Rank 0, step caching: the last job run with a cache, its spec and
 * actions (steps x micro, ranks/sampling/step_cache.h), and over every
 * cached job the micro-batch steps skipped and in all. Returns 0 (the
 * outputs untouched) when no job cached. */
int job_session_cache(const job_session *s, rank_cache_spec *spec, const uint8_t **act,
                      int *steps, int *micro, int64_t *skipped, int64_t *total);
void job_session_close(job_session *s);

/* ---- the --jobs file (jobs.c) ----
 *
 * One job per line, whitespace-separated key=value fields with the keys of
 * the per-job options (cond, out, seed, noise, frames, size, steps, cfg,
 * shift, sampler, timesteps, sigmas, boundary, cache); '#' starts a comment, blank lines are skipped. Keys
 * left out take the run command's values. A line that breaks a rule is
 * kept as a bad job (logged once, "FILE:LINE: ..."), so the others run.
 * The file is o->jobs, the defaults o->job; each line's outputs are checked
 * (job_spec_check_paths) and two lines naming one output file (by
 * identity, not spelling) make the second bad.
 * On SP_OK, *out (free() it) holds *n >= 1 jobs, bad ones marked.
 * SP_ERR_INPUT (logged) when the file cannot be read, holds no job or more
 * than JOB_FILE_MAX. */
int job_file_read(const job_opts *o, job_spec **out, int *n);

/* The lines one at a time, as they arrive: path "-" is standard input,
 * else a regular file or a named pipe. job_reader_open: SP_OK or
 * SP_ERR_INPUT (logged). job_reader_next: 1 when *j holds the next line's
 * job (from o's defaults; a refused line is marked bad, logged once,
 * its error kept), 0 at the end of the input, -1 on a read error
 * (logged). Lines are bounded (LINE_MAX_BYTES of jobs.c, the longer
 * rest dropped) and hold no NUL byte. */
typedef struct job_reader job_reader;
int job_reader_open(const char *path, job_reader **out);
int job_reader_next(job_reader *r, const job_opts *o, job_spec *j);
/* How messages name the source: the path, "stdin" for "-". */
const char *job_reader_name(const job_reader *r);
void job_reader_close(job_reader *r);
/* Marks j bad and keeps the last error line logged as its cause. */
void job_spec_mark_bad(job_spec *j);
/* 1 when --jobs names a stream (standard input "-" or a named pipe):
 * its jobs are read and run as they arrive (job_stream.c). */
int job_jobs_is_stream(const char *jobs);

#endif
