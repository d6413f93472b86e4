/* The run's layout at run time (planner/grid.h; DESIGN.md "Layouts"): which
 * grid --layout means, its checks against the model, this rank's place and
 * its stage's sequence-parallel group. */
#ifndef JOB_LAYOUT_GRID_H
#define JOB_LAYOUT_GRID_H

#include "comm_group.h"
#include "grid.h"
#include "job_params.h"
#include "wan_config.h"

/* The grid the run takes on nranks ranks: --layout RxSxU as given,
 * pipeline (the default) 1 x nranks x 1, and for auto the planner's choice
 * (planner/grid_choice.h) over the ranks' devices all[] for model pm and
 * workload wl: memory first, then the smallest predicted step, on either
 * backend. Rank 0, before planning; the choice is logged
 * with its prediction. SP_OK, or SP_ERR_INPUT when no layout fits (every
 * refusal logged). */
int job_layout_resolve(const job_params *o, int nranks, const plan_model *pm,
                       const plan_device *all, const plan_workload *wl, const plan_options *po,
                       plan_grid *out);

/* Rank 0, before planning: g against the run (R x S x U = nranks, U divides
 * the model's heads, S at most its blocks, R at most the micro-batches of
 * a step: plan_grid_check). SP_OK, or SP_ERR_INPUT after one line. */
int job_layout_check(const plan_grid *g, int nranks, const wan_config *c, int micro_batches);

/* Rank 0, before planning: --speed against g (one value per rank, or one
 * per replica). SP_OK, or SP_ERR_INPUT after one line. */
int job_speed_check(const job_params *o, const plan_grid *g);
/* This rank's relative speed for the planner under --speed: its own value
 * (one per rank), or its replica's (one per replica of a given --layout);
 * 0 when --speed gives none for it (the device's own speed stands). */
double job_speed_of_rank(const job_params *o, int rank, int nranks);

/* Logs the replicas' shares of a step of K micro-batches under --speed
 * (nothing without it or with one replica). */
void job_speed_log(const job_params *o, const plan_grid *g, int K);

/* Each replica's speed (R values) from --speed: given per replica, or its
 * slowest rank's; all 1 without --speed. Every rank computes the same
 * (plan_grid_owners turns them into the replicas' micro-batches). */
void job_replica_speeds(const job_params *o, const plan_grid *g, double *out);

/* The U ranks of this rank's stage (its replica and stage, u = 0 .. U-1),
 * their messages tagged apart from the stage loop's. */
void job_layout_seq_group(const comm_world *w, const plan_grid *g, double timeout_s,
                          comm_group *out);

#endif
