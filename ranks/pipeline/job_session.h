/* A job's runtime: the session that runs a job's parameters (job_params.h)
 * on a world of ranks. It holds what only exists while running: the log
 * files, the watchdog, the device each rank resolved and its GPU, the
 * transport, the model, the VAE and the stage, the LoRA mode the jobs
 * settle on, and the plan every rank follows.
 *
 *   job_session_open ... job_session_plan ... job_session_run
 *   ... job_session_finish, job_session_close
 *
 * Files: job_session.c (open, plan, finish, close), job_run.c (the jobs in
 * groups), job_stage.c (this rank's stage), job_device.c (device, GPU and
 * the plan every rank follows), job_cache.c, job_lora.c, job_prompt.c,
 * job_io.c, job_stream.c; the shared state is job_session_impl.h. */
#ifndef JOB_SESSION_H
#define JOB_SESSION_H

#include <stdint.h>

#include "comm.h"
#include "job_params.h"
#include "plan.h"
#include "stage.h"
#include "step_cache.h"

/* --device resolved on this machine: auto is cuda when a GPU is visible.
 * SP_OK or SP_ERR_INPUT (cuda without a GPU or a CUDA build; logged). */
int job_device_resolve(const job_params *p, rank_device *out);

/* What a rank did, gathered on rank 0 for the summary. */
typedef struct job_rank_stats {
  int first, last;
  uint64_t bytes_loaded;
  double load_s, compute_s, wait_s, send_s, queue_s;
  double sample_s;     /* wall time of the sampling loops */
  double first_step_s; /* rank 0: the first step of each group (one-time costs) */
  int groups;          /* sampling loops run (each has a first step) */
  int steps;           /* steps run, over every job */
  int order;           /* PLAN_ORDER_MICRO or _BLOCK: this rank's order of work */
  int streamed;        /* blocks streamed from host memory */
  uint64_t h2d_bytes;  /* streamed weight bytes copied while sampling */
  uint64_t arena_bytes, device_in_use, device_peak; /* the last stage loaded */
  uint64_t plan_peak_bytes; /* the planner's device peak for this rank */
  double weights_s;         /* reading and placing the weights (within load_s) */
  double link_gbs;          /* the probed activation rate to the next stage, 0 on the last */
  uint64_t act_bytes;       /* one activation message */
  double switch_s, other_s; /* rank 0: steps that switch experts, other steps but each
                               loop's first (rank_pipe_stats) */
  int switch_steps, other_steps;
} job_rank_stats;

typedef struct job_session job_session;

/* After each phase every rank learns the worst status (comm_phase_end). */
int job_phase(const comm_world *w, int rc, const char *what);

/* Opens the log directory, the watchdog, this rank's device and GPU, the
 * transport and the model, for the parameters p (checked, paths too: a
 * copy is kept, and a two-expert model's defaults fill it). *out is set
 * even on failure (close it). */
int job_session_open(const comm_world *w, const job_params *p, job_session **out);
/* Rank 0 reads the jobs (p->jobs, else the command line's one job); every
 * rank gets the same list; reads the single job's inputs; plans. */
int job_session_plan(job_session *s);
/* The plan every rank follows (after job_session_plan). */
const plan *job_session_get_plan(const job_session *s);
/* Runs every job, in groups in flight together; each job's output written
 * by the last rank. Returns the worst job status (a failed load ends the
 * run). */
int job_session_run(job_session *s);
/* Logs the --jobs summary, gathers each rank's stats on rank 0 (*all, a
 * w->size array, free() it; NULL elsewhere). */
int job_session_finish(job_session *s, int rc, job_rank_stats **all);
/* Rank 0, step caching: the last job run with a cache, its spec and
 * actions (steps x micro, ranks/sampling/step_cache.h), and over every
 * cached job the micro-batch steps skipped and in all. Returns 0 (the
 * outputs untouched) when no job cached. */
int job_session_cache(const job_session *s, rank_cache_spec *spec, const uint8_t **act,
                      int *steps, int *micro, int64_t *skipped, int64_t *total);
void job_session_close(job_session *s);

#endif
