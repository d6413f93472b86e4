/* staticpipe plan's output (plan_print.c): the plan, or with --layout the
 * table of layouts, as a table with its # header lines or as JSON on
 * stdout, with the text encoder's (--t5) and image encoder's (--image
 * with --vae) needs. cmd_plan.c parses the flags into a plan_cli. */
#ifndef PLAN_PRINT_H
#define PLAN_PRINT_H

#include <stdint.h>

#include "grid_choice.h" /* plan_links */
#include "job_params.h"
#include "job_plan.h"
#include "model_file.h"
#include "plan.h"

/* What plan's flags say: the job's options and plan's own (cmd_plan.c). */
typedef struct plan_cli {
  job_params job; /* --model, --frames, --size, --cfg, --budget, --order, ... */
  plan_options po;
  const char *gpu_mem, *inventory, *speed;
  const char *layout; /* --layout as given; NULL: the plain pipeline */
  plan_grid grid;     /* --layout RxSxU */
  int layout_mode;    /* PLAN_GRID_AUTO, _PIPELINE or _GIVEN (grid) */
  int host_set, peer_set; /* --host-gbs, --peer-gbs given (they win over the inventory) */
  int64_t nranks, batch;
  int json, dtype_bytes, help;
} plan_cli;

/* --layout: every layout considered (or the one given), the chosen one and
 * its prediction. 0, or SP_ERR_INPUT when none fits (the table printed). */
int plan_print_layouts(const plan_cli *cl, const rank_model_info *info, const plan_model *pm,
                       const uint64_t *bb, const plan_device *devs, const plan_links *links,
                       const plan_workload *wl, const plan_options *po);

/* The plan of r (job_plan_make, the function run's rank 0 calls) as a
 * table or JSON on stdout, with --t5's and --image's lines. */
int plan_print_plan(const plan_cli *cl, const job_plan_req *r, const uint64_t *bb,
                    const plan_model *pm);

#endif
