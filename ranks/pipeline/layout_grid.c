/* The run's layout at run time (see layout_grid.h). */
#include "layout_grid.h"

#include "log.h"

/* The tag of a stage's all-to-all: apart from the stage loop's
 * (pipeline.c) and the link probe's. */
enum { TAG_SEQ = 200 };

plan_grid job_layout_resolve(const job_opts *o, int nranks) {
  return o->layout_auto ? plan_grid_pipeline(nranks) : o->layout;
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
