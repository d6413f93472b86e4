/* The job's options as a table: one entry per flag (its long name, which
 * is also the key of a --jobs line, its short letter, value, default,
 * whether it may be repeated, and its --help text). Every command builds
 * its getopt table and --help from these entries (launch/cli.h) and sets
 * their values through job_params_set (job_params.h); a command's own
 * options use the same struct with ids from JOB_OPT_COUNT on.
 *
 * Short letters mean one thing in every command (README "Commands"): the
 * job table's, the commands' own (launch/), nothing else. */
#ifndef JOB_OPTION_H
#define JOB_OPTION_H

typedef enum job_opt_id {
  JOB_OPT_MODEL, JOB_OPT_COND, JOB_OPT_FRAMES, JOB_OPT_SIZE, JOB_OPT_STEPS, JOB_OPT_CFG,
  JOB_OPT_SHIFT, JOB_OPT_SAMPLER, JOB_OPT_SEED, JOB_OPT_NOISE, JOB_OPT_SAVE_NOISE,
  JOB_OPT_OUT, JOB_OPT_JOBS, JOB_OPT_BUDGET, JOB_OPT_DEVICE, JOB_OPT_DEVICES, JOB_OPT_ATTN,
  JOB_OPT_TRANSPORT, JOB_OPT_TIMEOUT, JOB_OPT_LOG_DIR, JOB_OPT_NO_PREVIEW, JOB_OPT_NO_VERIFY,
  JOB_OPT_TRACE, JOB_OPT_PROFILE, JOB_OPT_ORDER, JOB_OPT_STREAM_FRAC, JOB_OPT_CHUNK_ROWS,
  JOB_OPT_MEM_TRACE, JOB_OPT_QUIET, JOB_OPT_VAE, JOB_OPT_VIDEO, JOB_OPT_FPS,
  JOB_OPT_VAE_PRECISION, JOB_OPT_LORA, JOB_OPT_LORA_MODE, JOB_OPT_TIMESTEPS, JOB_OPT_SIGMAS,
  JOB_OPT_PROBE_LINKS, JOB_OPT_BOUNDARY, JOB_OPT_T5, JOB_OPT_PROMPT, JOB_OPT_NEGATIVE,
  JOB_OPT_LAYOUT, JOB_OPT_SPEED, JOB_OPT_PRECISION, JOB_OPT_FP8_ACCUM, JOB_OPT_CACHE,
  JOB_OPT_JSON, JOB_OPT_IMAGE, JOB_OPT_IMAGE_LATENTS, JOB_OPT_MAX_AREA, JOB_OPT_COUNT
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

/* Another spelling of a job option (the Wan repository's generate.py and
 * diffusers' names on run: --sample_steps is --steps). */
typedef struct job_option_alias {
  const char *name; /* without "--" */
  int id;           /* the job option it spells */
} job_option_alias;

/* 1 for the job options that may be given more than once, each adding
 * (--lora); any other given twice is refused (launch/cli.h). */
int job_option_repeatable(int id);
/* The entry of option id (0 <= id < JOB_OPT_COUNT, else NULL); the entry
 * named name, its own name only (NULL when none). */
const job_option *job_option_get(int id);
const job_option *job_option_find(const char *name);
/* The aliases, *n of them. */
const job_option_alias *job_option_aliases(int *n);

#endif
