/* The infeasible report of the split: what each rank needs against its
 * budget, the smallest budget that would work, and what else would (cpu,*,
 * more ranks). Internal to planner/ (plan_split.h). */
#include <string.h>

#include "layout.h"
#include "plan.h"
#include "plan_split.h"
#include "plan_strbuf.h"

/* The budget of rank r raised by add: saturating, and held to what its
 * device allows (the larger of its cap and its budget) when capped. */
static uint64_t raised_budget(const split_ctx *c, int r, uint64_t add, int capped) {
  uint64_t v = plan_sat_add(c->budget[r], add);
  uint64_t lim = c->cap[r] > c->budget[r] ? c->cap[r] : c->budget[r];
  return capped && v > lim ? lim : v;
}

/* The smallest amount (to 1 MiB) that, added to every rank's budget, makes
 * a plan exist: first raising only what the devices allow (each budget up
 * to its device's auto budget), then, if that is not enough, without
 * limit to say how much is missing. Leaves e's budgets at that raise and
 * first[] at its plan; PLAN_EINFEASIBLE (with the line in sb) when even
 * the whole model's bytes added do not fit. */
static int smallest_raise(const split_ctx *c, split_ctx *e, int *first, plan_strbuf *sb) {
  uint64_t all = 0;
  const int copies = plan_layout_copies(c->m);
  for (int i = 0; i < c->B; i++) all += plan_layout_group_bytes(c->m, c->m->block_bytes[i], copies);
  all += plan_layout_group_bytes(c->m, c->m->embed_bytes, copies) +
         plan_layout_group_bytes(c->m, c->m->head_bytes, copies) + c->o->reserve_bytes +
         c->o->decoder_bytes;
  all += plan_act_bytes(c->m, c->w, &(plan_stage_desc){.order = PLAN_ORDER_AUTO, .first_block = 0,
      .last_block = c->B - 1, .has_prev = 1, .has_next = 1, .has_embed = 1, .has_head = 1,
      .chunk_rows = c->L, .simple_attn = c->o->simple_attn});
  int capped = 1;
  for (int r = 0; r < c->R; r++) e->budget[r] = c->cap[r] > c->budget[r] ? c->cap[r] : c->budget[r];
  if (plan_split_solve(e, NULL, first) != 0) {
    capped = 0;
    for (int r = 0; r < c->R; r++) e->budget[r] = plan_sat_add(c->budget[r], all);
    if (plan_split_solve(e, NULL, first) != 0) {
      plan_sb_add(sb, "no plan fits even with every budget raised by %.2f GiB", all / GIB);
      return PLAN_EINFEASIBLE;
    }
  }
  uint64_t lo = 0, hi = all;
  while (hi - lo > (1u << 20)) { /* to 1 MiB */
    uint64_t mid = lo + (hi - lo) / 2;
    for (int r = 0; r < c->R; r++) e->budget[r] = raised_budget(c, r, mid, capped);
    int tmp[PLAN_MAX_RANKS];
    if (plan_split_solve(e, NULL, tmp) == 0) {
      hi = mid;
      memcpy(first, tmp, sizeof tmp);
    } else {
      lo = mid;
    }
  }
  for (int r = 0; r < c->R; r++) e->budget[r] = raised_budget(c, r, hi, capped);
  plan_split_solve(e, NULL, first);
  return 0;
}

/* One line per rank (its blocks, what they need against its budget) into
 * sb, and the budget that would fit each into ss; returns 1 when some rank
 * needs more than its GPU has. ev's context is e (the raised budgets) or,
 * for a fixed split, c. */
static int rank_lines(const split_ctx *c, split_ctx *e, const plan_device *devs, const int *first,
                      int fixed, plan_strbuf *sb, plan_strbuf *ss) {
  int over_total = 0;
  for (int r = 0; r < c->R; r++) {
    int a = first[r], b = r + 1 < c->R ? first[r + 1] - 1 : c->B - 1;
    split_reval ev;
    if (fixed) {
      plan_split_eval(c, r, a, b, NULL, &ev);
      if (!ev.ok) ev.peak = ev.need_min; /* a rank that fits reports its peak */
    } else {
      plan_split_eval(e, r, a, b, NULL, &ev);
    }
    double need = (double)ev.peak / GIB, have = (double)c->budget[r] / GIB;
    plan_sb_add(sb, "\n  rank %d (%s): blocks %d-%d need %.2f GiB, budget %.2f GiB%s", r,
                devs[r].name, a, b, need, have, ev.peak > c->budget[r] ? "  <- too small" : "");
    uint64_t free_b = devs[r].free_bytes ? devs[r].free_bytes : devs[r].total_bytes;
    if (ev.peak > free_b) over_total = 1;
    /* rounded up to whole MiB so the printed budget does fit; exact bytes
     * where that rounding would pass what the GPU has */
    uint64_t mib = (ev.peak + (1u << 20) - 1) >> 20;
    if ((mib << 20) <= free_b || ev.peak > free_b)
      plan_sb_add(ss, "%scuda:%d,%llumb", r ? ";" : "", r, (unsigned long long)mib);
    else
      plan_sb_add(ss, "%scuda:%d,%llub", r ? ";" : "", r, (unsigned long long)ev.peak);
  }
  return over_total;
}

/* The infeasible report: per rank needed vs available, and the smallest
 * budget that would work (the smallest amount E added to every rank's
 * budget that makes a plan exist, then each rank's peak in that plan). */
int plan_split_report(split_ctx *c, const plan_device *devs, const int *fixed_first, char *err,
                      size_t errlen) {
  plan_strbuf sb;
  plan_sb_init(&sb, err, errlen);
  int first[PLAN_MAX_RANKS];
  split_ctx e = *c;
  e.memo[0] = e.memo[1] = NULL; /* budgets change: no memo */
  e.ratio = c->ratio;
  if (fixed_first)
    memcpy(first, fixed_first, sizeof(int) * (size_t)c->R);
  else if (smallest_raise(c, &e, first, &sb) != 0)
    return PLAN_EINFEASIBLE;
  plan_sb_add(&sb, "no plan fits the budgets (%d rank%s, %d blocks, %lld tokens, %d micro-batch%s",
              c->R, c->R == 1 ? "" : "s", c->B, (long long)c->L, c->w->micro_batches,
              c->w->micro_batches == 1 ? "" : "es");
  /* the forced knobs are part of why */
  if (c->o->order != PLAN_ORDER_AUTO)
    plan_sb_add(&sb, ", %s-major order", c->o->order == PLAN_ORDER_BLOCK ? "block" : "micro-batch");
  if (c->o->stream_frac >= 0) plan_sb_add(&sb, ", stream fraction %g", c->o->stream_frac);
  if (c->o->max_rows > 0)
    plan_sb_add(&sb, ", chunks of at most %lld rows", (long long)c->o->max_rows);
  plan_sb_add(&sb, "):");
  char suggest[64 * PLAN_MAX_RANKS];
  plan_strbuf ss;
  plan_sb_init(&ss, suggest, sizeof suggest);
  const int over_total = rank_lines(c, &e, devs, first, fixed_first != NULL, &sb, &ss);
  if (!fixed_first) {
    plan_sb_add(&sb, "\n  smallest budget that would work: --budget '%s%s'", suggest,
                c->allow_stream ? ";cpu,*" : "");
    if (over_total)
      plan_sb_add(&sb, " (more than a GPU has: use more ranks%s)",
                  c->allow_stream ? ", or smaller chunks" : ", or add cpu,* to stream blocks");
  }
  if (fixed_first)
    plan_sb_add(&sb, "\n  a ratio budget fixes each rank's blocks: lower the share of a rank marked too "
                     "small, or stream a share with cpu,N%%");
  if (!c->allow_stream && !c->ratio) {
    split_ctx s = *c;
    s.memo[0] = s.memo[1] = NULL;
    s.allow_stream = 1;
    int tmp[PLAN_MAX_RANKS];
    if (plan_split_solve(&s, NULL, tmp) == 0)
      plan_sb_add(&sb, "\n  or add 'cpu,*' to the budget to stream the blocks that do not fit "
                       "from pinned host memory (for example --budget 'cpu,*')");
  }
  return PLAN_EINFEASIBLE;
}
