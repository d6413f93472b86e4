/* The job's derived facts (latent shape, micro-batches, tokens, the
 * planner's workload), this rank's device and the plan every rank follows
 * (see job.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "job.h"
#include "job_session.h"
#include "layout_grid.h"
#include "log.h"
#include "model_plan.h"

int job_micro_batches(const job_spec *j) { return j->cfg != 1.0 || j->cfg_low != 1.0 ? 2 : 1; }

/* ---- a two-expert model's rules (MODEL.md "Wan 2.2 A14B") ---- */

int job_spec_check_model(const job_spec *j, const rank_model_info *mi, const char *where) {
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

wan_precision job_precision(const job_opts *o, const rank_model_info *mi) {
  switch (o->precision) {
  case JOB_PRECISION_BF16: return WAN_PRECISION_BF16;
  case JOB_PRECISION_FP8: return WAN_PRECISION_FP8;
  case JOB_PRECISION_INT8: return WAN_PRECISION_INT8;
  default: return mi->precision;
  }
}

int job_precision_check(const job_opts *o, const rank_model_info *mi) {
  return rank_stage_precision_check(mi, job_precision(o, mi));
}

int job_opts_apply_model(job_opts *o, const rank_model_info *mi) {
  job_spec *j = &o->job;
  const rank_model_experts *x = &mi->experts;
  if (job_precision_check(o, mi) != SP_OK) return SP_ERR_INPUT;
  if (x->count < 2) return job_spec_check_model(j, mi, NULL);
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

void job_latent_shape(const job_spec *j, const wan_config *c, int64_t lat[4]) {
  const plan_workload w = {.frames = j->frames, .height = j->height, .width = j->width};
  lat[0] = c->in_dim;
  plan_latent_grid(&w, lat + 1);
}

int64_t job_tokens(const job_spec *j, const wan_config *c) {
  int64_t lat[4];
  job_latent_shape(j, c, lat);
  return (lat[1] / c->patch[0]) * (lat[2] / c->patch[1]) * (lat[3] / c->patch[2]);
}

plan_workload job_workload(const job_spec *j, const wan_config *c, int batch) {
  return (plan_workload){j->frames, j->height, j->width, job_micro_batches(j) * batch,
                         c->text_len, 0};
}

void job_plan_options(const job_opts *o, plan_options *po) {
  po->order = o->order;
  po->stream_frac = o->stream_frac;
  po->max_rows = o->chunk_rows > 0 ? o->chunk_rows : 0;
  po->simple_attn = o->dev == RANK_DEVICE_CUDA && o->attn == KERN_ATTN_SIMPLE;
}

int job_workload_of(const job_spec *jobs, int n, const wan_config *c, int in_flight,
                    plan_workload *wl) {
  int best = -1, micro = 1;
  int64_t best_tokens = -1;
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

/* This rank's GPU: --devices LIST[local rank mod its length], else the
 * local rank modulo the devices this process sees. */
static int pick_index(const comm_world *w, job_opts *o, plan_device *d) {
  int n = rank_cuda_device_count();
  if (n <= 0) {
    sp_log_error("--device cuda: no CUDA device is visible on host %s", w->host);
    return SP_ERR_INPUT;
  }
  int idx = w->local_rank % n;
  if (o->devices) {
    int list[64], k = 0;
    const char *p = o->devices;
    while (*p && k < 64) {
      char *end = NULL;
      long v = strtol(p, &end, 10);
      if (end == p || v < 0 || v >= n || (*end && *end != ',')) {
        sp_log_error("--devices: '%s' is not a list of device indices in 0..%d", o->devices,
                     n - 1);
        return SP_ERR_INPUT;
      }
      list[k++] = (int)v;
      p = *end ? end + 1 : end;
    }
    if (k == 0) {
      sp_log_error("--devices: '%s' is empty", o->devices);
      return SP_ERR_INPUT;
    }
    idx = list[w->local_rank % k];
  }
  if (rank_cuda_describe(idx, d) != SP_OK) return SP_ERR_RUNTIME;
  o->cuda_device = idx;
  return SP_OK;
}

/* The GPU, then who shares it: the node's ranks exchange their GPUs'
 * identities (comm/gpu_share.h), since device counts cannot tell one GPU
 * per rank under srun --gpus-per-task=1 (each rank sees one device) from
 * every rank on the same one. Logged with the PCI bus id, so a user can
 * tell which card each rank took. */
int job_pick_gpu(const comm_world *w, job_opts *o) {
  if (o->dev != RANK_DEVICE_CUDA) return SP_OK; /* the same on every rank */
  plan_device d;
  char id[COMM_GPU_ID_MAX] = "";
  int rc = pick_index(w, o, &d);
  if (rc == SP_OK) rc = rank_cuda_identity(o->cuda_device, id, sizeof id);
  /* Every rank reaches the exchange, a failed one with no identity, so
   * none waits in it alone; the caller's phase agreement then stops all. */
  comm_gpu_share_gather(w, rc == SP_OK ? id : "", &o->gpu);
  if (rc != SP_OK) return rc;
  sp_log_info("device: cuda:%d %s, PCI bus %s, %.1f of %.1f GB free (local rank %d), %s %s %d "
              "rank%s of the node", o->cuda_device, d.name, d.pci_bus_id,
              (double)d.free_bytes / 1e9, (double)d.total_bytes / 1e9, w->local_rank, id,
              o->gpu.sharers > 1 ? "shared by" : "used by", o->gpu.sharers,
              o->gpu.sharers > 1 ? "s" : "");
  return SP_OK;
}

int job_phase(const comm_world *w, int rc, const char *what) {
  return comm_phase_end(w, rc, what, "stopping");
}

uint64_t job_host_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

/* This rank's device as the planner sees it. */
static int describe_device(const comm_world *w, const job_opts *o, plan_device *me) {
  memset(me, 0, sizeof *me);
  int rc = SP_OK;
  if (o->dev == RANK_DEVICE_CUDA) {
    rc = rank_cuda_describe(o->cuda_device, me);
    /* Ranks sharing a GPU share its memory (job_pick_gpu counted them). */
    const int share = o->gpu.sharers;
    if (share > 1) {
      me->total_bytes /= (uint64_t)share;
      me->free_bytes /= (uint64_t)share;
    }
  } else {
    snprintf(me->name, sizeof me->name, "cpu");
    /* CPU backend: a rank's "device" is its share of the node's memory. */
    me->total_bytes = me->free_bytes = job_host_memory() / (uint64_t)w->local_size;
    me->speed = 1.0;
  }
  me->host_bytes = job_host_memory();
  const double given = job_speed_of_rank(o, w->rank, w->size); /* --speed */
  if (given > 0.0) me->speed = given;
  return rc;
}

/* The devices of replica 0's stages, sequence-parallel rank 0 of each:
 * what the plan's S stages are planned on. */
static void stage_devices(const plan_grid *g, const plan_device *all, plan_device *devs) {
  for (int st = 0; st < g->stages; st++)
    devs[st] = all[plan_grid_rank(g, (plan_grid_pos){0, st, 0})];
}

/* Rank 0: the grid (job_layout_resolve), then the plan of its S stages on
 * the devices of replica 0's stages (sequence-parallel rank 0 of each;
 * every replica and every sequence-parallel rank of a stage takes its
 * row, each counted with the largest Ulysses slice of the tokens), encoded
 * into wire. all: every rank's device. */
static int plan_on_rank0(const comm_world *w, const job_opts *o, rank_model *m,
                         const plan_workload *wl, uint64_t decoder_bytes,
                         const plan_device *all, plan *p, uint8_t *wire, uint64_t *len) {
  const wan_config *c = &rank_model_get_info(m)->config;
  uint64_t *bb = sp_xcalloc((size_t)c->layers, sizeof *bb);
  plan_model pm;
  /* Weights once placed: bf16 on the GPU, widened to fp32 on the CPU. */
  rank_model_plan_sizes(m, o->dev == RANK_DEVICE_CUDA ? 2 : 4,
                        job_precision(o, rank_model_get_info(m)), bb, &pm);
  rank_model_plan_epilogue(&pm, all, w->size); /* every rank's GPU */
  pm.lora_block_elems = o->lora_block_elems; /* bypassed LoRAs' room (0: none) */
  pm.lora_rank = o->lora_rank;
  pm.cache = o->cache_any;
  plan_budget b;
  plan_options po;
  plan_options_default(&po);
  job_plan_options(o, &po);
  po.decoder_bytes = decoder_bytes;
  char err[4096] = "";
  int rc = SP_OK;
  plan_grid grid;
  const plan_grid *g = &grid;
  plan_device devs[PLAN_MAX_RANKS];
  plan_workload wg = *wl; /* each rank holds its Ulysses slice of the tokens */
  if (w->size > PLAN_MAX_RANKS) {
    sp_log_error("run: %d ranks, the planner handles at most %d", w->size, PLAN_MAX_RANKS);
    rc = SP_ERR_INPUT;
  } else if (job_layout_resolve(o, w->size, &pm, all, wl, &po, &grid) != SP_OK) {
    rc = SP_ERR_INPUT;
  } else if (job_layout_check(g, w->size, c, wl->micro_batches) != SP_OK ||
             job_speed_check(o, g) != SP_OK) {
    rc = SP_ERR_INPUT;
  } else if (plan_budget_parse(o->budget, g->stages, &b, err, sizeof err) != PLAN_OK) {
    sp_log_error("--budget: %s", err);
    rc = SP_ERR_INPUT;
  } else if (stage_devices(g, all, devs), wg.seq = g->seq,
             plan_make(&pm, devs, g->stages, &b, &wg, &po, p, err, sizeof err) != PLAN_OK) {
    sp_log_error("plan: %s", err);
    rc = SP_ERR_INPUT;
  } else {
    p->grid = *g;
    size_t n = 0;
    if (plan_encode(p, wire, PLAN_WIRE_MAX, &n, err, sizeof err) != PLAN_OK) {
      sp_log_error("plan: %s", err);
      rc = SP_ERR_RUNTIME;
    }
    *len = n;
  }
  free(bb);
  return rc;
}

uint64_t job_decoder_bytes(const wan_vae_config *vae_config, wan_vae_gpu_precision p,
                           const plan_workload *wl) {
  int64_t fhw[3];
  plan_latent_grid(wl, fhw);
  return (uint64_t)wan_vae_gpu_bytes(vae_config, fhw[1], fhw[2], p);
}

int job_make_plan(const comm_world *w, const job_opts *o, rank_model *m,
                  const plan_workload *wl, uint64_t decoder_bytes, plan *p) {
  comm_set_phase("planning");
  plan_device me;
  int rc = describe_device(w, o, &me);
  plan_device *devs = sp_xcalloc((size_t)w->size, sizeof *devs);
  comm_gather(w, &me, sizeof me, devs, 0);
  uint8_t *wire = sp_xmalloc(PLAN_WIRE_MAX);
  uint64_t len = 0;
  if (w->rank == 0 && rc == SP_OK)
    rc = plan_on_rank0(w, o, m, wl, decoder_bytes, devs, p, wire, &len);
  free(devs);
  if ((rc = job_phase(w, rc, "planning")) != SP_OK) {
    free(wire);
    return rc;
  }
  comm_bcast(w, &len, sizeof len, 0);
  comm_bcast(w, wire, (size_t)len, 0);
  char err[4096] = "";
  if (w->rank != 0 && plan_decode(wire, (size_t)len, p, err, sizeof err) != PLAN_OK) {
    sp_log_error("plan from rank 0 is not valid: %s", err);
    rc = SP_ERR_RUNTIME;
  } else if (p->grid.replicas * p->grid.stages * p->grid.seq != w->size) {
    sp_log_error("plan is for %d ranks, the job has %d",
                 p->grid.replicas * p->grid.stages * p->grid.seq, w->size);
    rc = SP_ERR_RUNTIME;
  } else {
    const plan_rank *pr = &p->r[plan_grid_pos_of(&p->grid, w->rank).stage];
    if (pr->budget_bytes > me.total_bytes) {
      sp_log_error("plan gives this rank a budget of %.2f GB, it has %.2f GB",
                   (double)pr->budget_bytes / 1e9, (double)me.total_bytes / 1e9);
      rc = SP_ERR_INPUT;
    }
  }
  free(wire);
  return job_phase(w, rc, "checking the plan");
}
