/* Internal to the job library: the session's state, shared by job_run.c
 * (stage, sampling, summary), job_io.c (a job's inputs and outputs) and
 * job_plan.c (device and plan). The commands use job.h. */
#ifndef JOB_SESSION_H
#define JOB_SESSION_H

#include "job.h"
#include "vae_file.h"

/* What the job loop shares: the world, the model, the plan and the stage,
 * which stays loaded from job to job while the latent shape stays. */
struct job_session {
  const comm_world *w;
  job_opts *o;
  comm_transport *tp;
  rank_model *m;
  vae_model *vae;     /* --vae (metadata on every rank; the last rank decodes) */
  rank_lora *lora;    /* merged: the LoRAs merged into m's groups as they are read;
                       * bypass: those the stage's pairs come from */
  /* bypass: the LoRAs the stage's pairs are of (lora_set 0: none set yet) */
  rank_lora_spec lora_cur[RANK_LORA_MAX];
  int nlora_cur, lora_set;
  plan p;
  int planned;        /* p holds the plan */
  int fatal;          /* a failure ended the session */
  job_spec *jobs;     /* every job, the same list on every rank */
  int njobs, single;  /* single: the command line's one job, no --jobs */
  job_inputs in0;     /* the single job's inputs (rank 0), read before planning */
  int in_flight;      /* jobs in flight together at most */
  int prompts;        /* prompt slots the stage holds */
  int slots_per_job;  /* prompt slots of one job in flight (2 with CFG) */
  int block_major;    /* this rank's order of work (--order, else the plan's) */
  int *job_rc;        /* each job's status */
  rank_stage *stage;
  int64_t stage_lat[4];
  comm_group seq;     /* the sequence-parallel ranks of this rank's stage (U > 1) */
  job_rank_stats sum;
};

/* job_plan.c */
int job_pick_gpu(const comm_world *w, job_opts *o);
/* Rank 0 plans, every rank gets the plan and checks it applies to it. */
int job_make_plan(const comm_world *w, const job_opts *o, rank_model *m,
                  const plan_workload *wl, uint64_t decoder_bytes, plan *p);

/* job_io.c */
/* Rank 0 reads and checks a job's inputs before any of its work starts. */
int job_read_inputs(const job_session *s, const job_spec *j, job_inputs *in);
int job_write_output(const job_session *s, const job_spec *j, const int64_t *lat,
                     const float *latents);
void job_log(const job_session *s, const job_spec *j);

#endif
