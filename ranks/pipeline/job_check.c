/* The job's rules, in one place (see job_params.h): the ranges of every
 * value, what run needs and what goes with what, -o's video rule, the
 * latent's size, explicit schedules and LoRA lists. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_limits.h"
#include "job_params.h"
#include "job_prompt.h"
#include "jobs.h"
#include "log.h"
#include "video_out.h"

/* The limits the help states are the planner's. */
_Static_assert(JOB_SPEED_MAX == PLAN_SPEED_MAX, "--speed's limit is the planner's");
_Static_assert((INT64_C(1) << JOB_TOKENS_LOG2) == PLAN_TOKENS_MAX, "the planner's token limit");

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

int job_workload_check(const char *what, int64_t frames, int64_t height, int64_t width) {
  if (frames < 1 || frames > JOB_FRAMES_MAX) {
    sp_log_error("%s: %lld frames is out of range: frames are 1..%d", what, (long long)frames,
                 JOB_FRAMES_MAX);
    return SP_ERR_INPUT;
  }
  if (height < 1 || width < 1 || height > JOB_SIDE_MAX || width > JOB_SIDE_MAX) {
    sp_log_error("%s: %lldx%lld pixels is out of range: each side is 1..%d", what,
                 (long long)height, (long long)width, JOB_SIDE_MAX);
    return SP_ERR_INPUT;
  }
  /* The planner's count (plan_tokens): latent frames x (H/16) x (W/16). */
  const int64_t tokens = ((frames - 1) / 4 + 1) * (height / 16) * (width / 16);
  if (tokens > PLAN_TOKENS_MAX) {
    sp_log_error("%s: workload of %lld tokens is outside 1..2^%d", what, (long long)tokens,
                 JOB_TOKENS_LOG2);
    return SP_ERR_INPUT;
  }
  return SP_OK;
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
  char what[JOB_PATH + 64];
  if (where)
    snprintf(what, sizeof what, "%s: frames=%" PRId64 " size=%s", where, j->frames, v);
  else
    snprintf(what, sizeof what, "--frames %" PRId64 " --size %s", j->frames, v);
  if (job_workload_check(what, j->frames, j->height, j->width) != SP_OK) return SP_ERR_INPUT;
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
  snprintf(v, sizeof v, "%" PRId64, j->max_area);
  if (j->max_area != 0 &&
      !(j->max_area >= JOB_AREA_MIN && j->max_area <= (INT64_C(1) << JOB_AREA_LOG2)))
    return refuse(where, "max-area", v, "is out of range: %d..2^%d pixels", JOB_AREA_MIN,
                  JOB_AREA_LOG2);

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

/* ---- -o's video rule ---- */

int job_path_is_video(const char *path) {
  video_out_kind k;
  char err[256];
  return path && path[0] && video_out_kind_of(path, 0, &k, err, sizeof err) == 0 &&
         k == VIDEO_OUT_FFMPEG;
}

int job_spec_video_out(const job_params *p, job_spec *j, const char *where) {
  if (!job_path_is_video(j->out)) return SP_OK;
  char flag[JOB_PATH + 32];
  snprintf(flag, sizeof flag, where ? "%s: out=%s" : "%s-o %s", where ? where : "", j->out);
  if (p->vae && !j->video[0]) { /* -o names the video: decode into it, no latents file */
    memcpy(j->video, j->out, sizeof j->video);
    j->out[0] = '\0';
    return SP_OK;
  }
  sp_log_error("%s: a video file name, but the latents are written as HDF5 (.h5) or a ComfyUI "
               ".latent: %s",
               flag, p->vae ? (where ? "give out=LATENTS.h5 (video= is the video)"
                                     : "give -o LATENTS.h5 (--video is the video)")
                            : (where ? "give out=LATENTS.h5, and video= with --vae for a video"
                                     : "give -o LATENTS.h5 --vae VAE --video FILE, or -o FILE "
                                       "with --vae to write only the video"));
  return SP_ERR_INPUT;
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

/* ---- LoRA lists ---- */

int job_spec_loras(const job_params *p, const job_spec *j, rank_lora_spec *out) {
  if (!j->lora_given) {
    memcpy(out, p->lora, (size_t)p->nlora * sizeof *out);
    return p->nlora;
  }
  int n = 0;
  char one[JOB_LORA_TEXT], err[256];
  for (const char *s = j->lora, *nl; *s && n < RANK_LORA_MAX; s = nl + 1) {
    nl = strchr(s, '\n');
    if (!nl) break;
    memcpy(one, s, (size_t)(nl - s));
    one[nl - s] = '\0';
    /* Parsed once already by job_spec_set: it cannot fail here. */
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

/* ---- image to video ---- */

int job_image_check(const job_params *p, const job_spec *j, const char *where) {
  char v[64];
  snprintf(v, sizeof v, "%" PRId64, j->max_area);
  if (j->image[0] && j->image_latents[0])
    return refuse(where, "image-latents", j->image_latents,
                  "and image exclude each other (image latents are an image encoded already)");
  if (j->max_area && !j->image[0])
    return refuse(where, "max-area", v, "sets the size of an image's job; this job has no image");
  /* A streamed line's image= is refused whatever --vae: job_image_stream
   * says why and what to give instead. */
  if (j->image[0] && !p->vae && !(where && job_jobs_is_stream(p->jobs)))
    return refuse(where, "image", j->image,
                  "needs --vae (the VAE whose encoder encodes it; or give the image encoded "
                  "beforehand with image-latents)");
  return SP_OK;
}

/* ---- the rules between options ---- */

/* run's rules: what must be given, and what goes only with what. */
static int check_run(job_params *p) {
  job_spec *j = &p->job;
  if (p->jobs && p->save_noise) {
    sp_log_error("run: --save-noise is for a single run, not --jobs");
    return SP_ERR_INPUT;
  }
  if (p->jobs && (j->cond[0] || j->out[0] || j->noise[0] || j->video[0] || j->image[0] ||
                  j->image_latents[0])) {
    sp_log_error("run: --jobs takes cond=, out=, noise=, video=, image= and image-latents= from "
                 "each line, not --cond/--out/--noise/--video/--image/--image-latents");
    return SP_ERR_INPUT;
  }
  if (!p->jobs && job_image_check(p, j, NULL) != SP_OK) return SP_ERR_INPUT;
  if (j->video[0] && !p->vae) {
    sp_log_error("run: --video needs --vae (the VAE decoder that makes frames of latents)");
    return SP_ERR_INPUT;
  }
  if (job_spec_video_out(p, j, NULL) != SP_OK) return SP_ERR_INPUT;
  if (p->vae && !p->jobs && !j->video[0] && !j->image[0]) {
    sp_log_error("run: --vae is given but no --video to decode into and no --image to encode");
    return SP_ERR_INPUT;
  }
  if (job_prompt_check_run(p) != SP_OK) return SP_ERR_INPUT;
  const char *missing = !p->model ? "--model" : p->jobs ? NULL
                        : !j->cond[0] && !j->prompt[0] ? "--cond"
                        : !j->out[0] && !j->video[0] ? "--out" : NULL;
  if (missing) {
    sp_log_error("run: %s is required%s", missing,
                 strcmp(missing, "--cond") == 0 ? " (or --t5 and --prompt)" : "");
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

int job_params_check(job_params *p, int what) {
  if ((what & JOB_CHECK_RUN) && check_run(p) != SP_OK) return SP_ERR_INPUT;
  if (job_spec_check(&p->job, NULL) != SP_OK) return SP_ERR_INPUT;
  char v[64];
  snprintf(v, sizeof v, "%g", p->timeout);
  if (!(p->timeout >= JOB_TIMEOUT_MIN && p->timeout <= JOB_TIMEOUT_MAX))
    return refuse(NULL, "timeout", v, "is out of range: %d..%d seconds", JOB_TIMEOUT_MIN,
                  JOB_TIMEOUT_MAX);
  snprintf(v, sizeof v, "%g", p->stream_frac);
  if (p->stream_frac != -1 && !(p->stream_frac >= 0 && p->stream_frac <= 1))
    return refuse(NULL, "stream-frac", v, "is out of range: a fraction 0..1");
  snprintf(v, sizeof v, "%" PRId64, p->chunk_rows);
  if (p->chunk_rows != -1 && !(p->chunk_rows >= 1 && p->chunk_rows <= JOB_CHUNK_ROWS_MAX))
    return refuse(NULL, "chunk-rows", v, "is out of range: 1..2^%d tokens", JOB_CHUNK_ROWS_LOG2);
  return SP_OK;
}
