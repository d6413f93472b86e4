/* The job's options: the setters from text and the validator that holds
 * every limit (see job.h); the table of flags is job_opts_table.c. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "layout_grid.h"
#include "log.h"
#include "video_out.h"

#include "job_limits.h"

/* ---- number parsers ---- */

int job_parse_int64(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end || errno == ERANGE || v < lo || v > hi) {
    if (lo == INT64_MIN && hi == INT64_MAX)
      sp_log_error("%s: '%s' is not an integer", flag, s);
    else
      sp_log_error("%s: '%s' is not an integer in %lld..%lld", flag, s, (long long)lo,
                   (long long)hi);
    return SP_ERR_INPUT;
  }
  *out = v;
  return SP_OK;
}

int job_parse_uint64(const char *flag, const char *s, uint64_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = *s && *s != '-' ? strtoull(s, &end, 10) : 0;
  if (!end || *end || errno == ERANGE) {
    sp_log_error("%s: '%s' is not a non-negative 64-bit integer", flag, s);
    return SP_ERR_INPUT;
  }
  *out = v;
  return SP_OK;
}

int job_parse_double(const char *flag, const char *s, double lo, double hi, double *out) {
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (!*s || *end || errno == ERANGE || !isfinite(v) || v < lo || v > hi) {
    if (isinf(lo) && isinf(hi))
      sp_log_error("%s: '%s' is not a number", flag, s);
    else
      sp_log_error("%s: '%s' is not a number in %g..%g", flag, s, lo, hi);
    return SP_ERR_INPUT;
  }
  *out = v;
  return SP_OK;
}

int job_parse_size_hw(const char *flag, const char *s, int64_t *h, int64_t *w) {
  /* HEIGHTxWIDTH, or WIDTH*HEIGHT as the Wan repository's --size writes it
   * (832*480 is 480x832). */
  const char *x = strchr(s, '*');
  int width_first = x != NULL;
  if (!x) x = strchr(s, 'x');
  if (!x) x = strchr(s, 'X');
  char buf[64];
  if (!x || (size_t)(x - s) >= sizeof buf) goto bad;
  memcpy(buf, s, (size_t)(x - s));
  buf[x - s] = '\0';
  char *end = NULL;
  errno = 0;
  long long av = strtoll(buf, &end, 10);
  if (!buf[0] || *end || errno) goto bad;
  long long bv = strtoll(x + 1, &end, 10);
  if (!x[1] || *end || errno) goto bad;
  long long hv = width_first ? bv : av, wv = width_first ? av : bv;
  if (hv < 1 || hv > JOB_SIDE_MAX || wv < 1 || wv > JOB_SIDE_MAX) goto bad;
  *h = hv;
  *w = wv;
  return SP_OK;
bad:
  sp_log_error("%s: '%s' is not HEIGHTxWIDTH (for example 480x832) or WIDTH*HEIGHT (832*480), "
               "each in 1..%d",
               flag, s, JOB_SIDE_MAX);
  return SP_ERR_INPUT;
}

/* ---- setters: syntax only ---- */

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
  double vals[RANK_SCHEDULE_MAX_LIST + 1];
  int n = 0;
  const char *p = v;
  for (;;) {
    char *end = NULL;
    errno = 0;
    double x = strtod(p, &end);
    if (end == p || errno == ERANGE || !isfinite(x) || (*end && *end != ',')) {
      sp_log_error("%s: '%s' is not a comma-separated list of numbers", flag, v);
      return SP_ERR_INPUT;
    }
    if (n == RANK_SCHEDULE_MAX_LIST + 1) {
      sp_log_error("%s: more than %d values", flag, RANK_SCHEDULE_MAX_LIST);
      return SP_ERR_INPUT;
    }
    vals[n++] = x;
    if (!*end) break;
    p = end + 1;
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

int job_spec_loras(const job_opts *o, const job_spec *j, rank_lora_spec *out) {
  if (!j->lora_given) {
    memcpy(out, o->lora, (size_t)o->nlora * sizeof *out);
    return o->nlora;
  }
  int n = 0;
  char one[JOB_LORA_TEXT], err[256];
  for (const char *p = j->lora, *nl; *p && n < RANK_LORA_MAX; p = nl + 1) {
    nl = strchr(p, '\n');
    if (!nl) break;
    memcpy(one, p, (size_t)(nl - p));
    one[nl - p] = '\0';
    /* Parsed once already by set_job_lora: it cannot fail here. */
    if (rank_lora_spec_parse(one, &out[n], err, sizeof err) != SP_OK)
      sp_fatal("internal: lora=%s parsed before does not now: %s", one, err);
    n++;
  }
  return n;
}

int job_loras_same(const rank_lora_spec *a, int na, const rank_lora_spec *b, int nb) {
  if (na != nb) return 0;
  for (int i = 0; i < na; i++)
    if (strcmp(a[i].path, b[i].path) != 0 || a[i].strength != b[i].strength ||
        a[i].expert != b[i].expert)
      return 0;
  return 1;
}

/* "G" (both experts) or "HIGH,LOW". */
static int set_cfg(job_spec *j, const char *flag, const char *v) {
  const char *comma = strchr(v, ',');
  j->cfg_given = 1;
  if (!comma) {
    j->cfg_pair = 0;
    int rc = job_parse_double(flag, v, -HUGE_VAL, HUGE_VAL, &j->cfg);
    j->cfg_low = j->cfg;
    return rc;
  }
  char high[64];
  size_t n = (size_t)(comma - v);
  if (n == 0 || n >= sizeof high || strchr(comma + 1, ',')) {
    sp_log_error("%s: '%s' is not G or HIGH,LOW", flag, v);
    return SP_ERR_INPUT;
  }
  memcpy(high, v, n);
  high[n] = '\0';
  j->cfg_pair = 1;
  if (job_parse_double(flag, high, -HUGE_VAL, HUGE_VAL, &j->cfg) != SP_OK) return SP_ERR_INPUT;
  return job_parse_double(flag, comma + 1, -HUGE_VAL, HUGE_VAL, &j->cfg_low);
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
  case JOB_OPT_FPS: return job_parse_double(flag, v, -HUGE_VAL, HUGE_VAL, &j->fps);
  case JOB_OPT_SEED: return job_parse_uint64(flag, v, &j->seed);
  case JOB_OPT_FRAMES: return job_parse_int64(flag, v, INT64_MIN, INT64_MAX, &j->frames);
  case JOB_OPT_SIZE: return job_parse_size_hw(flag, v, &j->height, &j->width);
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

int job_opts_set(job_opts *o, int id, const char *v) {
  const job_option *opt = job_option_get(id);
  if (opt && opt->per_job) return job_spec_set(&o->job, id, v, NULL);
  char err[256];
  switch (id) {
  case JOB_OPT_MODEL: o->model = v; break;
  case JOB_OPT_SAVE_NOISE: o->save_noise = v; break;
  case JOB_OPT_JOBS: o->jobs = v; break;
  case JOB_OPT_BUDGET: o->budget = v; break;
  case JOB_OPT_DEVICE: o->device = v; break;
  case JOB_OPT_DEVICES: o->devices = v; break;
  case JOB_OPT_ATTN: return kern_attn_backend_parse(v, &o->attn);
  case JOB_OPT_TRANSPORT: return comm_transport_parse(v, &o->transport);
  case JOB_OPT_TIMEOUT: return job_parse_double("--timeout", v, -HUGE_VAL, HUGE_VAL, &o->timeout);
  case JOB_OPT_LOG_DIR: o->log_dir = v; break;
  case JOB_OPT_T5: o->t5 = v; break;
  case JOB_OPT_NO_PREVIEW: o->preview = 0; break;
  case JOB_OPT_NO_VERIFY: o->verify = 0; break;
  case JOB_OPT_TRACE: o->trace = v; break;
  case JOB_OPT_PROFILE: o->profile = 1; break;
  case JOB_OPT_ORDER:
    if (plan_parse_order(v, &o->order, err, sizeof err) != PLAN_OK) {
      sp_log_error("--order: %s", err);
      return SP_ERR_INPUT;
    }
    break;
  case JOB_OPT_STREAM_FRAC:
    return job_parse_double("--stream-frac", v, -HUGE_VAL, HUGE_VAL, &o->stream_frac);
  case JOB_OPT_CHUNK_ROWS:
    return job_parse_int64("--chunk-rows", v, INT64_MIN, INT64_MAX, &o->chunk_rows);
  case JOB_OPT_MEM_TRACE: o->mem_trace = 1; break;
  case JOB_OPT_QUIET: o->quiet = 1; break;
  case JOB_OPT_PROBE_LINKS: o->probe_links = 1; break;
  case JOB_OPT_LAYOUT:
    if (plan_grid_parse(v, &o->layout, &o->layout_mode, err, sizeof err) != PLAN_OK) {
      sp_log_error("%s", err);
      return SP_ERR_INPUT;
    }
    break;
  case JOB_OPT_SPEED: return job_speed_parse(v, o);
  case JOB_OPT_VAE: o->vae = v; break;
  case JOB_OPT_PRECISION:
    if (strcmp(v, "bf16") != 0 && strcmp(v, "fp8") != 0 && strcmp(v, "int8") != 0) {
      sp_log_error("--precision: '%s' is not bf16, fp8 or int8", v);
      return SP_ERR_INPUT;
    }
    o->precision = strcmp(v, "fp8") == 0    ? JOB_PRECISION_FP8
                   : strcmp(v, "int8") == 0 ? JOB_PRECISION_INT8
                                            : JOB_PRECISION_BF16;
    break;
  case JOB_OPT_VAE_PRECISION:
    if (strcmp(v, "bf16") == 0) {
      o->vae_precision = WAN_VAE_GPU_BF16;
    } else if (strcmp(v, "fp32") == 0) {
      o->vae_precision = WAN_VAE_GPU_FP32;
    } else {
      sp_log_error("--vae-precision: '%s' is not bf16 or fp32", v);
      return SP_ERR_INPUT;
    }
    break;
  case JOB_OPT_LORA:
    if (o->nlora == RANK_LORA_MAX) {
      sp_log_error("--lora: given more than %d times", RANK_LORA_MAX);
      return SP_ERR_INPUT;
    }
    if (rank_lora_spec_parse(v, &o->lora[o->nlora], err, sizeof err) != SP_OK) {
      sp_log_error("--lora '%s': %s (the form is FILE[:STRENGTH][@high|@low])", v, err);
      return SP_ERR_INPUT;
    }
    o->nlora++;
    break;
  case JOB_OPT_LORA_MODE: return rank_lora_mode_parse(v, &o->lora_mode);
  default: sp_log_error("job option %d does not exist", id); return SP_ERR_INPUT;
  }
  return SP_OK;
}

void job_opts_default(job_opts *o) {
  memset(o, 0, sizeof *o);
  o->verify = o->preview = 1;
  o->stream_frac = -1; /* --stream-frac not given: the budget decides */
  o->chunk_rows = -1;  /* --chunk-rows not given: the planner decides */
  for (int i = 0; i < JOB_OPT_COUNT; i++)
    if (job_option_get(i)->def && job_opts_set(o, i, job_option_get(i)->def) != SP_OK)
      sp_fatal("the default of --%s does not parse", job_option_get(i)->name);
  o->job.steps_given = 0; /* defaults, not given */
  o->job.cfg_given = o->job.shift_given = 0;
}

/* ---- the validator ---- */

/* Logs "where: key=value what" or "--key: value what" (what a printf
 * format); returns SP_ERR_INPUT. */
static int refuse(const char *where, const char *key, const char *value, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int refuse(const char *where, const char *key, const char *value, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (where)
    sp_log_error("%s: %s=%s %s", where, key, value, what);
  else
    sp_log_error("--%s: '%s' %s", key, value, what);
  return SP_ERR_INPUT;
}

int job_spec_check(const job_spec *j, const char *where) {
  char v[64];
  snprintf(v, sizeof v, "%" PRId64, j->frames);
  if (j->frames < 1 || j->frames > JOB_FRAMES_MAX)
    return refuse(where, "frames", v, "is out of range: frames are 1..%d", JOB_FRAMES_MAX);
  if ((j->frames - 1) % 4 != 0)
    return refuse(where, "frames", v, "is not of the form 4k+1 (81, 41, 17, 5, 1, ...)");
  snprintf(v, sizeof v, "%" PRId64 "x%" PRId64, j->height, j->width);
  if (j->height < 16 || j->width < 16 || j->height > JOB_SIDE_MAX || j->width > JOB_SIDE_MAX ||
      j->height % 16 || j->width % 16)
    return refuse(where, "size", v, "is not valid: height and width must be multiples of 16");
  snprintf(v, sizeof v, "%d", j->steps);
  if (j->steps < 1 || j->steps > JOB_STEPS_MAX)
    return refuse(where, "steps", v, "is out of range: steps are 1..%d", JOB_STEPS_MAX);
  snprintf(v, sizeof v, j->cfg_pair ? "%g,%g" : "%g", j->cfg, j->cfg_low);
  if (!(j->cfg >= 0 && j->cfg <= JOB_CFG_MAX && j->cfg_low >= 0 && j->cfg_low <= JOB_CFG_MAX))
    return refuse(where, "cfg", v, "is out of range: the guidance scale is 0..%d", JOB_CFG_MAX);
  snprintf(v, sizeof v, "%g", j->boundary);
  if (j->boundary_given && !(j->boundary > 0 && j->boundary < 1))
    return refuse(where, "boundary", v,
                  "is out of range: the boundary is a fraction of the 1000 training timesteps, "
                  "0 < B < 1");
  snprintf(v, sizeof v, "%g", j->shift);
  if (!(j->shift >= JOB_SHIFT_MIN && j->shift <= JOB_SHIFT_MAX))
    return refuse(where, "shift", v, "is out of range: the shift is %g..%g", JOB_SHIFT_MIN,
                  (double)JOB_SHIFT_MAX);
  snprintf(v, sizeof v, "%g", j->fps);
  if (!(j->fps >= 1 && j->fps <= JOB_FPS_MAX))
    return refuse(where, "fps", v, "is out of range: 1..%d frames per second", JOB_FPS_MAX);
  if (j->sched == RANK_SCHEDULE_SHIFTED) return SP_OK;
  snprintf(v, sizeof v, "%d", j->steps);
  if (j->steps != j->sched_n)
    return refuse(where, "steps", v, "disagrees with the %d values of %s (leave steps out)",
                  j->sched_n, job_schedule_key(j));
  float *sg = sp_xmalloc(((size_t)j->sched_n + 1) * sizeof *sg);
  int64_t *ts = sp_xmalloc((size_t)j->sched_n * sizeof *ts);
  int rc = job_schedule_make(j, where, sg, ts);
  free(sg);
  free(ts);
  return rc;
}

/* ---- explicit schedules ---- */

const char *job_schedule_key(const job_spec *j) {
  return j->sched == RANK_SCHEDULE_TIMESTEPS ? "timesteps"
         : j->sched == RANK_SCHEDULE_SIGMAS  ? "sigmas"
                                             : NULL;
}

void job_schedule_format(const job_spec *j, char *buf, size_t n) {
  size_t o = 0;
  buf[0] = '\0';
  for (int i = 0; j->sched != RANK_SCHEDULE_SHIFTED && i < j->sched_n && o < n; i++)
    o += (size_t)snprintf(buf + o, n - o, "%s%.17g", i ? "," : "", j->sched_v[i]);
}

int job_schedule_make(const job_spec *j, const char *where, float *sigmas, int64_t *timesteps) {
  if (j->sched == RANK_SCHEDULE_SHIFTED)
    return rank_schedule_make(j->steps, j->shift, sigmas, timesteps);
  char err[256], list[512];
  if (rank_schedule_explicit(j->sched, j->sched_n, j->sched_v, j->shift, sigmas, timesteps, err,
                             sizeof err) == SP_OK)
    return SP_OK;
  job_schedule_format(j, list, sizeof list);
  return refuse(where, job_schedule_key(j), list, "%s", err);
}

/* run's rules: what must be given, and what goes only with what. */
static int check_run(const job_opts *o) {
  const job_spec *j = &o->job;
  if (o->jobs && o->save_noise) {
    sp_log_error("run: --save-noise is for a single run, not --jobs");
    return SP_ERR_INPUT;
  }
  if (o->jobs && (j->cond[0] || j->out[0] || j->noise[0] || j->video[0])) {
    sp_log_error("run: --jobs takes cond=, out=, noise= and video= from each line, not --cond/"
                 "--out/--noise/--video");
    return SP_ERR_INPUT;
  }
  if (j->video[0] && !o->vae) {
    sp_log_error("run: --video needs --vae (the VAE decoder that makes frames of latents)");
    return SP_ERR_INPUT;
  }
  if (o->vae && !o->jobs && !j->video[0]) {
    sp_log_error("run: --vae is given but no --video to decode into");
    return SP_ERR_INPUT;
  }
  if (job_prompt_check_run(o) != SP_OK) return SP_ERR_INPUT;
  const char *missing = !o->model ? "--model" : o->jobs ? NULL
                        : !j->cond[0] && !j->prompt[0] ? "--cond"
                        : !j->out[0] ? "--out" : NULL;
  if (missing) {
    sp_log_error("run: %s is required%s", missing,
                 strcmp(missing, "--cond") == 0 ? " (or --t5 and --prompt)" : "");
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

int job_opts_check(job_opts *o, int what) {
  if ((what & JOB_CHECK_RUN) && check_run(o) != SP_OK) return SP_ERR_INPUT;
  if (job_spec_check(&o->job, NULL) != SP_OK) return SP_ERR_INPUT;
  char v[64];
  snprintf(v, sizeof v, "%g", o->timeout);
  if (!(o->timeout >= JOB_TIMEOUT_MIN && o->timeout <= JOB_TIMEOUT_MAX))
    return refuse(NULL, "timeout", v, "is out of range: %d..%d seconds", JOB_TIMEOUT_MIN,
                  JOB_TIMEOUT_MAX);
  snprintf(v, sizeof v, "%g", o->stream_frac);
  if (o->stream_frac != -1 && !(o->stream_frac >= 0 && o->stream_frac <= 1))
    return refuse(NULL, "stream-frac", v, "is out of range: a fraction 0..1");
  snprintf(v, sizeof v, "%" PRId64, o->chunk_rows);
  if (o->chunk_rows != -1 && !(o->chunk_rows >= 1 && o->chunk_rows <= JOB_CHUNK_ROWS_MAX))
    return refuse(NULL, "chunk-rows", v, "is out of range: 1..2^%d tokens", JOB_CHUNK_ROWS_LOG2);
  if ((what & JOB_CHECK_DEVICE) && rank_device_parse(o->device, &o->dev) != SP_OK)
    return SP_ERR_INPUT;
  return SP_OK;
}
