/* Running the session's jobs (see job_session.h): groups of jobs in flight
 * together, each group's inputs given to every rank, sampled on the
 * pipeline, its outputs written (and decoded to video) on the last rank.
 * The session's opening, plan and end are job_session.c's; its stage
 * job_stage.c's; the step cache's decisions job_cache.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "job_session_impl.h"
#include "layout_grid.h"
#include "log.h"
#include "pipeline.h"
#include "preview.h"

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
    /* An image's conditioning: I2V's y for stage 0, TI2V's frame for
     * stage 0 and the last stage (job_image.h). */
    const int64_t nc = job_cond_floats(j, c, lat);
    if (nc && w->rank != 0) {
      ins[q].cond.numel = nc;
      ins[q].cond.data = sp_xmalloc((size_t)nc * sizeof(float));
    }
    if (w->rank == 0 && ins[q].cond.numel != nc)
      sp_fatal("internal: job %d's image conditioning holds %lld values, its latent needs %lld",
               j->line, (long long)ins[q].cond.numel, (long long)nc);
    if (nc) comm_bcast(w, ins[q].cond.data, (size_t)nc * sizeof(float), 0);
    const int ti2v = wan_config_task(c) == WAN_TASK_TI2V;
    b->sigmas[q] = sp_xmalloc((size_t)(j->steps + 1) * sizeof(float));
    b->ts[q] = sp_xmalloc((size_t)j->steps * sizeof(int64_t));
    b->out[q] = sp_xmalloc((size_t)n * sizeof(float));
    rc = job_schedule_make(j, NULL, b->sigmas[q], b->ts[q]);
    if (experts > 1) {
      b->expert[q] = sp_xmalloc((size_t)j->steps);
      job_step_experts(j, experts, b->ts[q], b->expert[q]);
    }
    if (rc == SP_OK) rc = job_cache_plan(s, j, b->ts[q], b->expert[q], &b->cache[q]);
    b->jobs[q] = (rank_job){.lat = {lat[0], lat[1], lat[2], lat[3]}, .steps = j->steps,
                            .sigmas = b->sigmas[q], .timesteps = b->ts[q],
                            .sampler = j->sampler, .cfg = (float)j->cfg,
                            .cfg_low = (float)j->cfg_low, .expert = b->expert[q],
                            .micro = micro, .noise = ins[q].noise.data, .out = b->out[q],
                            .cond = nc && !ti2v ? ins[q].cond.data : NULL,
                            .frame0 = nc && ti2v ? ins[q].cond.data : NULL,
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
  job_replica_speeds(&s->params, &s->plan.grid, speed);
  int K = 0; /* the step's micro-batches */
  for (int q = 0; q < g; q++) K += rank_job_micro_batches(&b->jobs[q]);
  if (w->rank == 0) job_speed_log(&s->params, &s->plan.grid, K);
  const rank_pipe_ctx pc = {.w = w, .grid = &s->plan.grid, .tp = s->tp, .s = s->stage,
                           .replica_speed = speed, .block_major = s->block_major,
                           .timeout_s = s->params.timeout,
                           .progress = w->rank == 0 && !s->params.quiet};
  int rc = rank_pipeline_sample(&pc, b->jobs, g, &st);
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
  int rc = job_session_fail(s, job_stage_ensure(s, lat));
  for (int q = 0; q < g; q++) rcs[q] = rc;
  if (rc != SP_OK) return;
  if (s->lora_mode == RANK_LORA_BYPASS) {
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
      /* The CRC-32C of the latents' float32 bytes: two runs' latents
       * compared without reading the files (launch/demo.sh). */
      if (r == SP_OK && js[q]->out[0])
        sp_log_info("run: wrote %s%s (latents crc32c:%08x)", js[q]->out,
                    s->params.preview && lat[0] == RANK_PREVIEW_CHANNELS ? " and its .png preview"
                                                                         : "",
                    crc32c(0, b.out[q], (size_t)(lat[0] * lat[1] * lat[2] * lat[3]) * sizeof(float)));
      if (r == SP_OK && js[q]->video[0]) {
        decode_opts d = job_decode_opts(s, js[q]);
        decode_stats st;
        r = job_vae_decode(s->vae, &d, b.out[q], lat, &st);
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
 * steps and, with two experts, each step's expert), at most in_flight,
 * their inputs read and checked on rank 0 (a bad one fails alone).
 * Returns the index after the last one looked at. */
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
      const int n0 = job_spec_loras(&s->params, group[0], l0);
      const int n1 = job_spec_loras(&s->params, j, l1);
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
      int rc = s->jobs[0].bad ? SP_OK : job_check_videos(s);
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
