/* The stage loop (see pipeline.h). */
#include "pipeline.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "trace.h"

/* Tags: the latent of job j travels as TAG_LATENT + j, micro-batch k of a
 * step as TAG_ACT + k, the velocity of the step's micro-batch k between
 * replicas as TAG_VEL + k, with step caching the transformer's input of
 * micro-batch k from stage 0 to the last stage as TAG_IN + k
 * (k < 2 * RANK_PIPE_MAX_JOBS). */
enum { TAG_LATENT = 10, TAG_VEL = 40, TAG_ACT = 100, TAG_IN = 200 };

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

/* The activation buffers of a stage and the transfers in flight on them.
 * Micro-batches are numbered over the whole loop (g = step * K + k) and g
 * uses buffer g % nbuf. */
#define MAX_BUFS (2 * RANK_PIPE_MAX_JOBS + 2)
typedef struct bufs {
  comm_transport *tp;
  rank_stage *s;
  void *stream;
  size_t bytes;
  int nbuf, K, prev, next; /* prev, next: the neighbouring stages' ranks (-1: none) */
  int64_t total, posted, consumed; /* micro-batches in all, receives posted, computed and sent */
  comm_xfer send[MAX_BUFS], recv[MAX_BUFS];
  double timeout_s;
  int steps; /* of the run, for messages */
  rank_pipe_stats *stats;
  /* Step caching (DESIGN.md "Step caching"): this replica's micro-batches
   * and their jobs (rank_job_cache_act), the ranks of stage 0 and the last
   * stage, and per local micro-batch k the transfer of its input from
   * stage 0's cache buffer k to the last stage's (in_x[k]; NULL: no cache). */
  const rank_job *jobs;
  const micro *mb;
  int first, last, stage0, stage_last;
  comm_xfer *in_x;
} bufs;

/* What the step's local micro-batch k does at step i. */
static int cache_act(const bufs *b, int i, int k) {
  return rank_job_cache_act(&b->jobs[b->mb[k].job], i, b->mb[k].branch);
}

/* Posts the receives of the next micro-batches into the buffers that are
 * free: a buffer is free once its last micro-batch was computed and its
 * send completed. */
static void post_recvs(bufs *b) {
  if (b->prev < 0) return;
  while (b->posted < b->total && b->posted < b->consumed + b->nbuf) {
    int i = (int)(b->posted % b->nbuf), k = (int)(b->posted % b->K);
    const int step = (int)(b->posted / b->K), skip = cache_act(b, step, k) == RANK_CACHE_SKIP;
    b->posted++;
    /* A skipped micro-batch goes from stage 0 straight to the last stage. */
    if (skip && !b->last) continue;
    traced_wait(b->tp, &b->send[i], b->timeout_s, "sending activations", &b->stats->send_s,
                "send act", step, k);
    comm_tp_irecv(b->tp, rank_stage_act(b->s, i), b->bytes, skip ? b->stage0 : b->prev,
                  TAG_ACT + k, &b->recv[i], b->stream);
  }
}

/* Stage 0 after embedding micro-batch k of step i into buffer b: a step
 * whose residual is kept needs its input on the last stage (itself: a
 * copy; else a message from a copy, since the blocks change b in place). */
static void cache_send_input(bufs *B, int i, int k, int b) {
  if (cache_act(B, i, k) != RANK_CACHE_STORE) return;
  if (!B->last)
    traced_wait(B->tp, &B->in_x[k], B->timeout_s, "sending the cached step's input",
                &B->stats->send_s, "send in", i, k);
  rank_stage_cache(B->s, RANK_CACHE_TAKE, b, k);
  if (!B->last)
    comm_tp_isend(B->tp, rank_stage_cache_buf(B->s, k), rank_stage_cache_bytes(B->s),
                  B->stage_last, TAG_IN + k, &B->in_x[k], B->stream);
}

/* Host time of a compute call. With --trace the stage is synchronised after
 * it, so the span is the device's work and not only its queueing. */
static void compute_done(rank_stage *s, const char *name, double t0, int step, int mb,
                         rank_pipe_stats *stats) {
  stats->queue_s += comm_now() - t0;
  if (rank_trace_on()) rank_stage_sync(s);
  rank_trace_pop();
  rank_trace_span(name, "compute", t0, step, mb);
  stats->compute_s += comm_now() - t0;
}

/* The index of the first NaN or infinite value of x[0 .. n), or -1. One
 * pass, on data the caller has just produced or is about to use. */
static int64_t first_nonfinite(const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(x[i])) return i;
  return -1;
}

/* Ends the job (exit 1, every rank) when x holds a non-finite value: what
 * says which data of step i (0-based) it is and who made it. */
static void check_finite(const float *x, int64_t n, int i, int steps, const char *what) {
  int64_t bad = first_nonfinite(x, n);
  if (bad >= 0)
    sp_fatal("step %d of %d: %s: a non-finite value (%s) at element %lld", i + 1, steps,
             what, isnan(x[bad]) ? "NaN" : "Inf", (long long)bad);
}

/* After the blocks, micro-batch k of step i in buffer b (its cache action
 * act): the last stage keeps or adds the residual and runs the head into
 * v; stage 0 sends a skipped one straight to the last stage; every other
 * computed one goes on to the next stage. */
static void pass_on(bufs *B, int act, int b, int i, int k, const micro *m, float *(*v)[2]) {
  rank_stage *s = B->s;
  rank_pipe_stats *stats = B->stats;
  if (B->last) {
    if (act == RANK_CACHE_STORE) {
      if (!B->first)
        traced_wait(B->tp, &B->in_x[k], B->timeout_s, "receiving the cached step's input",
                    &stats->wait_s, "recv in", i, k);
      rank_stage_cache(s, RANK_CACHE_KEEP, b, k);
    } else if (act == RANK_CACHE_SKIP) {
      rank_stage_cache(s, RANK_CACHE_ADD, b, k);
    }
    double th = comm_now();
    rank_trace_push("head");
    rank_stage_head(s, b, v[m->job][m->branch]);
    compute_done(s, "head", th, i, k, stats);
  } else if (act == RANK_CACHE_SKIP) {
    if (B->first)
      comm_tp_isend(B->tp, rank_stage_act(s, b), B->bytes, B->stage_last, TAG_ACT + k,
                    &B->send[b], B->stream);
  } else {
    /* Checked where it leaves the rank that made it (host buffers: the
     * CPU backend; device activations are not read back for this). */
    if (!B->stream) {
      char what[160];
      const rank_stage_cfg *c = rank_stage_get_cfg(s);
      snprintf(what, sizeof what, "micro-batch %d: the activations this rank's blocks %d-%d made",
               k, c->first_block, c->last_block);
      check_finite(rank_stage_act(s, b), (int64_t)(B->bytes / sizeof(float)), i, B->steps, what);
    }
    comm_tp_isend(B->tp, rank_stage_act(s, b), B->bytes, B->next, TAG_ACT + k, &B->send[b],
                  B->stream);
  }
}

/* One blocks call of step i on micro-batches k0 .. k0 + G - 1: stage 0
 * embeds them (once the buffer's previous send is done), a later stage
 * waits for their receives; then the blocks; then the last stage runs the
 * head into v, every other stage sends the buffers on. With step caching a
 * skipped micro-batch runs no block: stage 0 sends its embedding straight
 * to the last stage, which adds the kept residual before the head, and a
 * middle stage never sees it. */
static void run_group(bufs *B, const rank_job *jobs, const micro *mb, int k0, int G, int i,
                      float *const *latent, float *(*v)[2]) {
  const int first = B->first, last = B->last;
  rank_stage *s = B->s;
  rank_pipe_stats *stats = B->stats;
  /* bi, act: each micro-batch's buffer and cache action; slots, run: the
   * prompt slots and buffers of those that run the blocks (not skipped) */
  int bi[2 * RANK_PIPE_MAX_JOBS], act[2 * RANK_PIPE_MAX_JOBS];
  int slots[2 * RANK_PIPE_MAX_JOBS], run[2 * RANK_PIPE_MAX_JOBS], nrun = 0;
  for (int k = k0; k < k0 + G; k++) {
    const rank_job *jb = &jobs[mb[k].job];
    int b = (int)(((int64_t)i * B->K + k) % B->nbuf);
    bi[k - k0] = b;
    act[k - k0] = cache_act(B, i, k);
    if (act[k - k0] != RANK_CACHE_SKIP) {
      slots[nrun] = jb->slot0 + mb[k].branch;
      run[nrun++] = b;
    }
    if (first) {
      /* The buffer may still be on its way to the next stage. */
      traced_wait(B->tp, &B->send[b], B->timeout_s, "sending activations", &stats->send_s,
                  "send act", i, k);
      double t0 = comm_now();
      rank_trace_push("embed");
      const double t = (double)jb->timesteps[i];
      rank_stage_embed(s, latent[mb[k].job], t, jb->frame0 ? 0.0 : t, b);
      compute_done(s, "embed", t0, i, k, stats);
      cache_send_input(B, i, k, b);
    } else if (act[k - k0] != RANK_CACHE_SKIP || last) {
      traced_wait(B->tp, &B->recv[b], B->timeout_s,
                  "receiving activations from the previous stage", &stats->wait_s, "recv act", i, k);
      if (last && act[k - k0] == RANK_CACHE_STORE)
        comm_tp_irecv(B->tp, rank_stage_cache_buf(s, k), rank_stage_cache_bytes(s), B->stage0,
                      TAG_IN + k, &B->in_x[k], B->stream);
    }
  }
  if (nrun > 0) {
    double t0 = comm_now();
    rank_trace_push("blocks");
    rank_stage_blocks(s, nrun, slots, run);
    compute_done(s, "blocks", t0, i, G == 1 ? k0 : -1, stats);
  }
  for (int k = k0; k < k0 + G; k++) pass_on(B, act[k - k0], bi[k - k0], i, k, &mb[k], v);
  B->consumed += G;
  post_recvs(B);
}

/* Stage 0 learned that step i is done: its wall clock since the end of
 * the one before, as a switch step (its expert differs from step i - 1's)
 * or another step (not the first, which carries one-time costs). */
static void step_done(rank_pipe_stats *st, const rank_job *j, int i, double *t_prev) {
  const double now = comm_now(), dt = now - *t_prev;
  *t_prev = now;
  if (i == 0) return;
  if (j->expert && j->expert[i] != j->expert[i - 1]) {
    st->switch_s += dt;
    st->switch_steps++;
  } else {
    st->other_s += dt;
    st->other_steps++;
  }
}

/* The rank of this rank's replica and sequence-parallel index at stage. */
static int stage_peer(const plan_grid *g, plan_grid_pos me, int stage) {
  return plan_grid_rank(g, (plan_grid_pos){me.replica, stage, me.seq});
}

/* One sampling loop on this rank: its place in the grid, the step's
 * micro-batches (all) and its replica's share of them (mb, K of them, G per
 * blocks call), its activation buffers, and on stage 0 and the last stage
 * the jobs' latents (n floats, lat_bytes each), on the last stage their
 * velocities and samplers. */
typedef struct loop {
  const rank_pipe_ctx *c;
  plan_grid_pos pos;
  const rank_job *jobs;
  int njobs, steps, first, last;
  micro all[2 * RANK_PIPE_MAX_JOBS], mb[2 * RANK_PIPE_MAX_JOBS];
  int owner[2 * RANK_PIPE_MAX_JOBS]; /* the replica of each of all */
  int KA, K, G;
  int64_t n;
  size_t lat_bytes;
  bufs B;
  const rank_stage_cfg *scfg;
  comm_xfer lat_req[RANK_PIPE_MAX_JOBS];
  comm_xfer *vel_req; /* the last stage with replicas: (KA x R) velocity transfers */
  float *latent[RANK_PIPE_MAX_JOBS], *v[RANK_PIPE_MAX_JOBS][2];
  rank_sampler *smp[RANK_PIPE_MAX_JOBS];
  rank_pipe_stats *stats;
  double t_start, t_prev; /* the loop's start, the end of stage 0's last step */
} loop;

/* Replicas: the last stages' exchange of the step's head outputs. The
 * step's micro-batch k (of all) belongs to replica owner[k], whose last
 * stage sends its velocity to the last stage of every other replica (the
 * same sequence-parallel index), so that each holds every job's branches
 * and takes the same sampler step. */
static void exchange_velocities(loop *L) {
  const plan_grid *g = L->c->grid;
  comm_transport *tp = L->c->tp;
  const plan_grid_pos me = L->pos;
  comm_xfer *x = L->vel_req;
  const int R = g->replicas;
  int nx = 0;
  for (int k = 0; k < L->KA; k++) {
    float *buf = L->v[L->all[k].job][L->all[k].branch];
    const int owner = L->owner[k];
    for (int r = 0; r < R; r++) {
      if (r == me.replica || (owner != me.replica && r != owner)) continue;
      const int peer = plan_grid_rank(g, (plan_grid_pos){r, g->stages - 1, me.seq});
      memset(&x[nx], 0, sizeof x[nx]);
      if (owner == me.replica)
        comm_tp_isend(tp, buf, L->lat_bytes, peer, TAG_VEL + k, &x[nx++], NULL);
      else
        comm_tp_irecv(tp, buf, L->lat_bytes, peer, TAG_VEL + k, &x[nx++], NULL);
    }
  }
  double t0 = rank_trace_now();
  wait_all(tp, x, nx, L->c->timeout_s, "exchanging the velocities between replicas",
           &L->stats->wait_s);
  rank_trace_span("exchange velocities", "wait", t0, -1, -1);
}

/* The transfers of the step cache's inputs, when a job in flight caches:
 * stage 0 and the last stage hold cache buffers for them (cfg.cache, the
 * plan's: planner/layout.c). */
static void cache_setup(bufs *B, const rank_job *jobs, int njobs) {
  int any = 0;
  for (int j = 0; j < njobs; j++) any |= jobs[j].cache != NULL;
  if (!any || (!B->first && !B->last)) return;
  if (!rank_stage_get_cfg(B->s)->cache || B->K > rank_stage_get_cfg(B->s)->prompts)
    sp_fatal("internal: a job caches steps on a stage loaded without the step cache's buffers");
  B->in_x = sp_xcalloc((size_t)B->K, sizeof *B->in_x);
}

/* The micro-batches of one step of the jobs in flight, into all (job,
 * branch, in job order); returns their count. The jobs must agree in
 * steps, latent shape and experts' steps (the caller groups them so). */
static int micro_batches_of(const rank_job *jobs, int njobs, micro *all) {
  const int steps = jobs[0].steps;
  int KA = 0;
  for (int j = 0; j < njobs; j++) {
    if (jobs[j].steps != steps || memcmp(jobs[j].lat, jobs[0].lat, sizeof jobs[0].lat) != 0)
      sp_fatal("internal: jobs in flight together differ in steps or latent shape");
    if ((jobs[j].expert == NULL) != (jobs[0].expert == NULL) ||
        (jobs[0].expert && memcmp(jobs[j].expert, jobs[0].expert, (size_t)steps) != 0))
      sp_fatal("internal: jobs in flight together differ in their experts' steps");
    if ((jobs[j].cond == NULL) != (jobs[0].cond == NULL))
      sp_fatal("internal: jobs in flight together differ in having an image's conditioning");
    for (int b = 0; b < rank_job_micro_batches(&jobs[j]); b++) all[KA++] = (micro){j, b};
  }
  return KA;
}

/* A TI2V job's image frame (rank_job.frame0) into latent frame 0 of
 * latent (out_dim, F, H, W): the published (1 - mask2) z + mask2 x with a
 * 0/1 mask is this copy. */
static void put_frame0(const rank_job *j, float *latent) {
  if (!j->frame0) return;
  const int64_t hw = j->lat[2] * j->lat[3], fhw = j->lat[1] * hw;
  for (int64_t c = 0; c < j->lat[0]; c++)
    memcpy(latent + c * fhw, j->frame0 + c * hw, (size_t)hw * sizeof *latent);
}

/* The last stage's step i of job j: its branches' velocities v (n floats
 * each, checked finite), combined by the guidance scale of step i's expert
 * (branch 0 conditional, branch 1 negative prompt), then the sampler's
 * update of latent. on_device: the head ran on a GPU, whose activations
 * are not checked on the way. */
static void sampler_step(const rank_job *j, rank_sampler *smp, int i, float *const v[2],
                         float *latent, int64_t n, int on_device) {
  for (int b = 0; b < rank_job_micro_batches(j); b++)
    check_finite(v[b], n, i, j->steps,
                 on_device ? "the head output of this rank (made here or, on GPUs, "
                             "on an earlier rank: device activations are not checked)"
                           : "the head output this rank made");
  const float g = j->expert && j->expert[i] == RANK_EXPERT_LOW ? j->cfg_low : j->cfg;
  if (rank_job_micro_batches(j) == 2) rank_cfg_combine(v[1], v[0], g, v[0], (size_t)n);
  rank_sampler_step(smp, i, v[0], latent);
  put_frame0(j, latent);
  check_finite(latent, n, i, j->steps, "the latent this rank's sampler updated");
}

/* The loop's place, micro-batches and activation buffers (no host
 * buffers yet). */
static void loop_init(loop *L, const rank_pipe_ctx *c, const rank_job *jobs, int njobs,
                      rank_pipe_stats *stats) {
  const plan_grid *grid = c->grid;
  const plan_grid_pos pos = plan_grid_pos_of(grid, c->w->rank);
  const int S = grid->stages, R = grid->replicas;
  const int first = pos.stage == 0, last = pos.stage == S - 1;
  if (njobs < 1 || njobs > RANK_PIPE_MAX_JOBS)
    sp_fatal("internal: %d jobs in flight (1..%d)", njobs, RANK_PIPE_MAX_JOBS);
  *L = (loop){.c = c, .pos = pos, .jobs = jobs, .njobs = njobs, .steps = jobs[0].steps,
              .first = first, .last = last, .stats = stats, .scfg = rank_stage_get_cfg(c->s)};
  L->KA = micro_batches_of(jobs, njobs, L->all);
  plan_grid_owners(grid, c->replica_speed, L->KA, L->owner);
  for (int k = 0; k < L->KA; k++)
    if (L->owner[k] == pos.replica) L->mb[L->K++] = L->all[k];
  const int K = L->K, nbuf = L->scfg->act_buffers;
  if (nbuf > MAX_BUFS || (c->block_major && nbuf < K))
    sp_fatal("internal: %d activation buffers for %d micro-batches (%s)", nbuf, K,
             c->block_major ? "block-major needs one per micro-batch" : "too many");
  L->G = c->block_major && K > 0 ? K : 1;
  L->n = jobs[0].lat[0] * jobs[0].lat[1] * jobs[0].lat[2] * jobs[0].lat[3];
  L->lat_bytes = (size_t)L->n * sizeof(float);
  rank_stage *s = c->s;
  L->B = (bufs){.tp = c->tp, .s = s, .stream = rank_stage_stream(s),
                .bytes = rank_stage_act_bytes(s), .nbuf = nbuf, .K = K > 0 ? K : 1,
                .prev = first ? -1 : stage_peer(grid, pos, pos.stage - 1),
                .next = last ? -1 : stage_peer(grid, pos, pos.stage + 1),
                .total = (int64_t)L->steps * K, .timeout_s = c->timeout_s, .stats = stats,
                .steps = L->steps, .jobs = jobs, .mb = L->mb, .first = first, .last = last,
                .stage0 = stage_peer(grid, pos, 0), .stage_last = stage_peer(grid, pos, S - 1)};
  cache_setup(&L->B, jobs, njobs);
  if (last && R > 1) L->vel_req = sp_xcalloc((size_t)(L->KA * R), sizeof *L->vel_req);
}

/* Stage 0's and the last stage's latents, the last stage's velocities and
 * samplers. Pinned: stage 0 copies the latent to the device
 * asynchronously. The latent changes only in the sampler (after
 * rank_stage_sync) or by the next step's message, which the last stage
 * sends only after it received every micro-batch this stage computed from
 * it. On stage 0 an I2V job's y follows it in the same buffer: the model's
 * input [x; y] (x alone travels between the stages). */
static int loop_host_alloc(loop *L) {
  const rank_job *jobs = L->jobs;
  const int64_t voxels = jobs[0].lat[1] * jobs[0].lat[2] * jobs[0].lat[3];
  const int64_t ncond = L->first ? voxels * wan_cond_channels(rank_stage_config(L->c->s)) : 0;
  if (ncond && !jobs[0].cond)
    sp_fatal("internal: an image-to-video model's job without its conditioning");
  for (int j = 0; j < L->njobs && (L->first || L->last); j++) {
    L->latent[j] = rank_stage_host_alloc(L->scfg, L->lat_bytes + (size_t)ncond * sizeof(float));
    memcpy(L->latent[j], jobs[j].noise, L->lat_bytes);
    if (ncond) memcpy(L->latent[j] + L->n, jobs[j].cond, (size_t)ncond * sizeof(float));
    put_frame0(&jobs[j], L->latent[j]);
  }
  for (int j = 0; j < L->njobs && L->last; j++) {
    for (int b = 0; b < rank_job_micro_batches(&jobs[j]); b++)
      L->v[j][b] = rank_stage_host_alloc(L->scfg, L->lat_bytes);
    int rc = rank_sampler_create(jobs[j].sampler, L->steps, jobs[j].sigmas, (size_t)L->n,
                                 &L->smp[j]);
    if (rc != SP_OK) return rc;
  }
  return SP_OK;
}

static void loop_free(loop *L) {
  free(L->B.in_x);
  free(L->vel_req);
  for (int j = 0; j < L->njobs; j++) {
    rank_sampler_destroy(L->smp[j]);
    rank_stage_host_free(L->scfg, L->latent[j]);
    rank_stage_host_free(L->scfg, L->v[j][0]);
    rank_stage_host_free(L->scfg, L->v[j][1]);
  }
}

/* Stage 0 (not also the last) before its step i > 0: the latents the last
 * stage updated at step i - 1, which ends stage 0's step i - 1. */
static void stage0_recv_latents(loop *L, int i) {
  comm_transport *tp = L->c->tp;
  rank_pipe_stats *stats = L->stats;
  post_latents(tp, L->latent, L->njobs, L->lat_bytes, L->B.stage_last, 0, L->lat_req);
  double tw = rank_trace_now();
  wait_all(tp, L->lat_req, L->njobs, L->c->timeout_s, "receiving the latents from the last stage",
           &stats->wait_s);
  rank_trace_span("recv latents", "wait", tw, i, -1);
  if (i == 1) stats->first_step_s += comm_now() - L->t_start;
  step_done(stats, &L->jobs[0], i - 1, &L->t_prev);
  if (L->c->progress) report_progress(i, L->steps, L->t_start);
}

/* The last stage after step i's heads: the velocities (exchanged between
 * replicas), every job's sampler step, the latents back to stage 0. */
static void last_stage_step(loop *L, int i) {
  comm_transport *tp = L->c->tp;
  rank_pipe_stats *stats = L->stats;
  const int first = L->first;
  double t0 = comm_now();
  rank_stage_sync(L->c->s); /* the head outputs are on the host */
  if (L->c->grid->replicas > 1) exchange_velocities(L);
  for (int j = 0; j < L->njobs; j++)
    sampler_step(&L->jobs[j], L->smp[j], i, L->v[j], L->latent[j], L->n, L->B.stream != NULL);
  rank_trace_span("sampler", "compute", t0, i, -1);
  stats->compute_s += comm_now() - t0;
  if (!first) { /* after the last step too: rank 0 reports it */
    post_latents(tp, L->latent, L->njobs, L->lat_bytes, L->B.stage0, 1, L->lat_req);
    wait_all(tp, L->lat_req, L->njobs, L->c->timeout_s, "sending the latents to stage 0",
             &stats->send_s);
  }
  if (first && L->c->progress) report_progress(i + 1, L->steps, L->t_start);
  if (first && i == 0) stats->first_step_s += comm_now() - L->t_start;
  if (first) step_done(stats, &L->jobs[0], i, &L->t_prev);
}

/* After the last step: the sends still in flight, stage 0's final latents,
 * the jobs' results. */
static void loop_finish(loop *L) {
  comm_transport *tp = L->c->tp;
  rank_pipe_stats *stats = L->stats;
  const double timeout_s = L->c->timeout_s;
  const int first = L->first, last = L->last, steps = L->steps;
  if (!last) wait_all(tp, L->B.send, L->B.nbuf, timeout_s, "sending activations", &stats->send_s);
  if (L->B.in_x && first && !last)
    wait_all(tp, L->B.in_x, L->K, timeout_s, "sending the cached steps' inputs", &stats->send_s);
  if (first && !last) {
    post_latents(tp, L->latent, L->njobs, L->lat_bytes, L->B.stage_last, 0, L->lat_req);
    wait_all(tp, L->lat_req, L->njobs, timeout_s, "receiving the final latents", &stats->wait_s);
    if (steps == 1) stats->first_step_s += comm_now() - L->t_start;
    step_done(stats, &L->jobs[0], steps - 1, &L->t_prev);
    if (L->c->progress) report_progress(steps, steps, L->t_start);
  }
  rank_stage_sync(L->c->s);
  for (int j = 0; j < L->njobs && last; j++) memcpy(L->jobs[j].out, L->latent[j], L->lat_bytes);
  stats->sample_s += comm_now() - L->t_start;
  stats->steps += steps;
}

int rank_pipeline_sample(const rank_pipe_ctx *c, const rank_job *jobs, int njobs,
                         rank_pipe_stats *stats) {
  loop L;
  loop_init(&L, c, jobs, njobs, stats);
  int rc = loop_host_alloc(&L);
  if (rc != SP_OK) {
    loop_free(&L);
    return rc;
  }
  L.t_start = L.t_prev = comm_now();
  for (int i = 0; i < L.steps; i++) {
    double t_step = rank_trace_now();
    /* Every call of this rank's step i (embed, blocks, head) uses step i's
     * expert; the calls of step i - 1 were all queued before. */
    if (jobs[0].expert) rank_stage_set_expert(c->s, jobs[0].expert[i]);
    if (L.first && !L.last && i > 0) stage0_recv_latents(&L, i);
    post_recvs(&L.B);
    for (int k0 = 0; k0 < L.K; k0 += L.G) run_group(&L.B, jobs, L.mb, k0, L.G, i, L.latent, L.v);
    if (L.last) last_stage_step(&L, i);
    rank_trace_span("step", "step", t_step, i, -1);
  }
  loop_finish(&L);
  loop_free(&L);
  return SP_OK;
}
