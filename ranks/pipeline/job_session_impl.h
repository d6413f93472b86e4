/* Internal to the job library: the session's state, shared by
 * job_session.c (open, plan, finish, close), job_run.c (the jobs run in
 * groups), job_stage.c (this rank's stage), job_cache.c (the step cache's
 * decisions), job_io.c (a job's inputs and outputs), job_device.c (device
 * and plan) and the files below. The commands use job_session.h. */
#ifndef JOB_SESSION_IMPL_H
#define JOB_SESSION_IMPL_H

#include "wan_vae_decode.h"
#include "gpu_share.h"
#include "job_image.h"
#include "job_io.h"
#include "job_plan.h"
#include "job_prompt.h"
#include "job_session.h"
#include "job_vae.h"
#include "jobs.h"
#include "lora.h"
#include "model_file.h"
#include "transport.h"

/* What the job loop shares: the world, the model, the plan and the stage,
 * which stays loaded from job to job while the latent shape stays. */
struct job_session {
  const comm_world *w;
  job_params params;  /* the command line's, a two-expert model's defaults applied */
  /* What the run resolved on this rank: its device, its GPU (CUDA) and who
   * shares it, the LoRA mode the jobs settle on (job_setup_loras), the
   * bypassed LoRAs' room per block and their largest rank (the plan and
   * the stage hold it), whether some job caches steps (the plan counts it). */
  rank_device dev;
  int cuda_device;
  comm_gpu_share gpu;
  rank_lora_mode lora_mode;
  uint64_t lora_block_elems;
  int64_t lora_rank;
  int cache_any;
  comm_transport *tp;
  rank_model *m;
  job_vae *vae;       /* --vae (metadata on every rank; rank 0 encodes the images, the last
                       * rank decodes) */
  rank_lora *lora;    /* merged: the LoRAs merged into m's groups as they are read;
                       * bypass: those the stage's pairs come from */
  /* bypass: the LoRAs the stage's pairs are of (lora_set 0: none set yet) */
  rank_lora_spec lora_cur[RANK_LORA_MAX];
  int nlora_cur, lora_set;
  plan plan;
  int planned;        /* plan holds the plan */
  int fatal;          /* a failure ended the session */
  job_spec *jobs;     /* every job, the same list on every rank */
  int njobs, single;  /* single: the command line's one job, no --jobs */
  /* --jobs a stream (job_stream.c): jobs[0] holds the job at hand; the
   * plan is for stream_tokens at most; reader (rank 0) reads its lines */
  int stream;
  job_reader *reader;
  int64_t stream_tokens;
  int stream_rc;      /* SP_ERR_INPUT when the stream ended on a read error */
  int ndone, nfailed; /* jobs finished and failed so far (job_report) */
  job_inputs in0;     /* the single job's inputs (rank 0), read before planning */
  job_prompts *prompt_ctx; /* rank 0: the jobs' encoded prompts (job_prompt.c) */
  job_images *images; /* rank 0: the jobs' image conditioning (job_image.c) */
  int in_flight;      /* jobs in flight together at most */
  int prompts;        /* prompt slots the stage holds */
  int slots_per_job;  /* prompt slots of one job in flight (2 with CFG) */
  int block_major;    /* this rank's order of work (--order, else the plan's) */
  int *job_rc;        /* each job's status */
  rank_stage *stage;
  int64_t stage_lat[4];
  comm_group seq;     /* the sequence-parallel ranks of this rank's stage (U > 1) */
  job_rank_stats sum;
  /* Rank 0, step caching: the last cached job's actions (cache_steps x
   * cache_micro) and spec; over every cached job, micro-batch steps skipped
   * and in all (job_cache_record) */
  uint8_t *cache_act;
  rank_cache_spec cache_spec;
  int cache_steps, cache_micro;
  int64_t cache_skipped, cache_total;
};

/* job_session.c */
/* A failure that ends the session: every later call is a no-op. Returns rc. */
int job_session_fail(job_session *s, int rc);

/* job_stage.c */
/* Loads this rank's blocks, sized for the plan's largest latent and laid
 * out for lat, unless they are loaded: then a new shape only re-lays the
 * activations. A failure here ends the run (the model is bad for every
 * job). */
int job_stage_ensure(job_session *s, const int64_t lat[4]);

/* job_cache.c */
/* Rank 0: counts, keeps and logs job j's step-cache actions. */
void job_cache_record(job_session *s, const job_spec *j, const uint8_t *act);
/* Job j's step-cache actions into *out (steps x micro, NULL without a
 * cache; free() it), of its timesteps ts and, with two experts, each
 * step's expert: decided on rank 0 (ranks/sampling/step_cache.h), every
 * rank gets them. Rank 0 logs the skipped steps and keeps them for --json. */
int job_cache_plan(job_session *s, const job_spec *j, const int64_t *ts, const uint8_t *expert,
                   uint8_t **out);

/* job_device.c */
/* This host's physical memory in bytes (0 when unknown). */
uint64_t job_host_memory(void);
/* This rank's GPU (s->cuda_device, s->gpu) when the run is on CUDA. */
int job_pick_gpu(job_session *s);
/* Rank 0 plans the workload wl (job_plan_make on every rank's device),
 * every rank gets the plan into s->plan and checks it applies to it. */
int job_make_plan(job_session *s, const plan_workload *wl, uint64_t decoder_bytes);

/* job_prompt.c */
/* Rank 0 encodes every good job's prompt (and, with CFG, negative prompt)
 * with --t5 into s->prompt_ctx, before the model is placed; a prompt the
 * tokenizer refuses makes its --jobs line bad (every rank learns it) or
 * ends a single run. Nothing when no job has a prompt. */
int job_prompts_encode(job_session *s);
/* Rank 0: job j's contexts from s->prompt_ctx into in->ctx (copies). */
int job_prompt_inputs(const job_session *s, const job_spec *j, job_inputs *in);

/* job_image.c */
/* Rank 0 reads every good job's image (or image latents), sets the job's
 * size (and frames) from it, prepares and encodes it with --vae's encoder
 * into s->images, before the model is placed; every rank gets the jobs'
 * sizes and which were refused (a single run ends). Nothing when no job
 * has an image. */
int job_images_prepare(job_session *s);
/* Rank 0, a streamed line (s->jobs[0], job_stream.c): its image latents
 * read into s->images (the previous line's freed), checked against the
 * latent grid the stream was planned for (the command line's --frames
 * and --size; TI2V: its first latent frame); the job's size (I2V: and
 * frames) set from them. image= is refused (its encoder would run after
 * the model is placed). Nothing without an image; SP_OK or SP_ERR_INPUT
 * (one line, naming the line). */
int job_image_stream(job_session *s, job_spec *j);
/* Rank 0: job j's conditioning from s->images into in->cond (a copy). */
int job_image_inputs(const job_session *s, const job_spec *j, job_inputs *in);

/* job_io.c */
/* Rank 0 reads and checks a job's inputs before any of its work starts. */
int job_read_inputs(const job_session *s, const job_spec *j, job_inputs *in);
int job_write_output(const job_session *s, const job_spec *j, const int64_t *lat,
                     const float *latents);
void job_log(const job_session *s, const job_spec *j);
/* The decode of job j's video from its latents, on the last rank. */
decode_opts job_decode_opts(const job_session *s, const job_spec *j);
/* Before any work: every job's video= needs --vae and, on the last rank
 * (which writes it), a path and an encoder that work. A job that fails a
 * check is marked bad on every rank; SP_ERR_INPUT when that ends a single
 * run. */
int job_check_videos(job_session *s);

/* job_lora.c */
/* The LoRA mode and, for merged, the merge set up before loading; bypass:
 * rank 0 checks each job's LoRAs (a job whose LoRAs cannot be bypassed is
 * marked bad on every rank). After every rank agrees: SP_OK or the worst. */
int job_setup_loras(job_session *s);
/* Bypass: gives the stage job j's LoRA pairs unless it holds them already. */
int job_use_loras(job_session *s, const job_spec *j);

/* job_stream.c */
/* Rank 0 opens the stream o->jobs; every rank learns the verdict. */
int job_stream_open(job_session *s);
/* Rank 0 reads and checks the next line into s->jobs[0] (against the plan
 * and the LoRAs of the run) and every rank gets it. Returns 1 for a job
 * (perhaps bad), 0 at the end (or a read error: s->stream_rc). */
int job_stream_next(job_session *s);
void job_stream_close(job_session *s);
/* Rank 0: the --jobs summary of a stream. */
void job_stream_summary(const job_session *s);
/* Job i of s->jobs finished with status rc after secs seconds: counted;
 * rank 0 logs a failed streamed job and, with --json, prints its line. */
void job_report(job_session *s, int i, int rc, double secs);

#endif
