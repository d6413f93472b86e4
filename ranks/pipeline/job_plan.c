/* The job's derived facts (latent shape, micro-batches, tokens, the
 * planner's workload), a model's rules and the one function that makes a
 * plan (see job_plan.h). */
#include "job_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout_grid.h"
#include "log.h"
#include "model_plan.h"
#include "stage.h"

int job_micro_batches(const job_spec *j) { return j->cfg != 1.0 || j->cfg_low != 1.0 ? 2 : 1; }

/* ---- a model's task (I2V.md) ---- */

/* "--key" or "where: key": how a message names a job's field. */
static void key_name(char *buf, size_t n, const char *where, const char *key) {
  if (where)
    snprintf(buf, n, "%s: %s", where, key);
  else
    snprintf(buf, n, "--%s", key);
}

/* The job against the model's task: an image only for an image-to-video
 * model, always for I2V (unless the job is the --jobs lines' defaults),
 * the size from the image, TI2V's multiples of 32. */
static int check_task(const job_spec *j, const rank_model_info *mi, const char *where,
                      int defaults) {
  const wan_task task = wan_config_task(&mi->config);
  const int image = j->image[0] || j->image_latents[0];
  char flag[JOB_PATH + 32];
  key_name(flag, sizeof flag, where, j->image[0] ? "image" : "image-latents");
  if (image && task == WAN_TASK_T2V) {
    sp_log_error("%s: %s is a text-to-video model (in_dim %lld): it takes no image (an "
                 "image-to-video model has 36 input channels, I2V-A14B, or 48, TI2V-5B)",
                 flag, mi->id.source, (long long)mi->config.in_dim);
    return SP_ERR_INPUT;
  }
  if (!image && task == WAN_TASK_I2V && !defaults) {
    sp_log_error("%s%s%s is an image-to-video model (I2V-A14B: in_dim %lld): it starts from an "
                 "image: give %s (with --vae) or %s",
                 where ? where : "run", ": ", mi->id.source, (long long)mi->config.in_dim,
                 where ? "image=FILE" : "--image FILE", where ? "image-latents=FILE"
                                                           : "--image-latents FILE");
    return SP_ERR_INPUT;
  }
  key_name(flag, sizeof flag, where, "size");
  if (image && j->size_given) {
    sp_log_error("%s: the size of an image's job comes from the image (and --max-area): leave "
                 "size out",
                 flag);
    return SP_ERR_INPUT;
  }
  if (!image && task == WAN_TASK_TI2V && (j->height % 32 || j->width % 32)) {
    sp_log_error("%s: %lldx%lld: a TI2V model's latent is 16 times smaller than the video and "
                 "its tokens 2x2 latent positions: height and width must be multiples of 32",
                 flag, (long long)j->height, (long long)j->width);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* ---- a two-expert model's rules (MODEL.md "Wan 2.2 A14B") ---- */

/* A one-expert model refuses two guidance scales and a boundary. */
static int check_experts(const job_spec *j, const rank_model_info *mi, const char *where) {
  if (mi->experts.count > 1) return SP_OK;
  char flag[JOB_PATH + 32];
  if (j->cfg_pair) {
    if (where)
      snprintf(flag, sizeof flag, "%s: cfg=%g,%g", where, j->cfg, j->cfg_low);
    else
      snprintf(flag, sizeof flag, "--cfg: '%g,%g'", j->cfg, j->cfg_low);
    sp_log_error("%s gives two guidance scales (HIGH,LOW), one per expert of a two-expert "
                 "model; %s has one expert: give one value", flag, mi->id.source);
    return SP_ERR_INPUT;
  }
  if (j->boundary_given) {
    if (where)
      snprintf(flag, sizeof flag, "%s: boundary=%g", where, j->boundary);
    else
      snprintf(flag, sizeof flag, "--boundary: '%g'", j->boundary);
    sp_log_error("%s chooses between the two experts of a two-expert model; %s has one expert",
                 flag, mi->id.source);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

int job_spec_check_model(const job_spec *j, const rank_model_info *mi, const char *where) {
  if (check_task(j, mi, where, 0) != SP_OK) return SP_ERR_INPUT;
  return check_experts(j, mi, where);
}

wan_precision job_precision(const job_params *p, const rank_model_info *mi) {
  switch (p->precision) {
  case JOB_PRECISION_BF16: return WAN_PRECISION_BF16;
  case JOB_PRECISION_FP8: return WAN_PRECISION_FP8;
  case JOB_PRECISION_INT8: return WAN_PRECISION_INT8;
  default: return mi->precision;
  }
}

int job_precision_check(const job_params *p, const rank_model_info *mi) {
  return rank_stage_precision_check(mi, job_precision(p, mi), p->fp8_fast_accum);
}

/* A task's published defaults (wan_task_defaults) into what j was not
 * given. */
static void task_defaults(job_spec *j, const wan_config *c) {
  const wan_task_defaults *d = wan_task_defaults_of(wan_config_task(c));
  if (!d) return;
  if (!j->frames_given) j->frames = d->frames;
  if (!j->fps_given) j->fps = d->fps;
  if (!j->size_given && d->height) {
    j->height = d->height;
    j->width = d->width;
  }
  if (d->steps && !j->steps_given && !j->sched_given) j->steps = d->steps;
  if (d->cfg && !j->cfg_given) j->cfg = j->cfg_low = d->cfg;
  if (d->shift && !j->shift_given) j->shift = d->shift;
}

int job_params_apply_model(job_params *p, const rank_model_info *mi) {
  job_spec *j = &p->job;
  const rank_model_experts *x = &mi->experts;
  if (job_precision_check(p, mi) != SP_OK) return SP_ERR_INPUT;
  task_defaults(j, &mi->config);
  if (job_spec_check(j, NULL) != SP_OK) return SP_ERR_INPUT;
  /* With --jobs the command line's job is the lines' defaults: an I2V
   * model's lines name their images. */
  if (check_task(j, mi, NULL, p->jobs != NULL) != SP_OK) return SP_ERR_INPUT;
  if (x->count < 2) return check_experts(j, mi, NULL);
  if (!j->cfg_given) {
    j->cfg = x->cfg[RANK_EXPERT_HIGH];
    j->cfg_low = x->cfg[RANK_EXPERT_LOW];
  }
  if (!j->shift_given) j->shift = x->shift;
  if (!j->steps_given && !j->sched_given) j->steps = x->steps;
  if (!j->boundary_given) j->boundary = x->boundary;
  return SP_OK;
}

void job_step_experts(const job_spec *j, int experts, const int64_t *timesteps,
                      uint8_t *expert) {
  for (int i = 0; experts > 1 && i < j->steps; i++)
    expert[i] = (uint8_t)rank_model_step_expert(j->boundary, (double)timesteps[i]);
}

/* ---- derived facts ---- */

void job_latent_shape(const job_spec *j, const wan_config *c, int64_t lat[4]) {
  const plan_workload w = {.frames = j->frames, .height = j->height, .width = j->width,
                           .vae_stride = wan_vae_stride(c)};
  lat[0] = c->out_dim;
  plan_latent_grid(&w, lat + 1);
}

int64_t job_cond_floats(const job_spec *j, const wan_config *c, const int64_t lat[4]) {
  if (!j->image[0] && !j->image_latents[0]) return 0;
  const int64_t hw = lat[2] * lat[3];
  return wan_config_task(c) == WAN_TASK_TI2V ? lat[0] * hw : wan_cond_channels(c) * lat[1] * hw;
}

int64_t job_tokens(const job_spec *j, const wan_config *c) {
  int64_t lat[4];
  job_latent_shape(j, c, lat);
  return (lat[1] / c->patch[0]) * (lat[2] / c->patch[1]) * (lat[3] / c->patch[2]);
}

plan_workload job_workload(const job_spec *j, const wan_config *c, int batch) {
  return (plan_workload){j->frames, j->height, j->width, job_micro_batches(j) * batch,
                         c->text_len, 0, wan_vae_stride(c)};
}

int job_workload_of(const job_spec *jobs, int n, const wan_config *c, int in_flight,
                    plan_workload *wl) {
  int best = -1, micro = 1;
  int64_t best_tokens = -1;
  memset(wl, 0, sizeof *wl);
  for (int i = 0; i < n; i++) {
    if (jobs[i].bad) continue;
    int64_t tokens = job_tokens(&jobs[i], c);
    if (tokens > best_tokens) {
      best_tokens = tokens;
      best = i;
    }
    if (job_micro_batches(&jobs[i]) == 2) micro = 2;
  }
  if (best < 0) return -1;
  *wl = job_workload(&jobs[best], c, 1);
  wl->micro_batches = micro * in_flight;
  return best;
}

/* ---- the plan ---- */

void job_plan_options(const job_params *p, int cuda, plan_options *po) {
  po->order = p->order;
  po->stream_frac = p->stream_frac;
  po->max_rows = p->chunk_rows > 0 ? p->chunk_rows : 0;
  po->simple_attn = cuda && p->attn == KERN_ATTN_SIMPLE;
  /* (fp8 W8A8 is counted on GPU stages only: plan_model.w8a8; the CPU refuses fast) */
  po->fp8_fast_accum = p->fp8_fast_accum;
}

void job_plan_model(const job_plan_req *r, uint64_t *bb, plan_model *pm) {
  const rank_model_info *mi = rank_model_get_info(r->m);
  rank_model_plan_sizes(r->m, r->weight_bytes, job_precision(r->p, mi), bb, pm);
  rank_model_plan_epilogue(pm, r->devs, r->nranks); /* every rank's GPU */
  pm->lora_block_elems = r->lora_block_elems;
  pm->lora_rank = r->lora_rank;
  pm->cache = r->cache;
}

/* Logs a planner message one line at a time (a refusal may span several). */
static void log_lines(const char *prefix, const char *msg) {
  for (const char *p = msg, *nl; *p; p = nl + 1) {
    nl = strchr(p, '\n');
    const int n = nl ? (int)(nl - p) : (int)strlen(p);
    sp_log_error("%s%.*s", p == msg ? prefix : "", n, p);
    if (!nl) break;
  }
}

/* The devices of replica 0's stages, sequence-parallel rank 0 of each:
 * what the plan's S stages are planned on. */
static void stage_devices(const plan_grid *g, const plan_device *all, plan_device *devs) {
  for (int st = 0; st < g->stages; st++)
    devs[st] = all[plan_grid_rank(g, (plan_grid_pos){0, st, 0})];
}

int job_plan_make(const job_plan_req *r, plan *out) {
  const wan_config *c = &rank_model_get_info(r->m)->config;
  if (r->nranks > PLAN_MAX_RANKS) {
    sp_log_error("plan: %d ranks, the planner handles at most %d", r->nranks, PLAN_MAX_RANKS);
    return SP_ERR_INPUT;
  }
  uint64_t *bb = sp_xcalloc((size_t)c->layers, sizeof *bb); /* pm points into it */
  plan_model pm;
  job_plan_model(r, bb, &pm);
  plan_options po = r->po;
  job_plan_options(r->p, r->cuda, &po);
  plan_grid g;
  char err[4096] = "";
  plan_budget b;
  int rc = SP_ERR_INPUT;
  /* The plain pipeline (the default) has no grid of its own to check: the
   * planner says what its ranks need (plan_make: at most one per block). */
  if (job_layout_resolve(r->p, r->nranks, &pm, r->devs, &r->wl, &po, &g) != SP_OK ||
      (r->p->layout_mode != PLAN_GRID_PIPELINE &&
       job_layout_check(&g, r->nranks, c, r->wl.micro_batches) != SP_OK) ||
      job_speed_check(r->p, &g) != SP_OK)
    goto out;
  if (plan_budget_parse(r->p->budget, g.stages, &b, err, sizeof err) != PLAN_OK) {
    sp_log_error("--budget: %s", err);
    goto out;
  }
  plan_device devs[PLAN_MAX_RANKS];
  stage_devices(&g, r->devs, devs);
  plan_workload wg = r->wl; /* each rank holds its Ulysses slice of the tokens */
  wg.seq = g.seq;
  const plan_inputs in = {.m = &pm, .devs = devs, .nranks = g.stages, .b = &b, .w = &wg, .o = &po};
  if (plan_make(&in, out, err, sizeof err) != PLAN_OK) {
    log_lines("plan: ", err);
    goto out;
  }
  out->grid = g;
  rc = SP_OK;
out:
  free(bb);
  return rc;
}
