/* The run's layout at run time (planner/grid.h; DESIGN.md "Layouts"): which
 * grid --layout means, its checks against the model, this rank's place and
 * its stage's sequence-parallel group. */
#ifndef JOB_LAYOUT_GRID_H
#define JOB_LAYOUT_GRID_H

#include "comm_group.h"
#include "grid.h"
#include "job.h"

/* The grid the run takes on nranks ranks: --layout RxSxU as given; auto
 * (the default) the pipeline 1 x nranks x 1. The one place where the
 * automatic choice is made. */
plan_grid job_layout_resolve(const job_opts *o, int nranks);

/* Rank 0, before planning: g against the run (R x S x U = nranks, U divides
 * the model's heads, S at most its blocks, R at most the micro-batches of
 * a step: plan_grid_check). SP_OK, or SP_ERR_INPUT after one line. */
int job_layout_check(const plan_grid *g, int nranks, const wan_config *c, int micro_batches);

/* The U ranks of this rank's stage (its replica and stage, u = 0 .. U-1),
 * their messages tagged apart from the stage loop's. */
void job_layout_seq_group(const comm_world *w, const plan_grid *g, double timeout_s,
                          comm_group *out);

#endif
