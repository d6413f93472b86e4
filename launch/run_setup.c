/* staticpipe run: the device, the plan, the summary. */
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "inputs.h"
#include "log.h"
#include "model_plan.h"
#include "noise.h"
#include "pipeline.h"
#include "preview.h"
#include "run.h"
#include "sampler.h"

/* This rank's GPU: --devices LIST[local rank mod its length], else the
 * local rank modulo the devices this process sees. Logged with its PCI bus
 * id, so a user can tell which card each rank took. */
int run_pick_gpu(const comm_world *w, run_opts *o) {
  if (o->dev != RANK_DEVICE_CUDA) return SP_OK;
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
  plan_device d;
  if (rank_cuda_describe(idx, &d) != SP_OK) return SP_ERR_RUNTIME;
  o->cuda_device = idx;
  sp_log_info("device: cuda:%d %s, PCI bus %s, %.1f of %.1f GB free (local rank %d)", idx, d.name,
              d.pci_bus_id, (double)d.free_bytes / 1e9, (double)d.total_bytes / 1e9,
              w->local_rank);
  return SP_OK;
}

/* After each phase every rank learns the worst status; a rank that did not
 * fail says which rank did and why, so every rank ends with one line. */
int run_phase(const comm_world *w, int rc, const char *what) {
  return comm_phase_end(w, rc, what, "stopping");
}

static uint64_t run_host_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

/* Rank 0 plans, every rank gets the plan and checks it applies to it. */
int run_make_plan(const comm_world *w, const run_opts *o, rank_model *m,
                     const plan_workload *wl, plan *p) {
  comm_set_phase("planning");
  plan_device me;
  memset(&me, 0, sizeof me);
  int rc = SP_OK;
  if (o->dev == RANK_DEVICE_CUDA) {
    rc = rank_cuda_describe(o->cuda_device, &me);
    /* Ranks sharing a GPU share its memory. */
    int share = 0, n = rank_cuda_device_count();
    for (int r = 0; n > 0 && r < w->local_size; r++) share += (r % n) == (w->local_rank % n);
    if (share > 1) {
      me.total_bytes /= (uint64_t)share;
      me.free_bytes /= (uint64_t)share;
    }
  } else {
    snprintf(me.name, sizeof me.name, "cpu");
    /* CPU backend: a rank's "device" is its share of the node's memory. */
    me.total_bytes = me.free_bytes = run_host_memory() / (uint64_t)w->local_size;
    me.speed = 1.0;
  }
  me.host_bytes = run_host_memory();
  plan_device *devs = sp_xcalloc((size_t)w->size, sizeof *devs);
  comm_gather(w, &me, sizeof me, devs, 0);
  uint8_t wire[PLAN_WIRE_MAX];
  uint64_t len = 0;
  char err[4096] = "";
  if (w->rank == 0) {
    const wan_config *c = &rank_model_get_info(m)->config;
    uint64_t *bb = sp_xcalloc((size_t)c->layers, sizeof *bb);
    plan_model pm;
    /* Weights once placed: bf16 on the GPU, widened to fp32 on the CPU. */
    rank_model_plan_sizes(m, o->dev == RANK_DEVICE_CUDA ? 2 : 4, bb, &pm);
    plan_budget b;
    plan_options po;
    plan_options_default(&po);
    po.order = o->order;
    po.stream_frac = o->stream_frac;
    po.max_rows = o->chunk_rows;
    po.simple_attn = o->dev == RANK_DEVICE_CUDA && o->attn == RANK_ATTN_SIMPLE;
    if (w->size > PLAN_MAX_RANKS) {
      sp_log_error("run: %d ranks, the planner handles at most %d", w->size, PLAN_MAX_RANKS);
      rc = SP_ERR_INPUT;
    } else if (plan_budget_parse(o->budget, w->size, &b, err, sizeof err) != PLAN_OK) {
      sp_log_error("--budget: %s", err);
      rc = SP_ERR_INPUT;
    } else if (plan_make(&pm, devs, w->size, &b, wl, &po, p, err, sizeof err) != PLAN_OK) {
      sp_log_error("plan: %s", err);
      rc = SP_ERR_INPUT;
    } else {
      size_t n = 0;
      if (plan_encode(p, wire, sizeof wire, &n, err, sizeof err) != PLAN_OK) {
        sp_log_error("plan: %s", err);
        rc = SP_ERR_RUNTIME;
      }
      len = n;
    }
    free(bb);
  }
  free(devs);
  if ((rc = run_phase(w, rc, "planning")) != SP_OK) return rc;
  comm_bcast(w, &len, sizeof len, 0);
  comm_bcast(w, wire, (size_t)len, 0);
  rc = SP_OK;
  if (w->rank != 0 && plan_decode(wire, (size_t)len, p, err, sizeof err) != PLAN_OK) {
    sp_log_error("plan from rank 0 is not valid: %s", err);
    rc = SP_ERR_RUNTIME;
  } else if (p->nranks != w->size) {
    sp_log_error("plan is for %d ranks, the job has %d", p->nranks, w->size);
    rc = SP_ERR_RUNTIME;
  } else if (rc == SP_OK && p->r[w->rank].budget_bytes > me.total_bytes) {
    sp_log_error("plan gives this rank a budget of %.2f GB, it has %.2f GB",
                 (double)p->r[w->rank].budget_bytes / 1e9, (double)me.total_bytes / 1e9);
    rc = SP_ERR_INPUT;
  }
  return run_phase(w, rc, "checking the plan");
}

void run_print_json(const comm_world *w, const plan *p, const rank_summary *all) {
  json_object *root = json_object_new_object();
  size_t cap = 1 << 16;
  char *pj = sp_xmalloc(cap);
  plan_format_json(p, pj, cap);
  json_object *plan_obj = json_tokener_parse(pj);
  free(pj);
  json_object_object_add(root, "plan", plan_obj);
  json_object *ranks = json_object_new_array();
  for (int r = 0; r < w->size; r++) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "rank", json_object_new_int(r));
    json_object_object_add(o, "host", json_object_new_string(w->hosts[r]));
    json_object_object_add(o, "first_block", json_object_new_int(all[r].first));
    json_object_object_add(o, "last_block", json_object_new_int(all[r].last));
    json_object_object_add(o, "bytes_loaded", json_object_new_int64((int64_t)all[r].bytes_loaded));
    json_object_object_add(o, "load_s", json_object_new_double(all[r].load_s));
    json_object_object_add(o, "weights_s", json_object_new_double(all[r].weights_s));
    json_object_object_add(o, "compute_s", json_object_new_double(all[r].compute_s));
    json_object_object_add(o, "wait_s", json_object_new_double(all[r].wait_s));
    json_object_object_add(o, "send_s", json_object_new_double(all[r].send_s));
    json_object_object_add(o, "queue_s", json_object_new_double(all[r].queue_s));
    const rank_summary *a = &all[r];
    json_object_object_add(o, "order", json_object_new_string(plan_order_name(a->order)));
    json_object_object_add(o, "streamed_blocks", json_object_new_int(a->streamed));
    json_object_object_add(o, "h2d_bytes_per_step",
                           json_object_new_int64(a->steps ? (int64_t)(a->h2d_bytes / (uint64_t)a->steps) : 0));
    json_object_object_add(o, "arena_bytes", json_object_new_int64((int64_t)a->arena_bytes));
    json_object_object_add(o, "device_in_use_bytes", json_object_new_int64((int64_t)a->device_in_use));
    json_object_object_add(o, "device_peak_bytes", json_object_new_int64((int64_t)a->device_peak));
    json_object_object_add(o, "plan_peak_bytes", json_object_new_int64((int64_t)a->plan_peak_bytes));
    json_object_array_add(ranks, o);
  }
  json_object_object_add(root, "ranks", ranks);
  /* Rank 0 sees every step start and end (it receives the latents). */
  json_object_object_add(root, "steps", json_object_new_int(all[0].steps));
  json_object_object_add(root, "sample_s", json_object_new_double(all[0].sample_s));
  json_object_object_add(root, "step_ms", json_object_new_double(
                                              all[0].steps ? 1e3 * all[0].sample_s / all[0].steps
                                                           : 0.0));
  /* Without each loop's first step: the steady state (one-time costs such
   * as first-call GEMM heuristics land in the first step). */
  const rank_summary *a0 = &all[0];
  const int later = a0->steps - a0->groups;
  json_object_object_add(root, "steady_step_ms",
                         json_object_new_double(later > 0 ? 1e3 * (a0->sample_s - a0->first_step_s) / later
                                                          : a0->steps ? 1e3 * a0->sample_s / a0->steps : 0.0));
  printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
  fflush(stdout);
  json_object_put(root);
}
