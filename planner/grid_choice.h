/* The choice of a run's grid (grid.h): every R x S x U layout of nranks
 * ranks, each with its memory per rank and its predicted step time, and
 * the one a run should use (`plan --layout auto`).
 *
 * A layout's prediction is the pipeline model of model.c (plan_make's split
 * of the blocks over S stages, plan_stage_ms, plan_pipeline_ms) run on the
 * share of one replica and the tokens of one Ulysses rank (plan_workload
 * .seq: its self-attention over all L tokens for H/U heads, its
 * all-to-alls and their buffers), plus the replicas' exchange of
 * predictions, each timed over the link between the ranks involved
 * (plan_links). Which terms are exact and which are approximations is said
 * in grid_choice.c.
 *
 * Pure C11 like the rest of planner/. These numbers are PREDICTIONS: no
 * layout with U > 1 or R > 1 has been measured. */
#ifndef PLAN_GRID_CHOICE_H
#define PLAN_GRID_CHOICE_H

#include <stddef.h>
#include <stdint.h>

#include "grid.h"
#include "plan.h"

/* The links between a run's ranks (GB/s per direction per GPU): inside a
 * node over NVLink or, without it, over PCIe; between nodes over the
 * network. The host link (pinned host -> GPU, what streamed blocks use) is
 * plan_options.host_link_gbs. */
typedef struct plan_links {
  int nvlink;            /* the GPUs of a node talk over NVLink (1) or PCIe (0) */
  double nvlink_gbs;     /* per GPU per direction, nvlink only */
  double pcie_peer_gbs;  /* GPU <-> GPU of one node without NVLink */
  double inter_node_gbs; /* per GPU per direction between nodes */
  int node[PLAN_MAX_RANKS]; /* node of each rank (0-based) */
} plan_links;

/* One node, no NVLink, GPU <-> GPU at o->peer_link_gbs: the links every plan
 * before the grid assumed. */
void plan_links_default(plan_links *l, const plan_options *o);

/* GB/s between ranks a and b (a != b). */
double plan_links_gbs(const plan_links *l, int a, int b);

/* Effective GB/s per direction of a PCIe x16 link of generation gen (3..6):
 * 80% of the raw rate (Gen4 -> 25.2, what pinned copies measure); 0 for
 * another generation. */
double plan_pcie_gbs(int gen);

/* One layout considered. */
typedef struct plan_grid_eval {
  plan_grid g;
  int ok;                  /* fits the budgets and passes the grid's checks */
  char why[320];           /* refused: the first line of the reason */
  int micro_per_replica;   /* the most micro-batches a replica runs: ceil(M / R) at equal
                              speeds (plan_grid_owners) */
  int64_t tokens_per_rank; /* the largest Ulysses slice: ceil(L / U) (plan_rank_tokens) */
  int order;               /* PLAN_ORDER_MICRO or _BLOCK, chosen by the split */
  int streamed_blocks;     /* over the stages of one replica */
  uint64_t peak_bytes;     /* the largest rank's memory: arena (with the all-to-all's
                              buffers when U > 1) + reserve */
  double pipeline_ms;      /* the replica's pipeline with compute and all-to-alls */
  double a2a_ms;           /* per step: the all-to-alls (in pipeline_ms), summed over the
                              stages */
  double exchange_ms;      /* per step: the replicas' exchange of predictions */
  double step_ms;          /* pipeline + exchange: one sampling step */
} plan_grid_eval;

#define PLAN_GRID_MAX_EVALS 256

typedef struct plan_grid_choice {
  int count;
  int chosen; /* index into e of the layout to run, -1 when none fits */
  plan_grid_eval e[PLAN_GRID_MAX_EVALS];
} plan_grid_choice;

/* What the layouts are chosen for: the model m, nranks ranks over devs
 * (one per rank, in the grid's numbering) and their links, budget (the
 * --budget string; with a grid, cuda:K names pipeline stage K: all its
 * ranks, in every replica), the workload w and the planner's options o. */
typedef struct plan_grid_inputs {
  const plan_model *m;
  const plan_device *devs;
  int nranks;
  const char *budget;
  const plan_workload *w;
  const plan_options *o;
  const plan_links *links;
} plan_grid_inputs;

/* Evaluates the layouts of in's ranks and chooses one: memory first (a layout whose ranks do
 * not fit their budgets is refused), then the smallest predicted step
 * (ties: fewer replicas, then fewer sequence-parallel ranks). only: NULL
 * for every R x S x U = nranks, else that one layout alone. Each stage is
 * planned on the smallest and slowest of its devices. PLAN_EINVAL for bad inputs; PLAN_EINFEASIBLE
 * when no layout fits (out is filled either way, with the reasons). */
int plan_grid_choose(const plan_grid_inputs *in, const plan_grid *only, plan_grid_choice *out,
                     char *err, size_t errlen);

/* Evaluates one layout (plan_grid_choose's inner step); *out is always
 * filled (ok 0 with why for a refused layout). */
void plan_grid_evaluate(const plan_grid_inputs *in, plan_grid g, plan_grid_eval *out);

/* The layouts considered as a table (# header lines, one row each, the
 * chosen one marked) or as JSON; like plan_format_table's return. */
size_t plan_grid_format_table(const plan_grid_choice *c, char *buf, size_t cap);
size_t plan_grid_format_json(const plan_grid_choice *c, char *buf, size_t cap);

#endif
