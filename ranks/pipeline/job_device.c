/* A rank's device at run time (see job_session.h): --device resolved,
 * this rank's GPU and who shares it, and the plan rank 0 makes on every
 * rank's device (job_plan_make) and every rank follows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "job_parse.h"
#include "job_session_impl.h"
#include "layout_grid.h"
#include "log.h"

int job_device_resolve(const job_params *p, rank_device *out) {
  return rank_device_parse(p->device, out);
}

int job_phase(const comm_world *w, int rc, const char *what) {
  return comm_phase_end(w, rc, what, "stopping");
}

uint64_t job_host_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

/* This rank's GPU: --devices LIST[local rank mod its length], else the
 * local rank modulo the devices this process sees. */
static int pick_index(job_session *s, plan_device *d) {
  const comm_world *w = s->w;
  const char *devices = s->params.devices;
  int n = rank_cuda_device_count();
  if (n <= 0) {
    sp_log_error("--device cuda: no CUDA device is visible on host %s", w->host);
    return SP_ERR_INPUT;
  }
  int idx = w->local_rank % n;
  if (devices) {
    /* The list's form was checked when it was set (job_params.c). */
    char buf[1024], *items[PLAN_MAX_RANKS];
    int k = 0;
    int64_t v = 0;
    if (job_parse_list("--devices", devices, ',', buf, sizeof buf, items, PLAN_MAX_RANKS, &k) !=
        SP_OK)
      return SP_ERR_INPUT;
    for (int i = 0; i < k; i++)
      if (job_parse_int64("--devices", items[i], 0, n - 1, &v) != SP_OK) {
        sp_log_error("--devices: '%s' names a GPU past the %d visible on host %s (0..%d)",
                     devices, n, w->host, n - 1);
        return SP_ERR_INPUT;
      }
    job_parse_int64("--devices", items[w->local_rank % k], 0, n - 1, &v);
    idx = (int)v;
  }
  if (rank_cuda_describe(idx, d) != SP_OK) return SP_ERR_RUNTIME;
  s->cuda_device = idx;
  return SP_OK;
}

/* The GPU, then who shares it: the node's ranks exchange their GPUs'
 * identities (comm/gpu_share.h), since device counts cannot tell one GPU
 * per rank under srun --gpus-per-task=1 (each rank sees one device) from
 * every rank on the same one. Logged with the PCI bus id, so a user can
 * tell which card each rank took. */
int job_pick_gpu(job_session *s) {
  const comm_world *w = s->w;
  if (s->dev != RANK_DEVICE_CUDA) return SP_OK; /* the same on every rank */
  plan_device d;
  char id[COMM_GPU_ID_MAX] = "";
  int rc = pick_index(s, &d);
  if (rc == SP_OK) rc = rank_cuda_identity(s->cuda_device, id, sizeof id);
  /* Every rank reaches the exchange, a failed one with no identity, so
   * none waits in it alone; the caller's phase agreement then stops all. */
  comm_gpu_share_gather(w, rc == SP_OK ? id : "", &s->gpu);
  if (rc != SP_OK) return rc;
  sp_log_info("device: cuda:%d %s, PCI bus %s, %.1f of %.1f GB free (local rank %d), %s %s %d "
              "rank%s of the node", s->cuda_device, d.name, d.pci_bus_id,
              (double)d.free_bytes / 1e9, (double)d.total_bytes / 1e9, w->local_rank, id,
              s->gpu.sharers > 1 ? "shared by" : "used by", s->gpu.sharers,
              s->gpu.sharers > 1 ? "s" : "");
  return SP_OK;
}

/* This rank's device as the planner sees it. */
static int describe_device(const job_session *s, plan_device *me) {
  const comm_world *w = s->w;
  memset(me, 0, sizeof *me);
  int rc = SP_OK;
  if (s->dev == RANK_DEVICE_CUDA) {
    rc = rank_cuda_describe(s->cuda_device, me);
    /* Ranks sharing a GPU share its memory (job_pick_gpu counted them). */
    const int share = s->gpu.sharers;
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
  const double given = job_speed_of_rank(&s->params, w->rank, w->size); /* --speed */
  if (given > 0.0) me->speed = given;
  return rc;
}

/* Rank 0: the plan (job_plan_make) on every rank's device all, encoded
 * into wire. */
static int plan_on_rank0(job_session *s, const plan_workload *wl, uint64_t decoder_bytes,
                         const plan_device *all, uint8_t *wire, uint64_t *len) {
  const int cuda = s->dev == RANK_DEVICE_CUDA;
  job_plan_req r = {.p = &s->params, .m = s->m,
                    /* weights once placed: bf16 on the GPU, widened to fp32 on the CPU */
                    .weight_bytes = cuda ? 2 : 4, .devs = all, .nranks = s->w->size,
                    .wl = *wl, .cuda = cuda, .cache = s->cache_any,
                    .lora_block_elems = s->lora_block_elems, .lora_rank = s->lora_rank};
  plan_options_default(&r.po);
  r.po.decoder_bytes = decoder_bytes;
  plan *p = &s->plan;
  if (job_plan_make(&r, p) != SP_OK) return SP_ERR_INPUT;
  char err[4096] = "";
  size_t n = 0;
  if (plan_encode(p, wire, PLAN_WIRE_MAX, &n, err, sizeof err) != PLAN_OK) {
    sp_log_error("plan: %s", err);
    return SP_ERR_RUNTIME;
  }
  *len = n;
  return SP_OK;
}

int job_make_plan(job_session *s, const plan_workload *wl, uint64_t decoder_bytes) {
  const comm_world *w = s->w;
  plan *p = &s->plan;
  comm_set_phase("planning");
  plan_device me;
  int rc = describe_device(s, &me);
  plan_device *devs = sp_xcalloc((size_t)w->size, sizeof *devs);
  comm_gather(w, &me, sizeof me, devs, 0);
  uint8_t *wire = sp_xmalloc(PLAN_WIRE_MAX);
  uint64_t len = 0;
  if (w->rank == 0 && rc == SP_OK) rc = plan_on_rank0(s, wl, decoder_bytes, devs, wire, &len);
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
