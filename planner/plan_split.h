/* The split's internals shared by split.c (the search) and split_report.c
 * (the infeasible report): the search context, a range's evaluation, and
 * the two entry points the report calls again with raised budgets.
 * Internal to planner/. */
#ifndef PLAN_SPLIT_H
#define PLAN_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "plan.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MAX_LEVELS 24

typedef struct split_ctx {
  const plan_model *m;
  const plan_workload *w;
  const plan_options *o;
  int R, B;
  int64_t L; /* a rank's rows (plan_rank_tokens): what its chunks split */
  uint64_t budget[PLAN_MAX_RANKS];
  uint64_t cap[PLAN_MAX_RANKS]; /* the most a budget can be: the device's auto budget */
  double speed[PLAN_MAX_RANKS];
  int allow_stream;
  int ratio;
  double resident_cap[PLAN_MAX_RANKS]; /* ratio mode: resident block bytes allowed */
  int order; /* PLAN_ORDER_MICRO or PLAN_ORDER_BLOCK: the one being evaluated */
  int nlevels;
  int64_t rows[MAX_LEVELS]; /* chunk rows of each level, coarsest first (L: unchunked) */
  /* memo of range evaluations per order (memo[0] micro, memo[1] block), index
   * (r * B + a) * B + b; NULL = none */
  struct split_memo *memo[2];
} split_ctx;

typedef struct split_reval {
  int r;  /* the rank evaluated */
  int ok;
  int swap; /* two experts: the blocks swap at the switch (one device copy) */
  double ms; /* per step, in the ctx's order */
  int nstream, level, depth;
  uint64_t weight, slots, streamed_bytes, act, peak;
  uint64_t need_min; /* smallest peak this range can have (any chunking, max streaming) */
} split_reval;

typedef struct split_memo {
  double ms;
  int32_t nstream;
  int32_t state; /* 0 unknown, 1 ok, 2 infeasible */
} split_memo;

static inline uint64_t plan_sat_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Evaluates rank r holding blocks a..b in c's order: the fewest streamed
 * blocks and then the coarsest chunk level that fit its budget; its time
 * and memory. flags_out (may be NULL) receives the streamed flags. */
void plan_split_eval(const split_ctx *c, int r, int a, int b, uint8_t *flags_out,
                     split_reval *ev);

/* Solves the split (or, with fixed ranges, only the order) in the options'
 * order, or the faster of both for AUTO; sets c->order. 0, or -1 when
 * nothing fits. */
int plan_split_solve(split_ctx *c, const int *fixed, int *first_out);

/* Writes the infeasible report into err; returns PLAN_EINFEASIBLE.
 * fixed_first: the ranges of a ratio budget, or NULL. */
int plan_split_report(split_ctx *c, const plan_device *devs, const int *fixed_first, char *err,
                      size_t errlen);

/* split_inputs.c: every input of plan_make in range (PLAN_EINVAL with one
 * line in err otherwise), and rank r's budget from the budget string and
 * its device: *out the bytes it may use, *cap the automatic budget (free
 * memory less the margin); -1 with a line in err when a size is more than
 * the GPU has. */
int plan_split_check_inputs(const plan_model *m, const plan_device *devs, int nranks,
                            const plan_budget *b, const plan_workload *w, const plan_options *o,
                            char *err, size_t errlen);
int plan_split_resolve_budget(const plan_budget *b, const plan_device *d, int r,
                              const plan_options *o, uint64_t *out, uint64_t *cap, char *err,
                              size_t errlen);

#endif
