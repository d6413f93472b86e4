/* The run's layout at run time (see layout_grid.h). */
#include "layout_grid.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "grid_choice.h"
#include "log.h"

/* The tag of a stage's all-to-all: apart from the stage loop's
 * (pipeline.c) and the link probe's. */
enum { TAG_SEQ = 200 };

int job_layout_resolve(const job_params *o, int nranks, const plan_model *pm,
                       const plan_device *all, const plan_workload *wl, const plan_options *po,
                       plan_grid *out) {
  if (o->layout_mode != PLAN_GRID_AUTO) {
    *out = o->layout_mode == PLAN_GRID_GIVEN ? o->layout : plan_grid_pipeline(nranks);
    return SP_OK;
  }
  plan_links links;
  plan_links_default(&links, po);
  plan_grid_choice *c = sp_xmalloc(sizeof *c);
  char err[1024] = "";
  const plan_grid_inputs in = {.m = pm, .devs = all, .nranks = nranks, .budget = o->budget,
                               .w = wl, .o = po, .links = &links};
  int prc = plan_grid_choose(&in, NULL, c, err, sizeof err);
  const int k = prc == PLAN_EINVAL ? -1 : c->chosen;
  int rc = SP_OK;
  if (k < 0) {
    sp_log_error("--layout auto: no layout of %d ranks fits%s%s", nranks, err[0] ? ": " : "",
                 err);
    for (int i = 0; prc != PLAN_EINVAL && i < c->count; i++)
      if (!c->e[i].ok)
        sp_log_error("  %dx%dx%d: %s", c->e[i].g.replicas, c->e[i].g.stages, c->e[i].g.seq,
                     c->e[i].why);
    rc = SP_ERR_INPUT;
  } else {
    *out = c->e[k].g;
    sp_log_info("--layout auto: %dx%dx%d (replicas x stages x sequence-parallel ranks), "
                "predicted %.3g ms per step, of %d layouts considered (plan --layout auto "
                "prints them all)",
                out->replicas, out->stages, out->seq, c->e[k].step_ms, c->count);
  }
  free(c);
  return rc;
}

int job_layout_check(const plan_grid *g, int nranks, const wan_config *c, int micro_batches) {
  char err[256];
  if (plan_grid_check(g, nranks, c->heads, (int)c->layers, micro_batches, err, sizeof err) !=
      PLAN_OK) {
    sp_log_error("%s", err);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

void job_replica_speeds(const job_params *o, const plan_grid *g, double *out) {
  const int n = g->stages * g->seq; /* ranks of a replica: r n .. r n + n - 1 */
  for (int r = 0; r < g->replicas; r++) {
    if (o->nspeed == g->replicas) { /* one per replica */
      out[r] = o->speed[r];
      continue;
    }
    out[r] = 1.0;
    if (o->nspeed != g->replicas * n) continue; /* none */
    out[r] = o->speed[r * n];
    for (int i = 1; i < n; i++) out[r] = fmin(out[r], o->speed[r * n + i]);
  }
}

double job_speed_of_rank(const job_params *o, int rank, int nranks) {
  if (o->nspeed == nranks) return o->speed[rank];
  const plan_grid *g = &o->layout;
  if (o->layout_mode != PLAN_GRID_GIVEN || o->nspeed != g->replicas ||
      g->replicas * g->stages * g->seq != nranks)
    return 0.0;
  return o->speed[plan_grid_pos_of(g, rank).replica];
}

int job_speed_check(const job_params *o, const plan_grid *g) {
  const int R = g->replicas, nranks = R * g->stages * g->seq;
  if (o->nspeed == 0 || o->nspeed == R || o->nspeed == nranks) return SP_OK;
  sp_log_error("--speed: %d value%s for %d replica%s of %d rank%s: give one per replica (%d) or "
               "one per rank (%d)", o->nspeed, o->nspeed == 1 ? "" : "s", R, R == 1 ? "" : "s",
               nranks, nranks == 1 ? "" : "s", R, nranks);
  return SP_ERR_INPUT;
}

void job_speed_log(const job_params *o, const plan_grid *g, int K) {
  if (o->nspeed == 0 || g->replicas < 2 || K > PLAN_MAX_RANKS * 2) return;
  double speed[PLAN_MAX_RANKS];
  int owner[PLAN_MAX_RANKS * 2], n[PLAN_MAX_RANKS] = {0};
  job_replica_speeds(o, g, speed);
  plan_grid_owners(g, speed, K, owner);
  for (int k = 0; k < K; k++) n[owner[k]]++;
  char shares[PLAN_MAX_RANKS * 8] = "";
  for (int r = 0, at = 0; r < g->replicas && at < (int)sizeof shares; r++)
    at += snprintf(shares + at, sizeof shares - (size_t)at, "%s%d", r ? ":" : "", n[r]);
  sp_log_info("--speed: the replicas' shares of a step's %d micro-batches: %s", K, shares);
}

void job_layout_seq_group(const comm_world *w, const plan_grid *g, double timeout_s,
                          comm_group *out) {
  plan_grid_pos p = plan_grid_pos_of(g, w->rank);
  int ranks[COMM_GROUP_MAX];
  for (int u = 0; u < g->seq; u++) {
    p.seq = u;
    ranks[u] = plan_grid_rank(g, p);
  }
  comm_group_make(w, ranks, g->seq, TAG_SEQ, timeout_s, out);
}
