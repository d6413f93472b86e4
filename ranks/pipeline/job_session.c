/* The session's life (see job_session.h): opens the world's log, watchdog,
 * device, transport, model and VAE; reads the jobs and makes the one plan
 * they share; at the end logs the --jobs summary, gathers what every rank
 * did, and closes everything. Running the jobs is job_run.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_session_impl.h"
#include "log.h"
#include "pipeline.h"
#include "trace.h"

int job_session_fail(job_session *s, int rc) {
  if (rc != SP_OK) s->fatal = 1;
  return rc;
}

int job_session_open(const comm_world *w, const job_params *p, job_session **out) {
  job_session *s = sp_xcalloc(1, sizeof *s);
  s->w = w;
  s->params = *p;
  s->lora_mode = p->lora_mode;
  *out = s;
  job_params *o = &s->params;
  int rc = o->log_dir ? comm_log_open_dir(w, o->log_dir) : SP_OK;
  if ((rc = job_phase(w, rc, "opening its log file")) != SP_OK) return job_session_fail(s, rc);
  /* From here on a silent or stuck peer ends the job after --timeout. */
  rc = comm_watchdog_start(w, o->timeout);
  if ((rc = job_phase(w, rc, "starting the watchdog")) != SP_OK) return job_session_fail(s, rc);

  comm_set_phase("choosing the device");
  rc = job_device_resolve(o, &s->dev);
  if (rc == SP_OK) rc = job_pick_gpu(s);
  if ((rc = job_phase(w, rc, "choosing its device")) != SP_OK) return job_session_fail(s, rc);

  /* CUDA stages keep their activation buffers on the device: NCCL moves
   * them between GPUs of their own, host-staged MPI between ranks that
   * share a GPU (comm/transport.h). */
  comm_transport_kind want = COMM_TRANSPORT_AUTO, tk = COMM_TRANSPORT_MPI;
  comm_set_phase("choosing the transport");
  rc = comm_transport_parse(o->transport, &want);
  if (rc == SP_OK)
    rc = comm_transport_choose(w, want, s->dev == RANK_DEVICE_CUDA, &s->gpu, &tk);
  if (rc == SP_OK) rc = comm_transport_open(w, tk, s->cuda_device, &s->tp);
  if ((rc = job_phase(w, rc, "opening the transport")) != SP_OK) return job_session_fail(s, rc);

  comm_set_phase("opening the model");
  rc = rank_model_open(o->model, o->verify, &s->m);
  if ((rc = job_phase(w, rc, "opening the model")) != SP_OK) return job_session_fail(s, rc);
  /* A two-expert model's defaults fill what the command line left out;
   * rank 0 decides (and reports) and every rank takes its job. */
  rc = w->rank == 0 ? job_params_apply_model(o, rank_model_get_info(s->m)) : SP_OK;
  /* --fp8-accum fast on the CPU: after the precision's own rules */
  if (rc == SP_OK && w->rank == 0) rc = rank_stage_fp8_accum_check(s->dev, o->fp8_fast_accum);
  if ((rc = job_phase(w, rc, "checking the options against the model")) != SP_OK)
    return job_session_fail(s, rc);
  comm_bcast(w, &o->job, sizeof o->job, 0);
  if (!o->vae) return SP_OK;
  comm_set_phase("opening the VAE");
  rc = job_vae_open("--vae", o->vae, o->verify, &rank_model_get_info(s->m)->config, o->model,
                    &s->vae);
  return job_session_fail(s, job_phase(w, rc, "opening the VAE"));
}

/* Rank 0 reads the jobs file; every rank gets the same list. */
static int read_jobs(job_session *s) {
  const comm_world *w = s->w;
  comm_set_phase("reading the jobs file");
  int rc = SP_OK, count = 0;
  job_spec *list = NULL;
  if (w->rank == 0) rc = job_file_read(&s->params, &list, &count);
  for (int i = 0; w->rank == 0 && rc == SP_OK && i < count; i++) {
    char where[JOB_PATH + 32];
    snprintf(where, sizeof where, "%s:%d", s->params.jobs, list[i].line);
    if (!list[i].bad && job_spec_check_model(&list[i], rank_model_get_info(s->m), where) != SP_OK)
      job_spec_mark_bad(&list[i]);
  }
  if ((rc = job_phase(w, rc, "reading the jobs file")) != SP_OK) {
    free(list);
    return rc;
  }
  comm_bcast(w, &count, sizeof count, 0);
  if (w->rank != 0) list = sp_xcalloc((size_t)count, sizeof *list);
  comm_bcast(w, list, (size_t)count * sizeof *list, 0);
  s->jobs = list;
  s->njobs = count;
  return SP_OK;
}

int job_session_plan(job_session *s) {
  const comm_world *w = s->w;
  const wan_config *c = &rank_model_get_info(s->m)->config;
  s->single = s->params.jobs == NULL;
  s->stream = !s->single && job_jobs_is_stream(s->params.jobs);
  int rc = SP_OK;
  if (s->single || s->stream) {
    /* A stream's lines come later: its plan and LoRAs are the command
     * line's job's, the defaults of its lines. */
    s->jobs = sp_xcalloc(1, sizeof *s->jobs);
    s->jobs[0] = s->params.job;
    s->njobs = 1;
    if (s->stream && (rc = job_stream_open(s)) != SP_OK) return job_session_fail(s, rc);
  } else if ((rc = read_jobs(s)) != SP_OK) {
    return job_session_fail(s, rc);
  }
  s->job_rc = sp_xcalloc((size_t)s->njobs, sizeof *s->job_rc);
  for (int i = 0; i < s->njobs; i++) s->cache_any |= s->jobs[i].cache.method != RANK_CACHE_OFF;
  /* Before anything is placed: the text encoder's memory is free again
   * when the blocks load. */
  if ((rc = job_prompts_encode(s)) != SP_OK) return job_session_fail(s, rc);
  /* The images too (their size is the jobs' size: before the plan). */
  if ((rc = job_images_prepare(s)) != SP_OK) return job_session_fail(s, rc);
  if ((rc = job_setup_loras(s)) != SP_OK) return job_session_fail(s, rc);
  /* One plan for every job: the largest latent and, with CFG anywhere, two
   * micro-batches (the split does not change the latents, so a job gives
   * the same result as when it runs alone). Prompt slots: each job in
   * flight holds its one or two. Up to one job per stage is in flight:
   * more would fill nothing. */
  s->in_flight = s->single || s->stream ? 1
                 : (w->size < RANK_PIPE_MAX_JOBS ? w->size : RANK_PIPE_MAX_JOBS);
  plan_workload wl;
  const int best = job_workload_of(s->jobs, s->njobs, c, s->in_flight, &wl);
  s->slots_per_job = best < 0 ? 1 : wl.micro_batches / s->in_flight;
  s->prompts = best < 0 ? 1 : wl.micro_batches;
  s->stream_tokens = best < 0 ? 0 : plan_tokens(&wl);

  /* One job: its inputs are read and checked before planning, and the plan
   * is for its exact context length. */
  if (s->single) {
    comm_set_phase("reading the inputs");
    rc = job_read_inputs(s, &s->jobs[0], &s->in0);
    if (w->rank == 0 && rc == SP_OK) wl.context_len = s->in0.ctx[0].dims[0];
    if ((rc = job_phase(w, rc, "reading the inputs")) != SP_OK) return job_session_fail(s, rc);
    comm_bcast(w, &wl.context_len, sizeof wl.context_len, 0);
    job_log(s, &s->jobs[0]);
  }
  comm_set_phase("checking the video outputs");
  rc = job_phase(w, s->stream ? SP_OK : job_check_videos(s), "checking the video outputs");
  if (rc != SP_OK) return job_session_fail(s, rc);
  if (s->params.trace) rank_trace_start(w, s->params.trace);
  if (best < 0) return SP_OK; /* every line was bad (each already reported) */
  /* The CUDA decoder's memory on the last rank, counted by the planner. */
  const uint64_t dec = s->vae && s->dev == RANK_DEVICE_CUDA
                           ? job_vae_decoder_bytes(s->vae, s->params.vae_precision, &wl)
                           : 0;
  if ((rc = job_make_plan(s, &wl, dec)) != SP_OK) return job_session_fail(s, rc);
  s->planned = 1;
  s->block_major = s->plan.r[plan_grid_pos_of(&s->plan.grid, w->rank).stage].order == PLAN_ORDER_BLOCK;
  return SP_OK;
}

const plan *job_session_get_plan(const job_session *s) { return s->planned ? &s->plan : NULL; }

/* Rank 0: which jobs failed, and how many of how many were done. */
static void log_jobs_summary(const job_session *s) {
  int failed = 0;
  for (int i = 0; i < s->njobs; i++) {
    if (s->job_rc[i] == SP_OK) continue;
    failed++;
    sp_log_warn("jobs: %s:%d (out=%s) failed", s->params.jobs, s->jobs[i].line,
                s->jobs[i].out[0] ? s->jobs[i].out : "?");
  }
  /* A warning when any failed, so that -q still shows it. */
  if (failed)
    sp_log_warn("jobs: %d of %d done, %d failed (%s)", s->njobs - failed, s->njobs, failed,
                s->params.jobs);
  else
    sp_log_info("jobs: %d of %d done, %d failed (%s)", s->njobs - failed, s->njobs, failed,
                s->params.jobs);
}

int job_session_finish(job_session *s, int rc, job_rank_stats **all) {
  const comm_world *w = s->w;
  *all = NULL;
  if (s->fatal) return rc;
  if (s->params.trace) {
    int trc = job_phase(w, rank_trace_finish(w), "writing the trace");
    if (trc > rc) rc = trc;
  }
  if (s->stream && w->rank == 0)
    job_stream_summary(s);
  else if (!s->single && w->rank == 0)
    log_jobs_summary(s);
  if (!s->planned) return rc;
  const plan_rank *pr = &s->plan.r[plan_grid_pos_of(&s->plan.grid, w->rank).stage];
  s->sum.first = pr->first_block;
  s->sum.last = pr->last_block;
  s->sum.order = s->block_major ? PLAN_ORDER_BLOCK : PLAN_ORDER_MICRO;
  s->sum.plan_peak_bytes = pr->peak_bytes;
  job_rank_stats *a = sp_xcalloc((size_t)w->size, sizeof *a);
  comm_gather(w, &s->sum, sizeof s->sum, a, 0);
  if (w->rank == 0)
    *all = a;
  else
    free(a);
  return rc;
}

void job_session_close(job_session *s) {
  if (!s) return;
  job_stream_close(s);
  free(s->jobs);
  free(s->job_rc);
  job_inputs_free(&s->in0);
  job_prompts_free(s->prompt_ctx);
  free(s->cache_act);
  rank_stage_free(s->stage);
  rank_model_close(s->m);
  job_images_free(s->images);
  job_vae_close(s->vae);
  rank_lora_close(s->lora);
  comm_transport_close(s->tp);
  free(s);
}
