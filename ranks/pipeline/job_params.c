/* The job's parameters from text: the setters and the defaults (see
 * job_params.h). The table of flags is job_option.c; the rules between
 * options and the ranges job_check.c. */
#include "job_params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_limits.h"
#include "job_parse.h"
#include "job_prompt.h"
#include "log.h"
#include "num.h"

/* How a message names the option: "--frames" on the command line,
 * "jobs.txt:3: frames" for a --jobs line. */
static void flag_name(char *buf, size_t n, const char *where, const char *name) {
  if (where)
    snprintf(buf, n, "%s: %s", where, name);
  else
    snprintf(buf, n, "--%s", name);
}

static int set_path(const char *flag, const char *v, char *dst) {
  size_t len = strlen(v);
  if (len == 0 || len >= JOB_PATH) {
    sp_log_error("%s: the path is empty or longer than %d bytes", flag, JOB_PATH - 1);
    return SP_ERR_INPUT;
  }
  memcpy(dst, v, len + 1);
  return SP_OK;
}

/* --timesteps / --sigmas: comma-separated numbers (syntax only). */
static int set_schedule(job_spec *j, rank_schedule_kind kind, const char *flag, const char *v) {
  if (j->sched_given && j->sched != kind) {
    sp_log_error("%s: --timesteps and --sigmas exclude each other", flag);
    return SP_ERR_INPUT;
  }
  char buf[4096], *items[RANK_SCHEDULE_MAX_LIST + 1];
  double vals[RANK_SCHEDULE_MAX_LIST + 1];
  int n = 0;
  if (job_parse_list(flag, v, ',', buf, sizeof buf, items, RANK_SCHEDULE_MAX_LIST + 1, &n) !=
      SP_OK)
    return SP_ERR_INPUT;
  for (int i = 0; i < n; i++)
    if (plan_num_real(items[i], -HUGE_VAL, HUGE_VAL, &vals[i]) != PLAN_OK) {
      sp_log_error("%s: '%s' is not a comma-separated list of numbers ('%s' is not one)", flag,
                   v, items[i]);
      return SP_ERR_INPUT;
    }
  /* A sigma list may end with the final 0, as ComfyUI's do. */
  if (kind == RANK_SCHEDULE_SIGMAS && n >= 2 && vals[n - 1] == 0.0) n--;
  if (n > RANK_SCHEDULE_MAX_LIST) {
    sp_log_error("%s: more than %d values", flag, RANK_SCHEDULE_MAX_LIST);
    return SP_ERR_INPUT;
  }
  j->sched = kind;
  j->sched_n = n;
  memcpy(j->sched_v, vals, (size_t)n * sizeof *vals);
  j->sched_given = 1;
  if (!j->steps_given) j->steps = n;
  return SP_OK;
}

/* One lora= key of a --jobs line: the first replaces --lora for the job. */
static int set_job_lora(job_spec *j, const char *flag, const char *v) {
  if (!j->lora_given) j->lora[0] = '\0';
  j->lora_given = 1;
  if (strcmp(v, "none") == 0) return SP_OK;
  int n = 0;
  for (const char *p = j->lora; *p; p++) n += *p == '\n';
  char err[256];
  rank_lora_spec spec;
  if (n == RANK_LORA_MAX) {
    sp_log_error("%s: given more than %d times", flag, RANK_LORA_MAX);
    return SP_ERR_INPUT;
  }
  if (strchr(v, '\n') || rank_lora_spec_parse(v, &spec, err, sizeof err) != SP_OK) {
    sp_log_error("%s '%s': %s (the form is FILE[:STRENGTH][@high|@low], or none)", flag, v,
                 strchr(v, '\n') ? "holds a line break" : err);
    return SP_ERR_INPUT;
  }
  const size_t used = strlen(j->lora), len = strlen(v);
  if (used + len + 2 > sizeof j->lora) {
    sp_log_error("%s: the line's lora= values exceed %zu bytes", flag, sizeof j->lora - 1);
    return SP_ERR_INPUT;
  }
  memcpy(j->lora + used, v, len);
  j->lora[used + len] = '\n';
  j->lora[used + len + 1] = '\0';
  return SP_OK;
}

/* "G" (both experts) or "HIGH,LOW". */
static int set_cfg(job_spec *j, const char *flag, const char *v) {
  const char *comma = strchr(v, ',');
  j->cfg_given = 1;
  j->cfg_pair = comma != NULL;
  if (!comma) {
    const int rc = job_parse_double(flag, v, -HUGE_VAL, HUGE_VAL, &j->cfg);
    j->cfg_low = j->cfg;
    return rc;
  }
  char high[64];
  const size_t n = (size_t)(comma - v);
  if (n == 0 || n >= sizeof high || strchr(comma + 1, ',')) {
    sp_log_error("%s: '%s' is not G or HIGH,LOW", flag, v);
    return SP_ERR_INPUT;
  }
  memcpy(high, v, n);
  high[n] = '\0';
  if (job_parse_double(flag, high, -HUGE_VAL, HUGE_VAL, &j->cfg) != SP_OK) return SP_ERR_INPUT;
  return job_parse_double(flag, comma + 1, -HUGE_VAL, HUGE_VAL, &j->cfg_low);
}

/* --max-area A: an integer, or HxW (W*H) whose product it is; the range
 * is job_spec_check's. */
static int set_max_area(job_spec *j, const char *flag, const char *v) {
  if (strpbrk(v, "xX*")) {
    int64_t h = 0, w = 0;
    if (job_parse_size_hw(flag, v, &h, &w) != SP_OK) return SP_ERR_INPUT;
    j->max_area = h * w;
    return SP_OK;
  }
  return job_parse_int64(flag, v, INT64_MIN, INT64_MAX, &j->max_area);
}

/* --cache METHOD:T / cache= (the threshold's range is the parser's). */
static int set_cache(job_spec *j, const char *flag, const char *v) {
  char err[256];
  if (rank_cache_parse(v, &j->cache, err, sizeof err) == SP_OK) return SP_OK;
  sp_log_error("%s: %s", flag, err);
  return SP_ERR_INPUT;
}

int job_spec_set(job_spec *j, int id, const char *v, const char *where) {
  const job_option *opt = job_option_get(id);
  char flag[JOB_PATH + 64];
  flag_name(flag, sizeof flag, where, opt ? opt->name : "?");
  int64_t i64 = 0;
  int rc = SP_OK;
  switch (id) {
  case JOB_OPT_COND: return set_path(flag, v, j->cond);
  case JOB_OPT_PROMPT: return job_prompt_set(flag, v, j->prompt, 0);
  case JOB_OPT_NEGATIVE: return job_prompt_set(flag, v, j->negative, 1);
  case JOB_OPT_NOISE: return set_path(flag, v, j->noise);
  case JOB_OPT_OUT: return set_path(flag, v, j->out);
  case JOB_OPT_VIDEO: return set_path(flag, v, j->video);
  case JOB_OPT_IMAGE: return set_path(flag, v, j->image);
  case JOB_OPT_IMAGE_LATENTS: return set_path(flag, v, j->image_latents);
  case JOB_OPT_MAX_AREA: return set_max_area(j, flag, v);
  case JOB_OPT_FPS:
    /* An integer, as the help's N says; the range is job_spec_check's. */
    rc = job_parse_int64(flag, v, INT64_MIN, INT64_MAX, &i64);
    j->fps = (double)i64;
    j->fps_given = 1;
    return rc;
  case JOB_OPT_SEED: return job_parse_uint64(flag, v, &j->seed);
  case JOB_OPT_FRAMES:
    j->frames_given = 1;
    return job_parse_int64(flag, v, INT64_MIN, INT64_MAX, &j->frames);
  case JOB_OPT_SIZE:
    j->size_given = 1;
    return job_parse_size_hw(flag, v, &j->height, &j->width);
  case JOB_OPT_STEPS:
    /* Beyond int: a value the validator refuses. */
    rc = job_parse_int64(flag, v, INT64_MIN, INT64_MAX, &i64);
    j->steps = i64 > INT32_MAX ? INT32_MAX : i64 < 0 ? -1 : (int)i64;
    j->steps_given = 1;
    return rc;
  case JOB_OPT_TIMESTEPS: return set_schedule(j, RANK_SCHEDULE_TIMESTEPS, flag, v);
  case JOB_OPT_SIGMAS: return set_schedule(j, RANK_SCHEDULE_SIGMAS, flag, v);
  case JOB_OPT_CFG: return set_cfg(j, flag, v);
  case JOB_OPT_SHIFT:
    j->shift_given = 1;
    return job_parse_double(flag, v, -HUGE_VAL, HUGE_VAL, &j->shift);
  case JOB_OPT_BOUNDARY:
    j->boundary_given = 1;
    return job_parse_double(flag, v, -HUGE_VAL, HUGE_VAL, &j->boundary);
  case JOB_OPT_SAMPLER: return rank_sampler_kind_parse(v, &j->sampler);
  case JOB_OPT_LORA: return set_job_lora(j, flag, v);
  case JOB_OPT_CACHE: return set_cache(j, flag, v);
  default: sp_log_error("%s: not an option of a job", flag); return SP_ERR_INPUT;
  }
}

/* --speed LIST: up to PLAN_MAX_RANKS relative speeds in (0, JOB_SPEED_MAX]. */
static int set_speed(job_params *p, const char *v) {
  char buf[4096], *items[PLAN_MAX_RANKS];
  int n = 0;
  if (job_parse_list("--speed", v, ',', buf, sizeof buf, items, PLAN_MAX_RANKS, &n) != SP_OK)
    return SP_ERR_INPUT;
  for (int i = 0; i < n; i++)
    if (plan_num_real(items[i], 0.0, JOB_SPEED_MAX, &p->speed[i]) != PLAN_OK ||
        !(p->speed[i] > 0.0)) {
      sp_log_error("--speed: '%s' is not a list of at most %d relative speeds in (0, %d], "
                   "comma-separated (e.g. 1,3)",
                   v, PLAN_MAX_RANKS, JOB_SPEED_MAX);
      return SP_ERR_INPUT;
    }
  p->nspeed = n;
  return SP_OK;
}

/* --devices LIST: GPU indices 0..1023 (those visible are checked when a
 * rank picks its GPU). */
static int set_devices(job_params *p, const char *v) {
  char buf[1024], *items[PLAN_MAX_RANKS];
  int n = 0;
  int64_t idx;
  if (job_parse_list("--devices", v, ',', buf, sizeof buf, items, PLAN_MAX_RANKS, &n) != SP_OK)
    return SP_ERR_INPUT;
  for (int i = 0; i < n; i++)
    if (job_parse_int64("--devices", items[i], 0, 1023, &idx) != SP_OK) return SP_ERR_INPUT;
  p->devices = v;
  return SP_OK;
}

/* --budget: refused unless some rank count takes it (plan_budget_parse);
 * the rules of the run's own count apply when its plan is made. */
static int set_budget(job_params *p, const char *v) {
  char err[1024];
  plan_budget b;
  for (int n = 1; n <= PLAN_MAX_RANKS; n++)
    if (plan_budget_parse(v, n, &b, err, sizeof err) == PLAN_OK) {
      p->budget = v;
      return SP_OK;
    }
  /* The message of the count its cuda:K entries name (one at least). */
  int named = 0;
  for (const char *c = v; (c = strstr(c, "cuda:")) != NULL; c += 5) named++;
  plan_budget_parse(v, named < 1 ? 1 : named > PLAN_MAX_RANKS ? PLAN_MAX_RANKS : named, &b, err,
                    sizeof err);
  sp_log_error("--budget: %s", err);
  return SP_ERR_INPUT;
}

/* "A", "B" or "C" into *out (the index); else one line naming the flag. */
static int set_word(const char *flag, const char *v, const char *const *words, int n,
                    const char *said, int *out) {
  for (int i = 0; i < n; i++)
    if (strcmp(v, words[i]) == 0) {
      *out = i;
      return SP_OK;
    }
  sp_log_error("%s: '%s' is not %s", flag, v, said);
  return SP_ERR_INPUT;
}

/* The options that only the command line gives (not per job). */
static int set_run_option(job_params *p, int id, const char *v) {
  static const char *const devices[] = {"auto", "cpu", "cuda"};
  static const char *const transports[] = {"auto", "mpi", "nccl"};
  char err[256];
  int k = 0;
  switch (id) {
  case JOB_OPT_MODEL: p->model = v; return SP_OK;
  case JOB_OPT_SAVE_NOISE: p->save_noise = v; return SP_OK;
  case JOB_OPT_JOBS: p->jobs = v; return SP_OK;
  case JOB_OPT_BUDGET: return set_budget(p, v);
  case JOB_OPT_DEVICE:
    p->device = v;
    return set_word("--device", v, devices, 3, "auto, cpu or cuda", &k);
  case JOB_OPT_DEVICES: return set_devices(p, v);
  case JOB_OPT_ATTN: return kern_attn_backend_parse(v, &p->attn);
  case JOB_OPT_TRANSPORT:
    p->transport = v;
    return set_word("--transport", v, transports, 3, "auto, mpi or nccl", &k);
  case JOB_OPT_TIMEOUT: return job_parse_double("--timeout", v, -HUGE_VAL, HUGE_VAL, &p->timeout);
  case JOB_OPT_LOG_DIR: p->log_dir = v; return SP_OK;
  case JOB_OPT_T5: p->t5 = v; return SP_OK;
  case JOB_OPT_NO_PREVIEW: p->preview = 0; return SP_OK;
  case JOB_OPT_NO_VERIFY: p->verify = 0; return SP_OK;
  case JOB_OPT_TRACE: p->trace = v; return SP_OK;
  case JOB_OPT_PROFILE: p->profile = 1; return SP_OK;
  case JOB_OPT_ORDER:
    if (plan_parse_order(v, &p->order, err, sizeof err) == PLAN_OK) return SP_OK;
    sp_log_error("--order: %s", err);
    return SP_ERR_INPUT;
  case JOB_OPT_STREAM_FRAC:
    return job_parse_double("--stream-frac", v, -HUGE_VAL, HUGE_VAL, &p->stream_frac);
  case JOB_OPT_CHUNK_ROWS:
    return job_parse_int64("--chunk-rows", v, INT64_MIN, INT64_MAX, &p->chunk_rows);
  case JOB_OPT_MEM_TRACE: p->mem_trace = 1; return SP_OK;
  case JOB_OPT_QUIET: p->quiet = 1; return SP_OK;
  case JOB_OPT_PROBE_LINKS: p->probe_links = 1; return SP_OK;
  case JOB_OPT_JSON: p->json = 1; return SP_OK;
  case JOB_OPT_LAYOUT:
    if (plan_grid_parse(v, &p->layout, &p->layout_mode, err, sizeof err) == PLAN_OK) return SP_OK;
    sp_log_error("%s", err);
    return SP_ERR_INPUT;
  case JOB_OPT_SPEED: return set_speed(p, v);
  case JOB_OPT_VAE: p->vae = v; return SP_OK;
  case JOB_OPT_PRECISION: {
    wan_precision w;
    if (wan_precision_parse(v, &w) != SP_OK) return SP_ERR_INPUT;
    p->precision = 1 + (int)w; /* JOB_PRECISION_BF16, _FP8 or _INT8 */
    return SP_OK;
  }
  case JOB_OPT_FP8_ACCUM: {
    static const char *const accum[] = {"full", "fast"};
    return set_word("--fp8-accum", v, accum, 2, "full or fast", &p->fp8_fast_accum);
  }
  case JOB_OPT_VAE_PRECISION:
    return wan_vae_gpu_precision_parse(v, &p->vae_precision);
  case JOB_OPT_LORA:
    if (p->nlora == RANK_LORA_MAX) {
      sp_log_error("--lora: given more than %d times", RANK_LORA_MAX);
      return SP_ERR_INPUT;
    }
    if (rank_lora_spec_parse(v, &p->lora[p->nlora], err, sizeof err) != SP_OK) {
      sp_log_error("--lora '%s': %s (the form is FILE[:STRENGTH][@high|@low])", v, err);
      return SP_ERR_INPUT;
    }
    p->nlora++;
    return SP_OK;
  case JOB_OPT_LORA_MODE: return rank_lora_mode_parse(v, &p->lora_mode);
  default: sp_log_error("job option %d does not exist", id); return SP_ERR_INPUT;
  }
}

int job_params_set(job_params *p, int id, const char *v) {
  const job_option *opt = job_option_get(id);
  if (opt && opt->per_job) return job_spec_set(&p->job, id, v, NULL);
  return set_run_option(p, id, v);
}

void job_params_default(job_params *p) {
  memset(p, 0, sizeof *p);
  p->verify = p->preview = 1;
  p->stream_frac = -1; /* --stream-frac not given: the budget decides */
  p->chunk_rows = -1;  /* --chunk-rows not given: the planner decides */
  for (int i = 0; i < JOB_OPT_COUNT; i++)
    if (job_option_get(i)->def && job_params_set(p, i, job_option_get(i)->def) != SP_OK)
      sp_fatal("the default of --%s does not parse", job_option_get(i)->name);
  p->job.steps_given = 0; /* defaults, not given */
  p->job.cfg_given = p->job.shift_given = 0;
  p->job.frames_given = p->job.size_given = p->job.fps_given = 0;
}
