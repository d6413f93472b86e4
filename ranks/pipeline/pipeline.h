/* The stage loop: micro-batches (CFG branches) flow stage 0 -> 1 -> ... ->
 * last through every sampling step (DESIGN.md "What a run does", step 4).
 *
 *   stage 0      embeds the latent and the step's time (e, e0), runs its
 *                blocks, sends the activation message on;
 *   middle       receives, runs its blocks, sends on;
 *   last stage   receives, runs its blocks and the head, combines CFG, takes
 *                the sampler step and sends the new latent back to stage 0.
 *
 * The activation buffers are the stage's own (device memory on CUDA): a
 * receive lands in one, the blocks run on it in place, the send leaves from
 * it. With several buffers a stage computes micro-batch i+1 while i is
 * still being sent and i+2 arrives: once the pipeline is full the stages
 * work on different micro-batches at the same time. A buffer is refilled
 * only after its send completed; the host waits on transfers (which also
 * keeps the watchdog in charge of every wait) but never on the stage's
 * stream inside a step, so the device always has the next micro-batch's
 * work queued. The step's one synchronisation is the last stage's, before
 * the sampler reads the head outputs on the host.
 *
 * Order of work. Micro-batch-major: a micro-batch goes through all of the
 * stage's blocks, then the next one. Block-major: the stage waits for all
 * micro-batches of the step, runs each block on all of them (a streamed
 * block is copied once per step instead of once per micro-batch), then
 * sends them all: fewer copies, no overlap between stages within a step.
 *
 * With one rank the same loop runs with no message at all. Every rank
 * computes exactly the same function of its input for each block, in either
 * order, so the latents are bit-identical for any number of ranks, any
 * split and either order.
 *
 * Layouts (planner/grid.h, DESIGN.md "Layouts"). With R replicas each runs
 * this loop over its own S stages on its share of the step's micro-batches
 * (micro-batch k of the step, counted over the jobs in flight, is replica
 * plan_grid_owners' k-th: k % R at equal speeds); before the sampler the replicas' last stages exchange their
 * head outputs, so that each holds every branch of every job and takes the
 * same CFG combine and sampler step: every replica's latent is the same,
 * bit for bit. With U sequence-parallel ranks per stage, rank u of a stage
 * talks to rank u of the neighbouring stages (its activation messages hold
 * its rows of the tokens); the stage itself exchanges heads within the
 * stage and gathers the whole velocity on each of its last stage's ranks.
 *
 * Step caching (DESIGN.md "Step caching"; rank_job.cache): a micro-batch
 * whose action is SKIP runs no block: stage 0 embeds it and sends the
 * message straight to the last stage, which adds the residual kept in its
 * stage (rank_stage_cache) before the head; middle stages never see it. At
 * a STORE step stage 0 also sends the transformer's input (TAG_IN) to the
 * last stage, which makes the residual from it after its blocks. */
#ifndef RANK_PIPELINE_H
#define RANK_PIPELINE_H

#include <stdint.h>

#include "comm.h"
#include "grid.h"
#include "transport.h"
#include "sampler.h"
#include "stage.h"
#include "step_cache.h"

typedef struct rank_job {
  int64_t lat[4];          /* latent (out_dim, F, H, W): what the sampler updates */
  int steps;
  const float *sigmas;     /* (steps + 1) */
  const int64_t *timesteps; /* (steps) */
  rank_sampler_kind sampler;
  float cfg;               /* guidance (of the high-noise expert with two) */
  float cfg_low;           /* two experts: the low-noise expert's guidance */
  const uint8_t *expert;   /* (steps) each step's expert (RANK_EXPERT_HIGH/_LOW), or
                              NULL for a one-expert model (MODEL.md "Wan 2.2 A14B") */
  int micro;               /* micro-batches: job_micro_batches(cfg), 2 with CFG */
  const float *noise;      /* stage 0 and last stage: initial latent (numel) */
  /* Image to video (I2V.md; job_image.h), NULL without an image:
   * cond      stage 0: an I2V model's y (in_dim - out_dim, F, H, W), the
   *           same every step, embedded after the latent ([x; y]);
   * frame0    stage 0 and last stage: a TI2V model's image latent
   *           (out_dim, 1, H, W), copied into latent frame 0 before the
   *           first step and after every sampler step; the tokens of that
   *           frame take timestep 0 (rank_stage_embed's t_first). */
  const float *cond, *frame0;
  float *out;              /* last stage: the final latent (numel) */
  int slot0;               /* its first prompt slot: conditional slot0, negative slot0 + 1 */
  /* Step caching (DESIGN.md "Step caching"): (steps x micro) what micro-batch
   * b does at step i, cache[i * micro + b]: RANK_CACHE_RUN, _STORE or _SKIP
   * (ranks/sampling/step_cache.h), the same on every rank; NULL: no cache. */
  const uint8_t *cache;
} rank_job;

/* What micro-batch b of job j does at step i (RANK_CACHE_RUN without a cache). */
static inline int rank_job_cache_act(const rank_job *j, int i, int b) {
  return j->cache ? j->cache[(int64_t)i * j->micro + b] : 0;
}

/* Jobs in flight together: independent jobs fill the pipeline (their
 * micro-batches flow through the stages one after the other within each
 * step), so the stages idle less than with one job's one or two. */
#define RANK_PIPE_MAX_JOBS 8

typedef struct rank_pipe_stats {
  double compute_s; /* blocks, embed, head, sampler */
  double queue_s;   /* host time inside the embed, blocks and head calls: on CUDA the
                       queueing of their work (the device runs it meanwhile) */
  double wait_s;    /* waiting for the previous stage (or the latent) */
  double send_s;    /* waiting for sends to complete */
  double sample_s;  /* the whole sampling loop, wall clock */
  double first_step_s; /* stage 0: the first step's wall clock (one-time costs land in it) */
  int steps;        /* steps run */
  /* Stage 0, two experts: the wall clock of the steps that switch experts
   * (the first step of the new expert) and of the other steps but the
   * first, and how many of each. */
  double switch_s, other_s;
  int switch_steps, other_steps;
} rank_pipe_stats;

static inline int rank_job_micro_batches(const rank_job *j) { return j->micro; }

/* What a sampling loop runs on: this rank's place in grid (R x S x U = the
 * world's ranks), its transport and stage; replica_speed: each replica's
 * relative speed (grid->replicas values, NULL: equal), whence its share of
 * the micro-batches (plan_grid_owners); block_major: the stage's blocks run
 * every micro-batch of a step in one call (the stage then needs at least
 * one activation buffer per micro-batch of a step); timeout_s bounds a wait
 * on a peer when no watchdog runs (with one, the watchdog judges: see
 * comm.h); progress: rank 0 reports progress. */
typedef struct rank_pipe_ctx {
  const comm_world *w;
  const plan_grid *grid;
  comm_transport *tp;
  rank_stage *s;
  const double *replica_speed;
  int block_major;
  double timeout_s;
  int progress;
} rank_pipe_ctx;

/* Runs, on c's rank and stage, the whole sampling loop of njobs jobs
 * (1..RANK_PIPE_MAX_JOBS, all of the stage's latent shape and the same
 * number of steps); activations go through c->tp from and to the stage's
 * buffers, latents as host messages. A job's prompt slots (set with
 * rank_stage_set_prompt before) start at its slot0.
 * Each job's result is bit-identical to running it alone: every
 * micro-batch goes through the same ops whatever runs beside it. With two
 * experts every rank selects step i's expert (jobs[q].expert[i], the same
 * for every job in flight) before its work of the step, and the last stage
 * combines CFG with that expert's guidance. */
int rank_pipeline_sample(const rank_pipe_ctx *c, const rank_job *jobs, int njobs,
                         rank_pipe_stats *stats);

/* Collective. Times the activation message (the stage's buffer 0, its
 * size, through tp) between each pair of neighbouring stages, hop after
 * hop, before sampling: one round trip to connect, then a few timed. Sets
 * *gbs on a hop's sending rank to the message's bytes over its one-way
 * time, in GB/s (0 on the last rank and with one rank). Overwrites buffer
 * 0, which the loop fills before it reads it. */
void rank_pipeline_probe(const comm_world *w, comm_transport *tp, rank_stage *s,
                         double timeout_s, double *gbs);

#endif
