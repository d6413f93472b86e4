/* The stage loop (see pipeline.h). */
#include "pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "trace.h"

/* Tags: the latent of job j travels as TAG_LATENT + j, micro-batch k of a
 * step as TAG_ACT + k (k < 2 * RANK_PIPE_MAX_JOBS). */
enum { TAG_LATENT = 10, TAG_ACT = 100 };

/* One line per step on a terminal that rewrites itself; plain lines in a
 * log. */
static void report_progress(int done, int total, double t0) {
  double el = comm_now() - t0;
  double rate = el > 0 ? done / el : 0;
  double eta = rate > 0 ? (total - done) / rate : 0;
  if (isatty(2)) {
    fprintf(stderr, "\r[rank 0] step %d/%d, %.3f it/s, elapsed %.1f s, eta %.1f s   %s", done,
            total, rate, el, eta, done == total ? "\n" : "");
    fflush(stderr);
  } else {
    sp_log_info("step %d/%d, %.3f it/s, elapsed %.1f s, eta %.1f s", done, total, rate, el, eta);
  }
}

/* The micro-batches of one step: job j's conditional branch, then its
 * negative branch (with CFG), job after job. */
typedef struct micro {
  int job, branch;
} micro;

static void post_latents(comm_transport *tp, float **latent, int njobs, size_t bytes, int peer,
                         int send, comm_xfer *x) {
  for (int j = 0; j < njobs; j++) {
    memset(&x[j], 0, sizeof x[j]);
    if (send)
      comm_tp_isend(tp, latent[j], bytes, peer, TAG_LATENT + j, &x[j], NULL);
    else
      comm_tp_irecv(tp, latent[j], bytes, peer, TAG_LATENT + j, &x[j], NULL);
  }
}

static void wait_all(comm_transport *tp, comm_xfer *x, int n, double timeout_s, const char *what,
                     double *acc) {
  for (int j = 0; j < n; j++) comm_tp_wait(tp, &x[j], timeout_s, what, acc);
}

/* A wait on a peer, traced as a span of category "wait". */
static void traced_wait(comm_transport *tp, comm_xfer *x, double timeout_s, const char *what,
                        double *acc, const char *span, int step, int mb) {
  double t0 = rank_trace_now();
  comm_tp_wait(tp, x, timeout_s, what, acc);
  rank_trace_span(span, "wait", t0, step, mb);
}

int rank_pipeline_sample(const comm_world *w, comm_transport *tp, rank_stage *s,
                         const rank_job *jobs, int njobs, double timeout_s, int progress,
                         rank_pipe_stats *st) {
  const int me = w->rank, P = w->size, first = me == 0, last = me == P - 1;
  if (njobs < 1 || njobs > RANK_PIPE_MAX_JOBS)
    sp_fatal("internal: %d jobs in flight (1..%d)", njobs, RANK_PIPE_MAX_JOBS);
  const int steps = jobs[0].steps;
  micro mb[2 * RANK_PIPE_MAX_JOBS];
  int K = 0;
  for (int j = 0; j < njobs; j++) {
    if (jobs[j].steps != steps || memcmp(jobs[j].lat, jobs[0].lat, sizeof jobs[0].lat) != 0)
      sp_fatal("internal: jobs in flight together differ in steps or latent shape");
    for (int b = 0; b < rank_job_micro_batches(&jobs[j]); b++) mb[K++] = (micro){j, b};
  }
  const int64_t n = jobs[0].lat[0] * jobs[0].lat[1] * jobs[0].lat[2] * jobs[0].lat[3];
  const size_t lat_bytes = (size_t)n * sizeof(float);
  const size_t act_bytes =
      (size_t)rank_act_floats(rank_stage_config(s), rank_stage_tokens(s)) * sizeof(float);
  const rank_stage_cfg *scfg = rank_stage_get_cfg(s);
  float *act[2] = {rank_stage_host_alloc(scfg, act_bytes), rank_stage_host_alloc(scfg, act_bytes)};
  comm_xfer send_req[2], recv_req[2], lat_req[RANK_PIPE_MAX_JOBS];
  memset(send_req, 0, sizeof send_req);
  memset(recv_req, 0, sizeof recv_req);
  float *latent[RANK_PIPE_MAX_JOBS] = {0}, *v[RANK_PIPE_MAX_JOBS][2] = {{0}};
  rank_sampler *smp[RANK_PIPE_MAX_JOBS] = {0};
  int rc = SP_OK;
  for (int j = 0; j < njobs && (first || last); j++) {
    latent[j] = sp_xmalloc(lat_bytes);
    memcpy(latent[j], jobs[j].noise, lat_bytes);
  }
  for (int j = 0; j < njobs && last; j++) {
    for (int b = 0; b < rank_job_micro_batches(&jobs[j]); b++) v[j][b] = sp_xmalloc(lat_bytes);
    rc = rank_sampler_create(jobs[j].sampler, steps, jobs[j].sigmas, (size_t)n, &smp[j]);
    if (rc != SP_OK) goto done;
  }
  double t_start = comm_now();
  for (int i = 0; i < steps; i++) {
    double t_step = rank_trace_now();
    if (first && !last && i > 0) {
      post_latents(tp, latent, njobs, lat_bytes, P - 1, 0, lat_req);
      double tw = rank_trace_now();
      wait_all(tp, lat_req, njobs, timeout_s, "receiving the latents from the last stage",
               &st->wait_s);
      rank_trace_span("recv latents", "wait", tw, i, -1);
      if (progress) report_progress(i, steps, t_start);
    }
    if (!first)
      for (int k = 0; k < K && k < 2; k++)
        comm_tp_irecv(tp, act[k], act_bytes, me - 1, TAG_ACT + k, &recv_req[k], NULL);
    for (int k = 0; k < K; k++) {
      const rank_job *jb = &jobs[mb[k].job];
      float *a = act[k % 2];
      if (first) {
        /* The buffer may still be on its way to the next stage. */
        traced_wait(tp, &send_req[k % 2], timeout_s, "sending activations", &st->send_s,
                    "send act", i, k);
        double t0 = comm_now();
        rank_trace_push("embed");
        rank_stage_embed(s, latent[mb[k].job], (double)jb->timesteps[i], a);
        rank_trace_pop();
        rank_trace_span("embed", "compute", t0, i, k);
        st->compute_s += comm_now() - t0;
      } else {
        traced_wait(tp, &recv_req[k % 2], timeout_s,
                    "receiving activations from the previous stage", &st->wait_s, "recv act", i,
                    k);
      }
      double t0 = comm_now();
      rank_trace_push("blocks");
      rank_stage_blocks(s, jb->slot0 + mb[k].branch, a);
      rank_trace_pop();
      rank_trace_span("blocks", "compute", t0, i, k);
      if (last) {
        double th = comm_now();
        rank_trace_push("head");
        rank_stage_head(s, a, v[mb[k].job][mb[k].branch]);
        rank_trace_pop();
        rank_trace_span("head", "compute", th, i, k);
      }
      st->compute_s += comm_now() - t0;
      if (!last) comm_tp_isend(tp, a, act_bytes, me + 1, TAG_ACT + k, &send_req[k % 2], NULL);
      /* Refill this buffer with the next micro-batch that uses it. */
      if (!first && k + 2 < K) {
        traced_wait(tp, &send_req[k % 2], timeout_s, "sending activations", &st->send_s,
                    "send act", i, k);
        comm_tp_irecv(tp, act[k % 2], act_bytes, me - 1, TAG_ACT + k + 2, &recv_req[k % 2],
                      NULL);
      }
    }
    if (!first && !last) wait_all(tp, send_req, 2, timeout_s, "sending activations", &st->send_s);
    if (last) {
      double t0 = comm_now();
      for (int j = 0; j < njobs; j++) {
        /* branch 0 = conditional, branch 1 = negative prompt */
        if (rank_job_micro_batches(&jobs[j]) == 2)
          rank_cfg_combine(v[j][1], v[j][0], jobs[j].cfg, v[j][0], (size_t)n);
        rank_sampler_step(smp[j], i, v[j][0], latent[j]);
      }
      rank_trace_span("sampler", "compute", t0, i, -1);
      st->compute_s += comm_now() - t0;
      if (!first) { /* after the last step too: rank 0 reports it */
        post_latents(tp, latent, njobs, lat_bytes, 0, 1, lat_req);
        wait_all(tp, lat_req, njobs, timeout_s, "sending the latents to stage 0", &st->send_s);
      }
      if (first && progress) report_progress(i + 1, steps, t_start);
    }
    rank_trace_span("step", "step", t_step, i, -1);
  }
  if (first && !last) {
    wait_all(tp, send_req, 2, timeout_s, "sending activations", &st->send_s);
    post_latents(tp, latent, njobs, lat_bytes, P - 1, 0, lat_req);
    wait_all(tp, lat_req, njobs, timeout_s, "receiving the final latents", &st->wait_s);
    if (progress) report_progress(steps, steps, t_start);
  }
  for (int j = 0; j < njobs && last; j++) memcpy(jobs[j].out, latent[j], lat_bytes);
  st->sample_s += comm_now() - t_start;
  st->steps += steps;
done:
  for (int j = 0; j < njobs; j++) {
    rank_sampler_destroy(smp[j]);
    free(latent[j]);
    free(v[j][0]);
    free(v[j][1]);
  }
  rank_stage_host_free(scfg, act[0]);
  rank_stage_host_free(scfg, act[1]);
  return rc;
}
