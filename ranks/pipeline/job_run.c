/* The session: opens the world's devices, transport and model, plans for
 * every job, loads the stage, samples the jobs in groups in flight
 * together, writes each output and gathers what every rank did (see
 * job.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "job.h"
#include "job_session.h"
#include "layout_grid.h"
#include "log.h"
#include "pipeline.h"
#include "trace.h"

/* A failure that ends the session: every later call is a no-op. */
static int session_fail(job_session *s, int rc) {
  if (rc != SP_OK) s->fatal = 1;
  return rc;
}

int job_session_open(const comm_world *w, job_opts *o, job_session **out) {
  job_session *s = sp_xcalloc(1, sizeof *s);
  s->w = w;
  s->o = o;
  *out = s;
  int rc = o->log_dir ? comm_log_open_dir(w, o->log_dir) : SP_OK;
  if ((rc = job_phase(w, rc, "opening its log file")) != SP_OK) return session_fail(s, rc);
  rc = w->rank == 0 ? job_paths_check(o) : SP_OK;
  if ((rc = job_phase(w, rc, "checking the paths")) != SP_OK) return session_fail(s, rc);
  /* From here on a silent or stuck peer ends the job after --timeout. */
  rc = comm_watchdog_start(w, o->timeout);
  if ((rc = job_phase(w, rc, "starting the watchdog")) != SP_OK) return session_fail(s, rc);

  comm_set_phase("choosing the device");
  rc = job_pick_gpu(w, o);
  if ((rc = job_phase(w, rc, "choosing its device")) != SP_OK) return session_fail(s, rc);

  /* CUDA stages keep their activation buffers on the device: NCCL moves
   * them between GPUs of their own, host-staged MPI between ranks that
   * share a GPU (comm/transport.h). */
  comm_transport_kind tk = COMM_TRANSPORT_MPI;
  comm_set_phase("choosing the transport");
  rc = comm_transport_choose(w, o->transport, o->dev == RANK_DEVICE_CUDA, &o->gpu, &tk);
  if (rc == SP_OK) rc = comm_transport_open(w, tk, o->cuda_device, &s->tp);
  if ((rc = job_phase(w, rc, "opening the transport")) != SP_OK) return session_fail(s, rc);

  comm_set_phase("opening the model");
  rc = rank_model_open(o->model, o->verify, &s->m);
  if ((rc = job_phase(w, rc, "opening the model")) != SP_OK) return session_fail(s, rc);
  /* A two-expert model's defaults fill what the command line left out;
   * rank 0 decides (and reports) and every rank takes its job. */
  rc = w->rank == 0 ? job_opts_apply_model(o, rank_model_get_info(s->m)) : SP_OK;
  if ((rc = job_phase(w, rc, "checking the options against the model")) != SP_OK)
    return session_fail(s, rc);
  comm_bcast(w, &o->job, sizeof o->job, 0);
  if (!o->vae) return SP_OK;
  comm_set_phase("opening the VAE");
  rc = vae_model_open(o->vae, o->verify, &s->vae);
  if (rc == SP_OK) {
    const int64_t z = vae_model_get_info(s->vae)->config.z_dim;
    const int64_t out = rank_model_get_info(s->m)->config.out_dim;
    if (z != out) {
      sp_log_error("--vae %s: decodes %lld latent channels; the model %s makes %lld", o->vae,
                   (long long)z, o->model, (long long)out);
      rc = SP_ERR_INPUT;
    }
  }
  return session_fail(s, job_phase(w, rc, "opening the VAE"));
}

/* The decode of one job's video from its latents, on the last rank. */
static decode_opts job_decode_opts(const job_session *s, const job_spec *j) {
  return (decode_opts){.vae = s->o->vae, .verify = s->o->verify, .dev = s->o->dev,
                       .precision = s->o->vae_precision,
                       .out = j->video, .fps = j->fps, .quiet = s->o->quiet};
}

/* Before any work: every job's video= needs --vae and, on the last rank
 * (which writes it), a path and an encoder that work. A job that fails a
 * check is marked bad on every rank (a single run ends). */
static int check_videos(job_session *s) {
  const comm_world *w = s->w;
  const int last = w->size - 1;
  int any = 0;
  uint8_t *bad = sp_xcalloc((size_t)s->njobs, 1);
  for (int i = 0; i < s->njobs; i++) {
    job_spec *j = &s->jobs[i];
    if (j->bad || !j->video[0]) continue;
    any = 1;
    if (!s->vae) {
      if (w->rank == 0)
        sp_log_error("%s:%d: video=%s needs --vae (the VAE decoder)", s->o->jobs, j->line,
                     j->video);
      bad[i] = 1;
    } else if (w->rank == last) {
      int64_t lat[4];
      job_latent_shape(j, &rank_model_get_info(s->m)->config, lat);
      decode_opts d = job_decode_opts(s, j);
      bad[i] = decode_check_outputs(&d, s->vae, lat) != SP_OK;
    }
  }
  comm_bcast(w, bad, (size_t)s->njobs, last);
  int nbad = 0;
  for (int i = 0; i < s->njobs; i++) {
    if (bad[i]) s->jobs[i].bad = 1;
    nbad += bad[i];
  }
  free(bad);
  if (s->vae && !any && !s->stream && w->rank == 0)
    sp_log_warn("run: --vae is given but no job has video=: nothing to decode");
  return s->single && nbad ? SP_ERR_INPUT : SP_OK;
}

/* Rank 0 reads the jobs file; every rank gets the same list. */
static int read_jobs(job_session *s) {
  const comm_world *w = s->w;
  comm_set_phase("reading the jobs file");
  int rc = SP_OK, count = 0;
  job_spec *list = NULL;
  if (w->rank == 0) rc = job_file_read(s->o, &list, &count);
  for (int i = 0; w->rank == 0 && rc == SP_OK && i < count; i++) {
    char where[JOB_PATH + 32];
    snprintf(where, sizeof where, "%s:%d", s->o->jobs, list[i].line);
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
  s->single = s->o->jobs == NULL;
  s->stream = !s->single && job_jobs_is_stream(s->o->jobs);
  int rc = SP_OK;
  if (s->single || s->stream) {
    /* A stream's lines come later: its plan and LoRAs are the command
     * line's job's, the defaults of its lines. */
    s->jobs = sp_xcalloc(1, sizeof *s->jobs);
    s->jobs[0] = s->o->job;
    s->njobs = 1;
    if (s->stream && (rc = job_stream_open(s)) != SP_OK) return session_fail(s, rc);
  } else if ((rc = read_jobs(s)) != SP_OK) {
    return session_fail(s, rc);
  }
  s->job_rc = sp_xcalloc((size_t)s->njobs, sizeof *s->job_rc);
  for (int i = 0; i < s->njobs; i++) s->o->cache_any |= s->jobs[i].cache.method != RANK_CACHE_OFF;
  /* Before anything is placed: the text encoder's memory is free again
   * when the blocks load. */
  if ((rc = job_prompts_encode(s)) != SP_OK) return session_fail(s, rc);
  if ((rc = job_setup_loras(s)) != SP_OK) return session_fail(s, rc);
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
  s->stream_tokens = plan_tokens(&wl);

  /* One job: its inputs are read and checked before planning, and the plan
   * is for its exact context length. */
  if (s->single) {
    comm_set_phase("reading the inputs");
    rc = job_read_inputs(s, &s->jobs[0], &s->in0);
    if (w->rank == 0 && rc == SP_OK) wl.context_len = s->in0.ctx[0].dims[0];
    if ((rc = job_phase(w, rc, "reading the inputs")) != SP_OK) return session_fail(s, rc);
    comm_bcast(w, &wl.context_len, sizeof wl.context_len, 0);
    job_log(s, &s->jobs[0]);
  }
  comm_set_phase("checking the video outputs");
  rc = job_phase(w, s->stream ? SP_OK : check_videos(s), "checking the video outputs");
  if (rc != SP_OK) return session_fail(s, rc);
  if (s->o->trace) rank_trace_start(w, s->o->trace);
  if (best < 0) return SP_OK; /* every line was bad (each already reported) */
  /* The CUDA decoder's memory on the last rank, counted by the planner. */
  const uint64_t dec = s->vae && s->o->dev == RANK_DEVICE_CUDA
                           ? job_decoder_bytes(&vae_model_get_info(s->vae)->config,
                                               s->o->vae_precision, &wl)
                           : 0;
  if ((rc = job_make_plan(w, s->o, s->m, &wl, dec, &s->p)) != SP_OK) return session_fail(s, rc);
  s->planned = 1;
  s->block_major = s->p.r[plan_grid_pos_of(&s->p.grid, w->rank).stage].order == PLAN_ORDER_BLOCK;
  return SP_OK;
}

const plan *job_session_get_plan(const job_session *s) { return s->planned ? &s->p : NULL; }

/* A loaded stage takes a new latent shape: its activations are laid out
 * again in the room the plan sized for its largest shape; the weights and
 * LoRA pairs stay, nothing is read from the file. */
static int relayout_stage(job_session *s, const int64_t lat[4]) {
  const comm_world *w = s->w;
  comm_set_phase("re-laying its activations");
  const double t0 = comm_now();
  int rc = rank_stage_relayout(s->stage, lat[1], lat[2], lat[3]);
  if ((rc = job_phase(w, rc, "re-laying its activations")) != SP_OK) return rc;
  memcpy(s->stage_lat, lat, sizeof s->stage_lat);
  s->sum.act_bytes = rank_stage_act_bytes(s->stage);
  if (w->rank == 0)
    sp_log_info("run: the latent shape changes to %lldx%lldx%lld (latent frames x height x "
                "width): rank 0 re-laid its activations in %.3f s, every rank keeps its weights "
                "(none read again)",
                (long long)lat[1], (long long)lat[2], (long long)lat[3], comm_now() - t0);
  return SP_OK;
}

/* Loads this rank's blocks, sized for the plan's largest latent and laid
 * out for the job's, unless they are loaded: then a new shape only re-lays
 * the activations. A failure here ends the run (the model is bad for every
 * job). */
static int ensure_stage(job_session *s, const int64_t lat[4]) {
  const comm_world *w = s->w;
  if (s->stage && memcmp(s->stage_lat, lat, sizeof s->stage_lat) == 0) return SP_OK;
  if (s->stage) return relayout_stage(s, lat);
  comm_set_phase("loading its weights");
  const plan_grid *g = &s->p.grid;
  const int stage = plan_grid_pos_of(g, w->rank).stage;
  const plan_rank *pr = &s->p.r[stage];
  const int has_prev = stage > 0, has_next = stage < g->stages - 1;
  const int nbuf = plan_act_buffers(pr->order, s->prompts, has_prev, has_next);
  if (g->seq > 1) job_layout_seq_group(w, g, s->o->timeout, &s->seq);
  rank_stage_cfg scfg = {.first_block = pr->first_block, .last_block = pr->last_block,
                         .embed = !has_prev, .head = !has_next,
                         .prompts = s->prompts, .lat_f = lat[1], .lat_h = lat[2],
                         .lat_w = lat[3], .max_tokens = s->p.tokens, .device = s->o->dev,
                         .cuda_device = s->o->cuda_device, .attn = s->o->attn,
                         .streamed = &s->p.streamed[pr->first_block],
                         .prefetch_depth = pr->prefetch_depth, .profile = s->o->profile,
                         .swap_experts = pr->experts_mode == PLAN_EXPERTS_SWAP,
                         .act_buffers = nbuf, .chunk_rows = pr->chunk_rows,
                         .mem_trace = s->o->mem_trace,
                         .plan_peak_bytes = (double)pr->peak_bytes,
                         .lora_block_elems = s->o->lora_block_elems,
                         .lora_rank = s->o->lora_rank,
                         .seq = g->seq > 1 ? &s->seq : NULL, .tp = s->tp,
                         .fp8 = job_precision_fp8(s->o, rank_model_get_info(s->m)),
                         .cache = s->o->cache_any};
  double t0 = comm_now();
  rank_model_progress_begin();
  int rc = rank_stage_load(s->m, &scfg, &s->stage, &s->sum.bytes_loaded);
  rank_model_progress_end();
  s->sum.load_s += comm_now() - t0;
  if (rc == SP_OK) s->sum.weights_s += rank_stage_get_stats(s->stage)->weights_s;
  if ((rc = job_phase(w, rc, "loading its weights")) != SP_OK) return rc;
  memcpy(s->stage_lat, lat, sizeof s->stage_lat);
  /* The probe times the chain of a plain pipeline's ranks. */
  if (s->o->probe_links && g->replicas == 1 && g->seq == 1) {
    comm_set_phase("probing the links between stages");
    rank_pipeline_probe(w, s->tp, s->stage, s->o->timeout, &s->sum.link_gbs);
  }
  s->sum.act_bytes = rank_stage_act_bytes(s->stage);
  return SP_OK;
}

/* A group's per-job buffers: schedules and outputs. */
typedef struct group_bufs {
  rank_job jobs[RANK_PIPE_MAX_JOBS];
  float *sigmas[RANK_PIPE_MAX_JOBS], *out[RANK_PIPE_MAX_JOBS];
  int64_t *ts[RANK_PIPE_MAX_JOBS];
  uint8_t *expert[RANK_PIPE_MAX_JOBS]; /* two experts: each step's */
  uint8_t *cache[RANK_PIPE_MAX_JOBS];  /* step caching: (steps x micro) actions */
} group_bufs;

static void group_bufs_free(group_bufs *b, int g) {
  for (int q = 0; q < g; q++) {
    free(b->sigmas[q]);
    free(b->ts[q]);
    free(b->out[q]);
    free(b->expert[q]);
    free(b->cache[q]);
  }
}

/* The steps of branch b whose action is a skip, "3,5,7" ("none"), into buf. */
static void cache_steps_text(const uint8_t *act, int steps, int micro, int b, char *buf,
                             size_t n) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < steps && len + 16 < n; i++)
    if (act[i * micro + b] == RANK_CACHE_SKIP)
      len += (size_t)snprintf(buf + len, n - len, "%s%d", len ? "," : "", i);
  if (!len) snprintf(buf, n, "none");
}

void job_cache_record(job_session *s, const job_spec *j, const uint8_t *act) {
  const int micro = job_micro_batches(j), n = j->steps * micro;
  int64_t skipped = 0;
  for (int k = 0; k < n; k++) skipped += act[k] == RANK_CACHE_SKIP;
  s->cache_skipped += skipped;
  s->cache_total += n;
  free(s->cache_act);
  s->cache_act = sp_xmalloc((size_t)n);
  memcpy(s->cache_act, act, (size_t)n);
  s->cache_spec = j->cache;
  s->cache_steps = j->steps;
  s->cache_micro = micro;
  char spec[64], c0[512], c1[512];
  rank_cache_format(&j->cache, spec, sizeof spec);
  cache_steps_text(act, j->steps, micro, 0, c0, sizeof c0);
  if (micro > 1) cache_steps_text(act, j->steps, micro, 1, c1, sizeof c1);
  sp_log_info("cache: %s (constants of %s) skips %lld of %d micro-batch steps; skipped steps "
              "(from 0): %s%s%s%s",
              spec, rank_cache_constants_name(rank_model_get_info(s->m)->config.dim),
              (long long)skipped, n, micro > 1 ? "conditional " : "", c0,
              micro > 1 ? ", negative " : "", micro > 1 ? c1 : "");
}

int job_session_cache(const job_session *s, rank_cache_spec *spec, const uint8_t **act,
                      int *steps, int *micro, int64_t *skipped, int64_t *total) {
  if (!s || !s->cache_act) return 0;
  *spec = s->cache_spec;
  *act = s->cache_act;
  *steps = s->cache_steps;
  *micro = s->cache_micro;
  *skipped = s->cache_skipped;
  *total = s->cache_total;
  return 1;
}

/* Rank 0: each step's time embedding e (steps, dim) under its expert, for
 * TeaCache's criterion; expert 0 selected again after. */
static int cache_embeddings(job_session *s, const job_spec *j, const int64_t *ts,
                            const uint8_t *expert, float *e) {
  const int64_t dim = rank_model_get_info(s->m)->config.dim;
  int rc = SP_OK;
  for (int i = 0; i < j->steps && rc == SP_OK; i++) {
    if (expert) rank_stage_set_expert(s->stage, expert[i]);
    rc = rank_stage_time_embed(s->stage, (double)ts[i], e + (int64_t)i * dim);
  }
  if (expert) rank_stage_set_expert(s->stage, 0);
  return rc;
}

/* Job j's step-cache actions into *out (steps x micro, NULL without a
 * cache): decided on rank 0 (ranks/sampling/step_cache.h), every rank
 * gets them. Rank 0 logs the skipped steps and keeps them for --json. */
static int cache_plan(job_session *s, const job_spec *j, const int64_t *ts, const uint8_t *expert,
                      uint8_t **out) {
  const comm_world *w = s->w;
  const int micro = job_micro_batches(j), n = j->steps * micro;
  const int64_t dim = rank_model_get_info(s->m)->config.dim;
  *out = NULL;
  if (j->cache.method == RANK_CACHE_OFF) return SP_OK;
  if (!s->o->cache_any) { /* a --jobs stream's line: the plan is the command line's */
    if (w->rank == 0)
      sp_log_error("cache=: the run was planned and loaded without a step cache (a --jobs "
                   "stream's lines cache only when the command line has --cache)");
    return SP_ERR_INPUT;
  }
  uint8_t *act = sp_xcalloc((size_t)n, 1);
  int rc = SP_OK;
  if (w->rank == 0) {
    float *e = NULL;
    if (j->cache.method == RANK_CACHE_TEACACHE) {
      e = sp_xmalloc((size_t)(j->steps * dim) * sizeof(float));
      rc = cache_embeddings(s, j, ts, expert, e);
    }
    uint8_t *skip = sp_xmalloc((size_t)j->steps), *a = sp_xmalloc((size_t)j->steps);
    for (int b = 0; b < micro && rc == SP_OK; b++) {
      rank_cache_decide(&j->cache, dim, j->steps, b, e, expert, skip);
      rank_cache_actions(skip, j->steps, a);
      for (int i = 0; i < j->steps; i++) act[i * micro + b] = a[i];
    }
    free(skip);
    free(a);
    free(e);
  }
  rc = job_phase(w, rc, "deciding the cached steps");
  if (rc == SP_OK) comm_bcast(w, act, (size_t)n, 0);
  if (rc == SP_OK && w->rank == 0) job_cache_record(s, j, act);
  if (rc != SP_OK) free(act);
  *out = rc == SP_OK ? act : NULL;
  return rc;
}

/* Every rank's share of g jobs' inputs: the embedded contexts in their
 * prompt slots (job q's from q * slots_per_job), the initial latents, the
 * schedules; b->jobs as the pipeline takes them. */
static int group_setup(job_session *s, const job_spec *const *js, job_inputs *ins, int g,
                       const int64_t lat[4], group_bufs *b) {
  const comm_world *w = s->w;
  const wan_config *c = &rank_model_get_info(s->m)->config;
  const int64_t n = lat[0] * lat[1] * lat[2] * lat[3];
  const size_t ctx_floats = (size_t)(c->text_len * c->dim);
  const int experts = rank_stage_experts(s->stage);
  float *ctx_emb = sp_xmalloc(ctx_floats * sizeof(float));
  int rc = SP_OK;
  for (int q = 0; q < g && rc == SP_OK; q++) {
    const job_spec *j = js[q];
    const int micro = job_micro_batches(j);
    /* Each expert embeds the prompt with its own text embedding and keeps
     * its own cross-attention k/v. The last expert first, so that expert 0
     * (high noise, which the first step runs) is the one selected when
     * sampling starts: a rank that swaps the experts' blocks at the switch
     * swaps once here for a job after the first (twice for the first). */
    for (int e = experts - 1; e >= 0; e--) {
      rank_stage_set_expert(s->stage, e);
      for (int k = 0; k < micro; k++) {
        if (w->rank == 0)
          rank_stage_embed_text(s->stage, ins[q].ctx[k].data, ins[q].ctx[k].dims[0], ctx_emb);
        comm_bcast(w, ctx_emb, ctx_floats * sizeof(float), 0);
        rank_stage_set_prompt(s->stage, q * s->slots_per_job + k, ctx_emb);
      }
    }
    /* The initial latent reaches the last stage, which runs the sampler. */
    if (w->rank != 0) {
      ins[q].noise.numel = n;
      ins[q].noise.data = sp_xmalloc((size_t)n * sizeof(float));
    }
    comm_bcast(w, ins[q].noise.data, (size_t)n * sizeof(float), 0);
    b->sigmas[q] = sp_xmalloc((size_t)(j->steps + 1) * sizeof(float));
    b->ts[q] = sp_xmalloc((size_t)j->steps * sizeof(int64_t));
    b->out[q] = sp_xmalloc((size_t)n * sizeof(float));
    rc = job_schedule_make(j, NULL, b->sigmas[q], b->ts[q]);
    if (experts > 1) {
      b->expert[q] = sp_xmalloc((size_t)j->steps);
      job_step_experts(j, experts, b->ts[q], b->expert[q]);
    }
    if (rc == SP_OK) rc = cache_plan(s, j, b->ts[q], b->expert[q], &b->cache[q]);
    b->jobs[q] = (rank_job){.lat = {lat[0], lat[1], lat[2], lat[3]}, .steps = j->steps,
                            .sigmas = b->sigmas[q], .timesteps = b->ts[q],
                            .sampler = j->sampler, .cfg = (float)j->cfg,
                            .cfg_low = (float)j->cfg_low, .expert = b->expert[q],
                            .micro = micro, .noise = ins[q].noise.data, .out = b->out[q],
                            .slot0 = q * s->slots_per_job, .cache = b->cache[q]};
  }
  free(ctx_emb);
  return rc;
}

/* Samples the group on the pipeline and adds its times to the summary. */
static int group_sample(job_session *s, const group_bufs *b, int g) {
  const comm_world *w = s->w;
  rank_pipe_stats st = {0};
  const uint64_t h2d0 = rank_stage_get_stats(s->stage)->h2d_bytes;
  double speed[PLAN_MAX_RANKS];
  job_replica_speeds(s->o, &s->p.grid, speed);
  int K = 0; /* the step's micro-batches */
  for (int q = 0; q < g; q++) K += rank_job_micro_batches(&b->jobs[q]);
  if (w->rank == 0) job_speed_log(s->o, &s->p.grid, K);
  int rc = rank_pipeline_sample(w, &s->p.grid, s->tp, s->stage, b->jobs, g, speed,
                                s->block_major, s->o->timeout, w->rank == 0 && !s->o->quiet,
                                &st);
  job_rank_stats *sum = &s->sum;
  sum->compute_s += st.compute_s;
  sum->queue_s += st.queue_s;
  sum->wait_s += st.wait_s;
  sum->send_s += st.send_s;
  sum->sample_s += st.sample_s;
  sum->first_step_s += st.first_step_s;
  sum->switch_s += st.switch_s;
  sum->other_s += st.other_s;
  sum->switch_steps += st.switch_steps;
  sum->other_steps += st.other_steps;
  sum->groups++;
  sum->steps += st.steps;
  const rank_stage_stats *ss = rank_stage_get_stats(s->stage);
  sum->h2d_bytes += ss->h2d_bytes - h2d0;
  sum->streamed = ss->streamed;
  sum->arena_bytes = ss->arena_bytes;
  sum->device_in_use = ss->device_in_use;
  sum->device_peak = ss->device_peak;
  return rc;
}

/* Samples g jobs of one latent shape and step count together (their
 * micro-batches fill the pipeline), whose inputs rank 0 holds in ins, and
 * writes their outputs; rcs[q] gets job q's status. A failed load ends
 * the session (s->fatal). */
static void run_group(job_session *s, const job_spec *const *js, job_inputs *ins, int g,
                      int *rcs) {
  const comm_world *w = s->w;
  const char *then = s->single ? "stopping" : "job failed";
  int64_t lat[4];
  job_latent_shape(js[0], &rank_model_get_info(s->m)->config, lat);
  int rc = session_fail(s, ensure_stage(s, lat));
  for (int q = 0; q < g; q++) rcs[q] = rc;
  if (rc != SP_OK) return;
  if (s->o->lora_mode == RANK_LORA_BYPASS) {
    comm_set_phase("switching the LoRAs");
    rc = comm_phase_end(w, job_use_loras(s, js[0]), "switching the LoRAs", then);
    for (int q = 0; q < g; q++) rcs[q] = rc;
    if (rc != SP_OK) return;
  }
  comm_set_phase("sampling");
  group_bufs b;
  memset(&b, 0, sizeof b);
  rc = group_setup(s, js, ins, g, lat, &b);
  if (rc == SP_OK) rc = group_sample(s, &b, g);
  rc = comm_phase_end(w, rc, "sampling", then);
  for (int q = 0; q < g; q++) {
    rcs[q] = rc;
    if (rc != SP_OK) continue;
    comm_set_phase("writing the output");
    int r = SP_OK;
    if (w->rank == w->size - 1) {
      r = job_write_output(s, js[q], lat, b.out[q]);
      if (r == SP_OK)
        sp_log_info("run: wrote %s%s", js[q]->out, s->o->preview ? " and its .png preview" : "");
      if (r == SP_OK && js[q]->video[0]) {
        decode_opts d = job_decode_opts(s, js[q]);
        decode_stats st;
        /* The VAE's weights are read at the first video, kept for the rest. */
        if (!s->vae_weights) r = decode_weights_read(s->vae, &s->vae_weights);
        if (r == SP_OK) r = decode_run_with(&d, s->vae, s->vae_weights, b.out[q], lat, &st);
        if (r == SP_OK)
          sp_log_info("run: wrote %s (%lld frames of %lldx%lld, decoded in %.2f s)",
                      js[q]->video, (long long)st.frames, (long long)st.height,
                      (long long)st.width, st.decode_s);
      }
    }
    rcs[q] = comm_phase_end(w, r, "writing the output", then);
  }
  group_bufs_free(&b, g);
}

/* Whether two jobs (of one step count) run the same expert at every step,
 * as jobs in flight together must: always with one expert. */
static int same_experts(const job_session *s, const job_spec *a, const job_spec *b) {
  const int experts = rank_model_get_info(s->m)->experts.count;
  if (experts < 2) return 1;
  const job_spec *j[2] = {a, b};
  uint8_t *ex[2];
  for (int k = 0; k < 2; k++) {
    float *sg = sp_xmalloc(((size_t)j[k]->steps + 1) * sizeof *sg);
    int64_t *ts = sp_xmalloc((size_t)j[k]->steps * sizeof *ts);
    ex[k] = sp_xcalloc((size_t)j[k]->steps, 1);
    if (job_schedule_make(j[k], NULL, sg, ts) == SP_OK) job_step_experts(j[k], experts, ts, ex[k]);
    free(sg);
    free(ts);
  }
  const int same = memcmp(ex[0], ex[1], (size_t)a->steps) == 0;
  free(ex[0]);
  free(ex[1]);
  return same;
}

/* From job i: consecutive jobs matching the first good one (latent shape,
 * steps and, with two experts, each step's expert), at most in_flight, their inputs read and checked on rank 0
 * (a bad one fails alone). Returns the index after the last one looked at. */
static int collect_group(job_session *s, int i, const job_spec **group, job_inputs *ins,
                         int *idx, int *g) {
  const wan_config *c = &rank_model_get_info(s->m)->config;
  int next = i;
  *g = 0;
  for (; next < s->njobs && *g < s->in_flight; next++) {
    const job_spec *j = &s->jobs[next];
    if (j->bad) {
      s->job_rc[next] = SP_ERR_INPUT;
      continue;
    }
    if (*g > 0) {
      int64_t lat0[4], lat1[4];
      job_latent_shape(group[0], c, lat0);
      job_latent_shape(j, c, lat1);
      /* Jobs in flight together share the stage's LoRA pairs. */
      rank_lora_spec l0[RANK_LORA_MAX], l1[RANK_LORA_MAX];
      const int n0 = job_spec_loras(s->o, group[0], l0), n1 = job_spec_loras(s->o, j, l1);
      if (memcmp(lat0, lat1, sizeof lat0) != 0 || j->steps != group[0]->steps ||
          !job_loras_same(l0, n0, l1, n1) || !same_experts(s, group[0], j))
        break;
    }
    memset(&ins[*g], 0, sizeof ins[*g]);
    int r = SP_OK;
    if (s->single) {
      ins[*g] = s->in0;
      memset(&s->in0, 0, sizeof s->in0);
    } else {
      char what[96];
      snprintf(what, sizeof what, "reading the inputs of job %d (line %d)", next + 1, j->line);
      comm_set_phase(what);
      r = comm_phase_end(s->w, job_read_inputs(s, j, &ins[*g]), what, "job failed");
      if (r == SP_OK) job_log(s, j);
    }
    if (r != SP_OK) {
      s->job_rc[next] = r;
      job_inputs_free(&ins[*g]);
      continue;
    }
    idx[*g] = next;
    group[(*g)++] = j;
  }
  return next;
}

/* Runs jobs from..to-1 of s->jobs in groups, reporting each as it ends.
 * Returns the status of the first failed group when the session ended. */
static int run_jobs(job_session *s, int from, int to) {
  for (int i = from; i < to;) {
    const job_spec *group[RANK_PIPE_MAX_JOBS];
    job_inputs ins[RANK_PIPE_MAX_JOBS];
    int idx[RANK_PIPE_MAX_JOBS], g = 0, rcs[RANK_PIPE_MAX_JOBS];
    const double t0 = comm_now();
    const int first = i;
    i = collect_group(s, i, group, ins, idx, &g);
    if (g > 1 && s->w->rank == 0)
      sp_log_info("run: %d jobs in flight together (lines %d..%d)", g, group[0]->line,
                  group[g - 1]->line);
    if (g > 0) run_group(s, group, ins, g, rcs);
    for (int q = 0; q < g; q++) {
      s->job_rc[idx[q]] = rcs[q];
      job_inputs_free(&ins[q]);
    }
    for (int k = first; k < i && !s->single; k++)
      job_report(s, k, s->job_rc[k], comm_now() - t0);
    if (s->fatal) return rcs[0];
  }
  return SP_OK;
}

int job_session_run(job_session *s) {
  if (s->fatal) return SP_ERR_RUNTIME;
  if (!s->planned) {
    for (int i = 0; i < s->njobs; i++) s->job_rc[i] = SP_ERR_INPUT;
    return SP_ERR_INPUT;
  }
  if (s->stream) {
    /* One job at a time, as the lines arrive, until the end of the input. */
    int worst = SP_OK;
    while (job_stream_next(s)) {
      s->job_rc[0] = SP_OK;
      int rc = s->jobs[0].bad ? SP_OK : check_videos(s);
      if (rc == SP_OK) rc = run_jobs(s, 0, 1);
      if (s->fatal) return rc;
      if (s->job_rc[0] > worst) worst = s->job_rc[0];
    }
    return s->stream_rc > worst ? s->stream_rc : worst;
  }
  int rc = run_jobs(s, 0, s->njobs);
  if (s->fatal) return rc;
  int worst = SP_OK;
  for (int i = 0; i < s->njobs; i++)
    if (s->job_rc[i] > worst) worst = s->job_rc[i];
  return worst;
}

/* Rank 0: which jobs failed, and how many of how many were done. */
static void log_jobs_summary(const job_session *s) {
  int failed = 0;
  for (int i = 0; i < s->njobs; i++) {
    if (s->job_rc[i] == SP_OK) continue;
    failed++;
    sp_log_warn("jobs: %s:%d (out=%s) failed", s->o->jobs, s->jobs[i].line,
                s->jobs[i].out[0] ? s->jobs[i].out : "?");
  }
  /* A warning when any failed, so that -q still shows it. */
  if (failed)
    sp_log_warn("jobs: %d of %d done, %d failed (%s)", s->njobs - failed, s->njobs, failed,
                s->o->jobs);
  else
    sp_log_info("jobs: %d of %d done, %d failed (%s)", s->njobs - failed, s->njobs, failed,
                s->o->jobs);
}

int job_session_finish(job_session *s, int rc, job_rank_stats **all) {
  const comm_world *w = s->w;
  *all = NULL;
  if (s->fatal) return rc;
  if (s->o->trace) {
    int trc = job_phase(w, rank_trace_finish(w), "writing the trace");
    if (trc > rc) rc = trc;
  }
  if (s->stream && w->rank == 0)
    job_stream_summary(s);
  else if (!s->single && w->rank == 0)
    log_jobs_summary(s);
  if (!s->planned) return rc;
  const plan_rank *pr = &s->p.r[plan_grid_pos_of(&s->p.grid, w->rank).stage];
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
  decode_weights_free(s->vae_weights);
  vae_model_close(s->vae);
  rank_lora_close(s->lora);
  comm_transport_close(s->tp);
  free(s);
}
