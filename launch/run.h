/* The run command's pieces, shared by its files: cmd_run.c (the job loop),
 * run_options.c (flags), run_setup.c (device, plan, summary), run_io.c (a
 * job's inputs and outputs). */
#ifndef SP_RUN_H
#define SP_RUN_H

#include <stdint.h>
#include <stdio.h>

#include "comm.h"
#include "jobs.h"
#include "model_file.h"
#include "plan.h"
#include "stage.h"
#include "tensor_io.h"
#include "transport.h"

typedef struct run_opts {
  const char *model, *budget, *device, *jobs, *log_dir;
  rank_jobspec job; /* the command line's job; the defaults of --jobs lines */
  double timeout;
  comm_transport_kind transport;
  int verify, quiet, preview, json;
  rank_device dev;    /* from --device */
  rank_attn attn;     /* --attn */
  const char *devices; /* --devices LIST */
  const char *save_noise; /* --save-noise FILE */
  const char *trace;      /* --trace FILE.json */
  int profile;            /* --profile (CUDA) */
  int order;              /* --order: PLAN_ORDER_AUTO, _MICRO or _BLOCK */
  double stream_frac;     /* --stream-frac, -1: the budget decides */
  int64_t chunk_rows;     /* --chunk-rows, 0: the planner decides */
  int mem_trace;          /* --mem-trace (CUDA) */
  int cuda_device;    /* this rank's GPU (resolved after MPI start-up) */
} run_opts;

typedef struct rank_summary {
  int first, last;
  uint64_t bytes_loaded;
  double load_s, compute_s, wait_s, send_s, queue_s;
  double sample_s; /* wall time of the sampling loops */
  double first_step_s; /* rank 0: the first step of each group (one-time costs) */
  int groups;      /* sampling loops run (each has a first step) */
  int steps;       /* steps run, over every job */
  int order;       /* PLAN_ORDER_MICRO or _BLOCK: this rank's order of work */
  int streamed;    /* blocks streamed from host memory */
  uint64_t h2d_bytes;                  /* streamed weight bytes copied while sampling */
  uint64_t arena_bytes, device_in_use, device_peak; /* rank_stage_stats, the last stage loaded */
  uint64_t plan_peak_bytes;            /* the planner's device peak for this rank */
  double weights_s;                    /* reading and placing the weights (within load_s) */
} rank_summary;

/* What the job loop shares: the world, the model, the plan and the stage,
 * which stays loaded from job to job while the latent shape stays. */
typedef struct run_ctx {
  const comm_world *w;
  const run_opts *o;
  comm_transport *tp;
  rank_model *m;
  const plan *p;
  int prompts;        /* prompt slots the stage holds */
  int slots_per_job;  /* prompt slots of one job in flight (2 with CFG) */
  int block_major;    /* this rank's order of work (--order, else the plan's) */
  rank_stage *stage;
  int64_t stage_lat[4];
  rank_summary sum;
} run_ctx;

/* One job's inputs, on rank 0: the contexts and the initial noise. */
typedef struct job_inputs {
  rank_tensor ctx[2], noise;
} job_inputs;

/* Micro-batches of a job (2 with CFG) and its latent [16, F, H/8, W/8]. */
static inline int run_job_micro(const rank_jobspec *j) { return j->cfg != 1.0 ? 2 : 1; }
static inline void run_job_latent(const rank_jobspec *j, int64_t lat[4]) {
  lat[0] = 16;
  lat[1] = (j->frames - 1) / 4 + 1;
  lat[2] = j->height / 8;
  lat[3] = j->width / 8;
}

/* run_options.c */
void run_usage(FILE *f);
/* Every rank parses the same arguments and reaches the same verdict. */
int run_parse(int argc, char **argv, run_opts *o, int *help);

/* run_setup.c */
/* After each phase every rank learns the worst status (comm_phase_end). */
int run_phase(const comm_world *w, int rc, const char *what);
int run_pick_gpu(const comm_world *w, run_opts *o);
int run_make_plan(const comm_world *w, const run_opts *o, rank_model *m,
                  const plan_workload *wl, plan *p);
void run_print_json(const comm_world *w, const plan *p, const rank_summary *all);

/* run_io.c */
void run_inputs_free(job_inputs *in);
int run_read_inputs(const run_ctx *x, const rank_jobspec *j, job_inputs *in);
int run_write_output(const run_opts *o, const rank_jobspec *j, const rank_model_info *mi,
                     const int64_t *lat, const float *latents);
void run_log_job(const run_ctx *x, const rank_jobspec *j);

#endif
