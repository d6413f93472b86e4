/* The stage loop (see pipeline.h). */
#include "pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

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

int rank_pipeline_sample(const comm_world *w, comm_transport *tp, rank_stage *s,
                         const rank_job *job, double timeout_s, int progress,
                         rank_pipe_stats *st) {
  const int me = w->rank, P = w->size, first = me == 0, last = me == P - 1;
  const int M = rank_job_micro_batches(job);
  const int64_t n = job->lat[0] * job->lat[1] * job->lat[2] * job->lat[3];
  const size_t act_bytes = (size_t)rank_act_floats(rank_stage_config(s), rank_stage_tokens(s)) * sizeof(float);
  const rank_stage_cfg *scfg = rank_stage_get_cfg(s);
  float *act[2] = {rank_stage_host_alloc(scfg, act_bytes), rank_stage_host_alloc(scfg, act_bytes)};
  comm_xfer send_req[2], recv_req[2];
  memset(send_req, 0, sizeof send_req);
  memset(recv_req, 0, sizeof recv_req);
  float *latent = NULL, *v[2] = {NULL, NULL};
  rank_sampler *smp = NULL;
  int rc = SP_OK;
  if (first || last) {
    latent = sp_xmalloc((size_t)n * sizeof(float));
    memcpy(latent, job->noise, (size_t)n * sizeof(float));
  }
  if (last) {
    for (int k = 0; k < M; k++) v[k] = sp_xmalloc((size_t)n * sizeof(float));
    rc = rank_sampler_create(job->sampler, job->steps, job->sigmas, (size_t)n, &smp);
    if (rc != SP_OK) goto done;
  }
  double t_start = comm_now();
  for (int i = 0; i < job->steps; i++) {
    const double t = (double)job->timesteps[i];
    comm_xfer lat_req;
    memset(&lat_req, 0, sizeof lat_req);
    if (first && !last && i > 0) {
      comm_tp_irecv(tp, latent, (size_t)n * sizeof(float), P - 1, TAG_LATENT, &lat_req, NULL);
      comm_tp_wait(tp, &lat_req, timeout_s, "receiving the latent from the last stage", &st->wait_s);
      if (progress) report_progress(i, job->steps, t_start);
    }
    if (!first)
      for (int k = 0; k < M && k < 2; k++)
        comm_tp_irecv(tp, act[k], act_bytes, me - 1, TAG_ACT + k, &recv_req[k], NULL);
    for (int k = 0; k < M; k++) {
      float *a = act[k % 2];
      if (first) {
        /* The buffer may still be on its way to the next stage. */
        comm_tp_wait(tp, &send_req[k % 2], timeout_s, "sending activations", &st->send_s);
        double t0 = comm_now();
        rank_stage_embed(s, latent, t, a);
        st->compute_s += comm_now() - t0;
      } else {
        comm_tp_wait(tp, &recv_req[k % 2], timeout_s, "receiving activations from the previous stage",
                  &st->wait_s);
      }
      double t0 = comm_now();
      rank_stage_blocks(s, k, a);
      if (last) rank_stage_head(s, a, v[k]);
      st->compute_s += comm_now() - t0;
      if (!last) comm_tp_isend(tp, a, act_bytes, me + 1, TAG_ACT + k, &send_req[k % 2], NULL);
      /* Refill this buffer with the next micro-batch that uses it. */
      if (!first && k + 2 < M) {
        comm_tp_wait(tp, &send_req[k % 2], timeout_s, "sending activations", &st->send_s);
        comm_tp_irecv(tp, act[k % 2], act_bytes, me - 1, TAG_ACT + k + 2, &recv_req[k % 2], NULL);
      }
    }
    if (!first && !last)
      for (int k = 0; k < 2; k++)
        comm_tp_wait(tp, &send_req[k], timeout_s, "sending activations", &st->send_s);
    if (last) {
      double t0 = comm_now();
      /* slot 0 = conditional, slot 1 = negative prompt */
      if (M == 2) rank_cfg_combine(v[1], v[0], job->cfg, v[0], (size_t)n);
      rank_sampler_step(smp, i, v[0], latent);
      st->compute_s += comm_now() - t0;
      if (!first) { /* after the last step too: rank 0 reports it */
        comm_tp_isend(tp, latent, (size_t)n * sizeof(float), 0, TAG_LATENT, &lat_req, NULL);
        comm_tp_wait(tp, &lat_req, timeout_s, "sending the latent to stage 0", &st->send_s);
      }
      if (first && progress) report_progress(i + 1, job->steps, t_start);
    }
  }
  if (first && !last) {
    for (int k = 0; k < 2; k++)
      comm_tp_wait(tp, &send_req[k], timeout_s, "sending activations", &st->send_s);
    comm_xfer fin;
    memset(&fin, 0, sizeof fin);
    comm_tp_irecv(tp, latent, (size_t)n * sizeof(float), P - 1, TAG_LATENT, &fin, NULL);
    comm_tp_wait(tp, &fin, timeout_s, "receiving the final latent", &st->wait_s);
    if (progress) report_progress(job->steps, job->steps, t_start);
  }
  if (last) memcpy(job->out, latent, (size_t)n * sizeof(float));
done:
  rank_sampler_destroy(smp);
  free(latent);
  free(v[0]);
  free(v[1]);
  rank_stage_host_free(scfg, act[0]);
  rank_stage_host_free(scfg, act[1]);
  return rc;
}
