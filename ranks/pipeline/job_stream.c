/* --jobs as a stream (standard input or a named pipe): rank 0 reads one
 * line at a time as it arrives, checks it, and hands the job to every rank;
 * the model stays loaded for the whole queue. And the report of each
 * finished job (a log line, and with run --json one JSON line on stdout),
 * for streams and files alike. See jobs.h. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "job_session_impl.h"
#include "json_out.h"
#include "log.h"

/* The tag of the word rank 0 sends each rank before every streamed job:
 * apart from the pipeline's (pipeline.c: from 10 up to a few hundred). */
enum { TAG_STREAM = 30000 };

int job_jobs_is_stream(const char *jobs) {
  if (!jobs) return 0;
  if (strcmp(jobs, "-") == 0) return 1;
  struct stat st;
  return stat(jobs, &st) == 0 && S_ISFIFO(st.st_mode);
}

int job_stream_open(job_session *s) {
  int rc = SP_OK;
  comm_set_phase("opening the jobs stream");
  if (s->w->rank == 0) rc = job_reader_open(s->params.jobs, &s->reader);
  return job_phase(s->w, rc, "opening the jobs stream");
}

void job_stream_close(job_session *s) {
  job_reader_close(s->reader);
  s->reader = NULL;
}

/* Rank 0: what a streamed line must fit besides its own rules: the plan
 * made before the first line (from the command line's job: its latent
 * size and guidance), and the LoRAs loaded with the model. Its image
 * latents are read here: they set its size. */
static void stream_check(job_session *s, job_spec *j) {
  const char *name = job_reader_name(s->reader);
  char where[JOB_PATH + 32];
  snprintf(where, sizeof where, "%s:%d", name, j->line);
  const rank_model_info *mi = rank_model_get_info(s->m);
  if (job_spec_check_model(j, mi, where) != SP_OK || job_image_stream(s, j) != SP_OK) {
    job_spec_mark_bad(j);
    return;
  }
  const int64_t tokens = job_tokens(j, &mi->config);
  if (tokens > s->stream_tokens) {
    sp_log_error("%s: frames=%lld size=%lldx%lld is %lld tokens, more than the %lld the run "
                 "was planned for (--frames and --size on the command line: give the largest "
                 "a streamed line may ask for)",
                 where, (long long)j->frames, (long long)j->height, (long long)j->width,
                 (long long)tokens, (long long)s->stream_tokens);
    job_spec_mark_bad(j);
    return;
  }
  if (job_micro_batches(j) > s->slots_per_job) {
    sp_log_error("%s: cfg=%g needs two prompts per step; the run was planned with --cfg 1 "
                 "(one): give a --cfg other than 1 on the command line",
                 where, j->cfg);
    job_spec_mark_bad(j);
    return;
  }
  rank_lora_spec want[RANK_LORA_MAX], base[RANK_LORA_MAX];
  const int n = job_spec_loras(&s->params, j, want);
  const int nb = job_spec_loras(&s->params, &s->params.job, base);
  if (j->prompt[0]) {
    /* The encoder is freed before the model is placed (job_prompt.c). */
    sp_log_error("%s: prompt= on a streamed line is refused (the text encoder runs "
                 "before the model is placed): make its cond file with 'staticpipe encode' "
                 "and give cond=", where);
    job_spec_mark_bad(j);
    return;
  }
  if (!job_loras_same(want, n, base, nb)) {
    sp_log_error("%s: lora= on a streamed line is refused (a stream takes the LoRAs "
                 "of --lora for every job)",
                 where);
    job_spec_mark_bad(j);
  }
}

int job_stream_next(job_session *s) {
  const comm_world *w = s->w;
  /* got: 1 a job, 0 the end of the input, -1 a read error. */
  int32_t got = 0;
  job_spec *j = &s->jobs[0];
  if (w->rank == 0) {
    char phase[JOB_PATH + 48];
    snprintf(phase, sizeof phase, "waiting for a job on %s", job_reader_name(s->reader));
    comm_set_phase(phase);
    job_images_free(s->images); /* the previous line's */
    s->images = NULL;
    got = job_reader_next(s->reader, &s->params, j);
    if (got == 1 && !j->bad) stream_check(s, j);
  }
  /* The others wait gently (polling, judged by the watchdog) while rank 0
   * waits for the writer, however long that is. */
  if (w->size > 1) {
    comm_set_phase("waiting for the next job from rank 0");
    comm_req *reqs = sp_xcalloc((size_t)w->size, sizeof *reqs);
    if (w->rank == 0) {
      for (int r = 1; r < w->size; r++) comm_isend(w, &got, sizeof got, r, TAG_STREAM, &reqs[r]);
      for (int r = 1; r < w->size; r++)
        comm_wait(w, &reqs[r], s->params.timeout, "handing out the next job", NULL);
    } else {
      comm_irecv(w, &got, sizeof got, 0, TAG_STREAM, &reqs[0]);
      comm_wait(w, &reqs[0], 0, "waiting for the next job from rank 0", NULL);
    }
    free(reqs);
  }
  if (got == 1) comm_bcast(w, j, sizeof *j, 0);
  if (got < 0) s->stream_rc = SP_ERR_INPUT;
  return got == 1;
}

/* ---- the report of each finished job ---- */

/* Paths, prompts and messages may hold any bytes: io_json_string keeps
 * the line valid UTF-8. */
static void json_str(json_object *o, const char *key, const char *v) {
  json_object_object_add(o, key, io_json_string(v));
}

/* One JSON line: the job's outputs, settings, time and status. */
static void report_json(const job_session *s, const job_spec *j, int rc, double secs) {
  json_object *o = json_object_new_object();
  json_object *job = json_object_new_object();
  json_object_object_add(o, "job", job);
  json_object_object_add(job, "line", json_object_new_int(j->line));
  json_str(job, "status", rc == SP_OK ? "ok" : "error");
  if (rc != SP_OK) json_str(job, "error", j->error[0] ? j->error : "(no message)");
  json_str(job, "cond", j->cond);
  if (j->prompt[0]) { /* the texts it encoded ("" negative: Wan's own) */
    json_str(job, "prompt", j->prompt);
    json_str(job, "negative", j->negative);
  }
  json_str(job, "out", j->out);
  if (rc == SP_OK && s->params.preview && j->out[0]) {
    char png[JOB_PATH + 8];
    snprintf(png, sizeof png, "%s.png", j->out);
    json_str(job, "preview", png);
  }
  if (j->video[0]) json_str(job, "video", j->video);
  if (j->noise[0])
    json_str(job, "noise", j->noise);
  else
    json_object_object_add(job, "seed", json_object_new_uint64(j->seed));
  json_object_object_add(job, "frames", json_object_new_int64(j->frames));
  char size[64];
  snprintf(size, sizeof size, "%lldx%lld", (long long)j->height, (long long)j->width);
  json_str(job, "size", size);
  json_object_object_add(job, "steps", json_object_new_int(j->steps));
  json_object_object_add(job, "cfg", json_object_new_double(j->cfg));
  if (rank_model_get_info(s->m)->experts.count > 1) {
    json_object_object_add(job, "cfg_low", json_object_new_double(j->cfg_low));
    json_object_object_add(job, "boundary", json_object_new_double(j->boundary));
  }
  json_object_object_add(job, "shift", json_object_new_double(j->shift));
  json_str(job, "sampler", rank_sampler_kind_name(j->sampler));
  if (j->sched != RANK_SCHEDULE_SHIFTED) {
    char list[RANK_SCHEDULE_MAX_LIST * 26];
    job_schedule_format(j, list, sizeof list);
    json_str(job, job_schedule_key(j), list);
  }
  if (j->cache.method != RANK_CACHE_OFF) {
    char spec[64];
    rank_cache_format(&j->cache, spec, sizeof spec);
    json_str(job, "cache", spec);
  }
  json_object_object_add(job, "seconds", json_object_new_double(secs));
  printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
  fflush(stdout);
  json_object_put(o);
}

void job_report(job_session *s, int i, int rc, double secs) {
  job_spec *j = &s->jobs[i];
  if (rc == SP_OK) {
    s->ndone++;
  } else {
    s->nfailed++;
    /* The cause: the line's own refusal, else the last error this rank
     * logged (its own, or the failed rank's line that comm_phase_end
     * brought). */
    if (!j->error[0]) snprintf(j->error, sizeof j->error, "%s", sp_log_last_error());
  }
  if (s->w->rank != 0) return;
  if (s->stream && rc != SP_OK)
    sp_log_warn("jobs: %s:%d (out=%s) failed", job_reader_name(s->reader), j->line,
                j->out[0] ? j->out : "?");
  if (s->params.json) report_json(s, j, rc, secs);
}

void job_stream_summary(const job_session *s) {
  const int n = s->ndone + s->nfailed;
  const char *name = job_reader_name(s->reader);
  if (s->nfailed || s->stream_rc != SP_OK)
    sp_log_warn("jobs: %d of %d done, %d failed (%s)%s", s->ndone, n, s->nfailed, name,
                s->stream_rc != SP_OK ? "; the stream ended on a read error" : "");
  else
    sp_log_info("jobs: %d of %d done, %d failed (%s)", s->ndone, n, s->nfailed, name);
}
