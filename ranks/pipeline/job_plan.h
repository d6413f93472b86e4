/* What a job's parameters mean for a model: the latent, its tokens and
 * micro-batches, the planner's workload, a two-expert model's defaults and
 * rules, the precision, and the plan. One function makes the plan for run
 * (rank 0, on every rank's device) and for plan (on devices that need not
 * be here): job_plan_make. Files: job_plan.c (facts, rules, the plan),
 * job_device.c (this rank's GPU and the plan every rank follows). */
#ifndef JOB_PLAN_H
#define JOB_PLAN_H

#include <stdint.h>

#include "job_params.h"
#include "model_file.h"
#include "plan.h"
#include "wan_config.h"

/* Micro-batches of a job: 2 (the conditional and the unconditional branch)
 * for any guidance scale other than 1 (either expert's), else 1. */
int job_micro_batches(const job_spec *j);
/* The latent [channels, F, H, W] a job samples: channels the model's
 * out_dim (the noise; an I2V model's input adds its conditioning y), F
 * from the 4x temporal VAE (first frame alone), H and W the VAE's spatial
 * factor (wan_vae_stride: 8, or 16 for TI2V). */
void job_latent_shape(const job_spec *j, const wan_config *c, int64_t lat[4]);
/* Floats of an image job's conditioning for its latent lat (job_image.h):
 * I2V's y (in_dim - out_dim, F, H, W), TI2V's z (out_dim, 1, H, W); 0
 * without an image. */
int64_t job_cond_floats(const job_spec *j, const wan_config *c, const int64_t lat[4]);
/* Tokens of the job's latent after the patch embedding. */
int64_t job_tokens(const job_spec *j, const wan_config *c);
/* The plan's workload for one job with batch items each (plan --batch). */
plan_workload job_workload(const job_spec *j, const wan_config *c, int batch);
/* Rank 0 of each group: the planner's input for a set of jobs run
 * together (the largest latent, two micro-batches when any uses CFG),
 * times in_flight jobs. Returns the index of the job with the largest
 * latent; -1 when every job is bad, with *wl an empty workload (0 tokens). */
int job_workload_of(const job_spec *jobs, int n, const wan_config *c, int in_flight,
                    plan_workload *wl);

/* ---- what depends on the model ---- */

/* The model's task's published defaults (TI2V-5B: 121 frames of 704x1280
 * at 24 fps; wan_task_defaults) and a two-expert model's (boundary, cfg
 * pair, shift, steps: its root attributes) fill what p->job was not given;
 * the task's rules (an image only for an image-to-video model, always for
 * I2V-A14B, TI2V's sizes multiples of 32); a one-expert model refuses two
 * --cfg values and --boundary (one line naming the flag); the precision is
 * checked (job_precision_check). SP_OK or SP_ERR_INPUT. */
int job_params_apply_model(job_params *p, const rank_model_info *mi);
/* The same checks for one job (a --jobs line, where "FILE:LINE"). */
int job_spec_check_model(const job_spec *j, const rank_model_info *mi, const char *where);
/* Each step's expert of job j on a model of experts experts (from its
 * schedule's timesteps: MODEL.md "Wan 2.2 A14B"), into expert[steps];
 * nothing for one expert. */
void job_step_experts(const job_spec *j, int experts, const int64_t *timesteps,
                      uint8_t *expert);
/* How the DiT's blocks run: --precision, or not given the file's
 * (rank_model_info.precision). */
wan_precision job_precision(const job_params *p, const rank_model_info *mi);
/* The precision against the model (rank_stage_precision_check: fp8 on an
 * int8 file, int8 or fp8 on a GGUF-converted one, --fp8-accum fast at any
 * precision but fp8; a GPU's own limits are the CUDA stage's to check).
 * SP_OK or SP_ERR_INPUT after one line. */
int job_precision_check(const job_params *p, const rank_model_info *mi);

/* ---- the plan ---- */

/* Sets the planner's options the job gives: --order, --stream-frac,
 * --chunk-rows, the simple attention's scratch on CUDA (the others stay). */
void job_plan_options(const job_params *p, int cuda, plan_options *po);

/* What a plan is made of. */
typedef struct job_plan_req {
  const job_params *p;    /* budget, --layout, --speed, --order, --stream-frac, ... */
  const rank_model *m;    /* the model (metadata: its blocks' sizes) */
  int weight_bytes;       /* a weight as placed: 2 (bf16 on a GPU) or 4 (fp32) */
  const plan_device *devs; /* every rank's device, nranks of them */
  int nranks;
  plan_workload wl;       /* the jobs' workload (job_workload, job_workload_of) */
  plan_options po;        /* the planner's options; the job's are set here */
  int cuda;               /* the stages run on GPUs */
  int cache;              /* some job caches steps: the plan counts the residuals */
  uint64_t lora_block_elems; /* bypassed LoRAs' room per block (0: none) */
  int64_t lora_rank;         /* their largest summed rank */
} job_plan_req;

/* The planner's model of r (blocks' bytes into bb[layers], the rest into
 * pm): weights as placed, in their device formats at the job's precision,
 * W8A8's epilogue where a rank's GPU takes it, the bypassed LoRAs' room,
 * the step cache. */
void job_plan_model(const job_plan_req *r, uint64_t *bb, plan_model *pm);
/* The plan: the grid --layout gives (auto: the planner's choice,
 * job_layout_resolve), checked against the ranks, the model and --speed,
 * the budget for its stages, then plan_make on the devices of replica 0's
 * stages; out->grid set. SP_OK, or SP_ERR_INPUT after the planner's lines
 * (a refusal may span several). */
int job_plan_make(const job_plan_req *r, plan *out);

#endif
