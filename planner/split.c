/* The split: contiguous block ranges over the pipeline ranks, the order of
 * work, and, within a rank, which blocks are streamed from pinned host
 * memory, subject to every rank's budget.
 *
 * Exact, not greedy: per order, a dynamic program over (rank, last block).
 * Micro-batch-major (a pipeline): a first DP finds the smallest possible
 * slowest-stage time T*; a second one, over the ranges whose stage time is
 * <= T*, minimizes the streamed block count and then the sum of stage times
 * (the pipeline fill). Block-major (stages in sequence, step = sum of stage
 * times): one DP minimizes the sum, then the streamed count, then the sum of
 * squared stage times (the most even split among equals). All are O(R B^2)
 * range evaluations, memoized per order. The automatic order solves both and
 * keeps the faster plan. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "plan.h"
#include "plan_split.h"
#include "plan_strbuf.h"

static int cmp_desc(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? 1 : (a > b ? -1 : 0);
}

/* Which k blocks of the range to stream: the k largest (fewest bytes left
 * resident), and among equal sizes spread evenly, counted from the end:
 * positions n-1-floor(j n / k), j = 0..k-1. So the first block stays
 * resident unless all are streamed, every streamed copy has resident
 * compute before it to hide behind, and k streamed blocks are never bunched
 * at the end (k = 2 of 20: blocks 9 and 19; k = 13: every block but
 * 0, 2, 5, 8, 11, 14, 17). */
static void pick_streamed(const uint64_t *bytes, int nb, int k, uint64_t kth, uint8_t *flags) {
  memset(flags, 0, (size_t)nb);
  if (k <= 0) return;
  int above = 0, equal = 0;
  int eq_pos[PLAN_MAX_BLOCKS];
  for (int i = 0; i < nb; i++) {
    if (bytes[i] > kth) flags[i] = 1, above++;
    if (bytes[i] == kth) eq_pos[equal++] = i;
  }
  int q = k - above; /* 1..equal */
  for (int j = 0; j < q; j++) {
    int idx = equal - 1 - (int)(((int64_t)j * equal) / q);
    flags[eq_pos[idx]] = 1;
  }
}

/* Blocks a range of nb must stream under a forced stream fraction:
 * ceil(frac x nb) (less a rounding hair, so 0.3 x 10 is 3), none without. */
static int forced_streams(const split_ctx *c, int nb) {
  if (c->o->stream_frac < 0) return 0;
  int k = (int)ceil(c->o->stream_frac * nb - 1e-9);
  return k < 0 ? 0 : (k > nb ? nb : k);
}

/* The coarsest chunk level (of the first nlevels) at which rank ev->r fits with `resident` block
 * bytes and `slots` slot bytes on the device besides the end groups
 * (fixed) and base[lv] (those groups, the rest of the arena, the reserve,
 * the decoder): fills ev's level and memory and returns 1, else 0 (with
 * need_min lowered to the smallest peak seen). */
static int try_level(const split_ctx *c, const uint64_t *base, int nlevels, uint64_t fixed,
                     uint64_t resident, uint64_t slots, split_reval *ev) {
  const int r = ev->r, last = r == c->R - 1;
  const uint64_t dec = last ? c->o->decoder_bytes : 0;
  for (int lv = 0; lv < nlevels; lv++) {
    uint64_t peak = plan_sat_add(base[lv], resident + slots);
    if (peak < ev->need_min) ev->need_min = peak;
    if (peak > c->budget[r]) continue;
    ev->ok = 1;
    ev->level = lv;
    ev->weight = fixed + resident;
    ev->slots = slots;
    ev->act = base[lv] - fixed - c->o->reserve_bytes - dec;
    ev->peak = peak;
    return 1;
  }
  return 0;
}

/* Evaluates rank r holding blocks a..b in the ctx's order: the fewest
 * streamed blocks and then the coarsest chunk level that fit its budget;
 * its time and memory. */
void plan_split_eval(const split_ctx *c, int r, int a, int b, uint8_t *flags_out,
                     split_reval *ev) {
  const plan_model *m = c->m;
  int nb = b - a + 1;
  int first = r == 0, last = r == c->R - 1;
  /* The stage's arena (layout.h) holds the weights first, each group at an
   * aligned offset: its total is the aligned weights plus plan_act_bytes. */
  const int copies = plan_layout_copies(m);
  uint64_t fixed = (first ? plan_layout_group_bytes(m, m->embed_bytes, copies) : 0) +
                   (last ? plan_layout_group_bytes(m, m->head_bytes, copies) : 0);
  uint64_t sorted[PLAN_MAX_BLOCKS], prefix[PLAN_MAX_BLOCKS + 1];
  uint8_t flags[PLAN_MAX_BLOCKS];
  memcpy(sorted, m->block_bytes + a, (size_t)nb * sizeof *sorted);
  qsort(sorted, (size_t)nb, sizeof *sorted, cmp_desc);
  prefix[0] = 0;
  uint64_t one_copy = 0; /* every block once: the device copy a swap keeps */
  for (int i = 0; i < nb; i++) {
    prefix[i + 1] = prefix[i] + plan_layout_group_bytes(m, sorted[i], copies);
    one_copy += plan_layout_group_bytes(m, sorted[i], 1);
  }
  uint64_t total = prefix[nb];
  /* A forced fraction streams its blocks with or without a cpu entry; only
   * a cpu entry lets the budget stream more. */
  int kmin = forced_streams(c, nb), kmax = c->allow_stream ? nb : kmin;
  int depth_pref = c->o->prefetch_depth > 0 ? c->o->prefetch_depth : 1;

  memset(ev, 0, sizeof *ev);
  ev->need_min = UINT64_MAX;
  /* Order of preference: the fewest streamed blocks k (so more memory can
   * never give more streamed blocks: the feasible set only grows), then the
   * deeper prefetch (copies overlap compute), then the coarsest chunks
   * (chunking costs little, streaming costs a copy per micro-batch; at
   * k = 0 and level 0 nothing is chunked or streamed). */
  uint64_t base[MAX_LEVELS];
  const uint64_t dec = last ? c->o->decoder_bytes : 0;
  for (int lv = 0; lv < c->nlevels; lv++) {
    uint64_t act =
        plan_act_bytes(m, c->w, &(plan_stage_desc){.order = c->order, .first_block = a,
            .last_block = b, .has_prev = r > 0, .has_next = r < c->R - 1, .has_embed = first,
            .has_head = last, .chunk_rows = c->rows[lv], .simple_attn = c->o->simple_attn});
    base[lv] = plan_sat_add(plan_sat_add(plan_sat_add(fixed, act), c->o->reserve_bytes), dec);
  }
  ev->r = r;
  /* Two experts whose shares do not both fit unchunked: swapping the
   * rank's blocks at the switch (one device copy, no cost per step) comes
   * before chunking and streaming; it keeps both shares in pinned host
   * memory, so it needs the budget's cpu entry. */
  const int can_swap = copies > 1 && kmin == 0 && c->allow_stream && !c->ratio;
  memset(flags, 0, (size_t)nb);
  if (can_swap && !try_level(c, base, 1, fixed, total, 0, ev) &&
      try_level(c, base, c->nlevels, fixed, one_copy, 0, ev)) {
    ev->swap = 1;
    ev->streamed_bytes = total; /* both experts' blocks in pinned host memory */
  }
  /* (resident unchunked, when the first try fit: nothing streamed) */
  for (int k = kmin; k <= kmax && !ev->ok; k++) {
    uint64_t resident = total - prefix[k];
    /* ratio mode: at most the share, give or take half a block of rounding */
    if (c->ratio && (double)resident > c->resident_cap[r] + 0.5 * (double)sorted[0]) continue;
    for (int depth = k ? depth_pref : 1; depth >= 1 && !ev->ok; depth = depth > 1 ? 1 : 0) {
      uint64_t slots =
          k ? (uint64_t)(k < depth ? k : depth) * plan_layout_group_bytes(m, sorted[0], 1) : 0;
      if (!try_level(c, base, c->nlevels, fixed, resident, slots, ev)) continue;
      ev->nstream = k;
      ev->depth = k ? depth : 0;
      ev->streamed_bytes = prefix[k];
      pick_streamed(m->block_bytes + a, nb, k, k ? sorted[k - 1] : 0, flags);
    }
  }
  if (!ev->ok) return;
  ev->ms = plan_stage_ms(m, c->w, c->o, &(plan_stage_desc){.order = c->order, .speed = c->speed[r],
      .first_block = a, .last_block = b, .streamed = flags, .depth = ev->depth, .has_prev = r > 0,
      .has_embed = first, .has_head = last});
  if (flags_out) memcpy(flags_out, flags, (size_t)nb);
}

/* Memoized feasibility and time of a range (the DPs' inner call). */
static int range_cost(split_ctx *c, int r, int a, int b, double *ms, int *nstream) {
  split_memo *mm = c->memo[c->order == PLAN_ORDER_BLOCK];
  split_memo *e = mm ? &mm[((size_t)r * (size_t)c->B + (size_t)a) * (size_t)c->B + (size_t)b] : NULL;
  if (e && e->state) {
    *ms = e->ms;
    *nstream = e->nstream;
    return e->state == 1;
  }
  split_reval ev;
  plan_split_eval(c, r, a, b, NULL, &ev);
  if (e) {
    e->state = ev.ok ? 1 : 2;
    e->ms = ev.ms;
    e->nstream = ev.nstream;
  }
  *ms = ev.ms;
  *nstream = ev.nstream;
  return ev.ok;
}

/* Solves the split in the ctx's order. first[r] receives rank r's first
 * block. Returns 0, or -1 when no split fits. */
static int dp_solve(split_ctx *c, int *first_out) {
  int R = c->R, B = c->B, block = c->order == PLAN_ORDER_BLOCK;
  size_t cells = (size_t)R * (size_t)B;
  double *best = malloc(cells * sizeof *best);
  double *sum = malloc(cells * sizeof *sum);
  double *sq = malloc(cells * sizeof *sq);
  int *cnt = malloc(cells * sizeof *cnt);
  int *from = malloc(cells * sizeof *from);
  int rc = -1;
  if (!best || !sum || !sq || !cnt || !from) goto out;

  /* Phase 1 (micro-batch-major only; block-major has no bottleneck stage):
   * best[r][b] = smallest slowest-stage time of ranks 0..r holding blocks
   * 0..b; rank r takes a..b, every earlier rank at least one block. */
  double cap = INFINITY;
  if (!block) {
    for (size_t i = 0; i < cells; i++) best[i] = INFINITY;
    for (int r = 0; r < R; r++) {
      for (int b = r; b <= B - R + r; b++) {
        for (int a = (r == 0 ? 0 : r); a <= b; a++) {
          if (r == 0 && a != 0) break;
          double prev = r == 0 ? 0.0 : best[(size_t)(r - 1) * B + (size_t)(a - 1)];
          if (!isfinite(prev)) continue;
          double ms;
          int ns;
          if (!range_cost(c, r, a, b, &ms, &ns)) continue;
          double v = fmax(prev, ms);
          if (v < best[(size_t)r * B + (size_t)b]) best[(size_t)r * B + (size_t)b] = v;
        }
      }
    }
    double tstar = best[(size_t)(R - 1) * B + (size_t)(B - 1)];
    if (!isfinite(tstar)) goto out;
    cap = tstar * (1.0 + 1e-12) + 1e-12;
  }

  /* Phase 2, additive keys, so exact. Micro-batch-major: among splits whose
   * every stage is <= T*, fewest streamed blocks, then the smallest sum of
   * stage times. Block-major: the smallest sum (the step time; equal within
   * rounding counts as equal), then fewest streamed blocks, then the
   * smallest sum of squares. */
  for (size_t i = 0; i < cells; i++) cnt[i] = -1;
  for (int r = 0; r < R; r++) {
    for (int b = r; b <= B - R + r; b++) {
      size_t here = (size_t)r * B + (size_t)b;
      for (int a = (r == 0 ? 0 : r); a <= b; a++) {
        if (r == 0 && a != 0) break;
        int pc = 0;
        double ps = 0.0, pq = 0.0;
        if (r > 0) {
          size_t p = (size_t)(r - 1) * B + (size_t)(a - 1);
          if (cnt[p] < 0) continue;
          pc = cnt[p];
          ps = sum[p];
          pq = sq[p];
        }
        double ms;
        int ns;
        if (!range_cost(c, r, a, b, &ms, &ns) || ms > cap) continue;
        int nc = pc + ns;
        double s = ps + ms, q = pq + ms * ms;
        int better;
        if (cnt[here] < 0) {
          better = 1;
        } else if (block) {
          double tol = 1e-9 * fmax(s, sum[here]);
          better = s < sum[here] - tol ||
                   (s <= sum[here] + tol &&
                    (nc < cnt[here] || (nc == cnt[here] && q < sq[here] * (1.0 - 1e-12))));
        } else {
          better = nc < cnt[here] || (nc == cnt[here] && s < sum[here] - 1e-12);
        }
        if (better) {
          cnt[here] = nc;
          sum[here] = s;
          sq[here] = q;
          from[here] = a;
        }
      }
    }
  }
  int b = B - 1;
  for (int r = R - 1; r >= 0; r--) {
    size_t here = (size_t)r * B + (size_t)b;
    if (cnt[here] < 0) goto out; /* block-major: nothing fits (micro: phase 1 said so) */
    first_out[r] = from[here];
    b = from[here] - 1;
  }
  rc = 0;
out:
  free(best);
  free(sum);
  free(sq);
  free(cnt);
  free(from);
  return rc;
}

/* Predicted step time of the split first[] in the ctx's order. */
static double split_step_ms(split_ctx *c, const int *first) {
  double ms[PLAN_MAX_RANKS];
  for (int r = 0; r < c->R; r++) {
    int a = first[r], b = r + 1 < c->R ? first[r + 1] - 1 : c->B - 1, ns;
    range_cost(c, r, a, b, &ms[r], &ns);
  }
  return plan_pipeline_ms(c->order, c->w->micro_batches, c->R, ms);
}

/* Solves the split in the options' order, or, for AUTO, in both orders,
 * keeping the smaller predicted step time (micro-batch-major unless
 * block-major is faster beyond rounding). With fixed (a ratio budget's
 * ranges) only the order is chosen, among those in which every range fits.
 * Leaves c->order at the chosen order. Returns 0, or -1 when no split fits
 * in any order tried. */
int plan_split_solve(split_ctx *c, const int *fixed, int *first_out) {
  int orders[2] = {PLAN_ORDER_MICRO, PLAN_ORDER_BLOCK}, n = 2, found = 0, chosen = 0;
  if (c->o->order != PLAN_ORDER_AUTO) {
    orders[0] = c->o->order;
    n = 1;
  }
  double best = INFINITY;
  int first[PLAN_MAX_RANKS];
  for (int i = 0; i < n; i++) {
    c->order = orders[i];
    if (fixed) {
      int fits = 1;
      for (int r = 0; r < c->R && fits; r++) {
        int a = fixed[r], b = r + 1 < c->R ? fixed[r + 1] - 1 : c->B - 1, ns;
        double ms;
        fits = range_cost(c, r, a, b, &ms, &ns);
      }
      if (!fits) continue;
      memcpy(first, fixed, sizeof(int) * (size_t)c->R);
    } else if (dp_solve(c, first) != 0) {
      continue;
    }
    double ms = split_step_ms(c, first);
    if (!found || ms < best * (1.0 - 1e-9)) {
      found = 1;
      best = ms;
      chosen = orders[i];
      memcpy(first_out, first, sizeof(int) * (size_t)c->R);
    }
  }
  c->order = found ? chosen : orders[0];
  return found ? 0 : -1;
}

static int fail(char *err, size_t errlen, int code, const char *msg) {
  if (err && errlen) snprintf(err, errlen, "%s", msg);
  return code;
}

/* Fills the plan from the ranges (first[r]..first[r+1]-1) in the ctx's order. */
static void fill_plan(split_ctx *c, const plan_device *devs, const int *first, plan *p) {
  memset(p, 0, sizeof *p);
  p->nranks = c->R;
  p->num_blocks = c->B;
  p->tokens = plan_tokens(c->w);
  p->micro_batches = c->w->micro_batches;
  p->w8a8_epilogue = c->m->w8a8_epilogue != 0;
  double stage_ms[PLAN_MAX_RANKS];
  for (int r = 0; r < c->R; r++) {
    int a = first[r], b = r + 1 < c->R ? first[r + 1] - 1 : c->B - 1;
    split_reval ev;
    plan_split_eval(c, r, a, b, p->streamed + a, &ev);
    plan_rank *pr = &p->r[r];
    pr->rank = r;
    snprintf(pr->device, sizeof pr->device, "%s", devs[r].name);
    pr->first_block = a;
    pr->last_block = b;
    pr->num_streamed = ev.nstream;
    pr->num_resident = b - a + 1 - ev.nstream;
    pr->has_embed = r == 0;
    pr->has_head = r == c->R - 1;
    pr->order = c->order;
    pr->chunk_rows = c->rows[ev.level];
    if (c->rows[ev.level] < c->L) p->chunked = 1;
    pr->prefetch_depth = ev.depth;
    pr->weight_bytes = ev.weight;
    pr->stream_slot_bytes = ev.slots;
    pr->streamed_bytes = ev.streamed_bytes;
    pr->act_bytes = ev.act;
    pr->reserve_bytes = c->o->reserve_bytes;
    pr->decoder_bytes = r == c->R - 1 ? c->o->decoder_bytes : 0;
    pr->peak_bytes = ev.peak;
    pr->budget_bytes = c->budget[r];
    pr->predicted_step_ms = stage_ms[r] = ev.ms;
    pr->experts_mode = c->m->experts < 2 ? PLAN_EXPERTS_ONE
                       : ev.swap        ? PLAN_EXPERTS_SWAP
                       : ev.nstream     ? PLAN_EXPERTS_STREAM
                                        : PLAN_EXPERTS_RESIDENT;
    if (ev.swap)
      pr->predicted_switch_ms =
          plan_switch_ms(c->m, c->w, c->o, c->order, c->speed[r], a, b);
  }
  p->predicted_step_ms = plan_pipeline_ms(c->order, c->w->micro_batches, c->R, stage_ms);
}

/* Chunk levels, coarsest first: L, then L / 2^k rounded up to a multiple of
 * 64, down to 64. A row cap (max_rows) drops the levels above it; when it is
 * below every level, the cap itself is the only one. */
static void make_levels(split_ctx *c) {
  c->nlevels = 0;
  c->rows[c->nlevels++] = c->L;
  int64_t prev = c->L;
  for (int k = 1; k < 40 && c->nlevels < MAX_LEVELS; k++) {
    int64_t x = (c->L + ((int64_t)1 << k) - 1) >> k;
    x = (x + 63) / 64 * 64; /* GEMM-friendly row counts */
    if (x < 64) x = 64;
    if (x >= prev) {
      if (x <= 64) break;
      continue;
    }
    c->rows[c->nlevels++] = x;
    prev = x;
    if (x <= 64) break;
  }
  int64_t cap = c->o->max_rows;
  if (cap <= 0) return;
  int keep = 0;
  while (keep < c->nlevels && c->rows[keep] > cap) keep++;
  if (keep == c->nlevels) {
    c->rows[0] = cap;
    c->nlevels = 1;
    return;
  }
  memmove(c->rows, c->rows + keep, sizeof(int64_t) * (size_t)(c->nlevels - keep));
  c->nlevels -= keep;
}

/* Ratio mode: ranges from the shares of block bytes (a block goes to the
 * rank whose cumulative share interval holds the block's midpoint). */
static int ratio_ranges(const split_ctx *c, const plan_budget *b, int *first, char *err, size_t errlen) {
  double total = 0.0, gsum = 0.0;
  for (int i = 0; i < c->B; i++) total += (double)c->m->block_bytes[i];
  for (int r = 0; r < c->R; r++) gsum += b->share[r];
  double cum = 0.0;
  int r = 0;
  double bound = b->share[0] / gsum * total;
  first[0] = 0;
  for (int i = 0; i < c->B; i++) {
    double mid = cum + 0.5 * (double)c->m->block_bytes[i];
    while (r < c->R - 1 && mid > bound) {
      r++;
      bound += b->share[r] / gsum * total;
      first[r] = i;
    }
    cum += (double)c->m->block_bytes[i];
  }
  for (int k = 0; k < c->R; k++) {
    int last = k + 1 < c->R ? first[k + 1] - 1 : c->B - 1;
    if (k > r || last < first[k]) {
      if (err && errlen)
        snprintf(err, errlen,
                 "ratio budget gives cuda:%d %.4g%%, less than one block (%.4g%% each): raise "
                 "its share",
                 k, b->share[k] * 100.0, 100.0 / c->B);
      return -1;
    }
  }
  return 0;
}

int plan_make(const plan_inputs *in, plan *out, char *err, size_t errlen) {
  if (!in) return fail(err, errlen, PLAN_EINVAL, "plan: missing input");
  const plan_model *m = in->m;
  const plan_device *devs = in->devs;
  const int nranks = in->nranks;
  const plan_budget *b = in->b;
  const plan_workload *w = in->w;
  const plan_options *o = in->o;
  int rc = plan_split_check_inputs(m, devs, nranks, b, w, o, err, errlen);
  if (rc) return rc;
  split_ctx *c = calloc(1, sizeof *c);
  plan *p = calloc(1, sizeof *p);
  if (!c || !p) {
    rc = fail(err, errlen, PLAN_EINVAL, "plan: out of host memory");
    goto out;
  }
  c->m = m;
  c->w = w;
  c->o = o;
  c->R = nranks;
  c->B = m->num_blocks;
  c->L = plan_rank_tokens(w);
  c->allow_stream = b->allow_stream;
  c->ratio = b->mode == PLAN_BUDGET_RATIO;
  double block_total = 0.0;
  for (int i = 0; i < c->B; i++) block_total += (double)m->block_bytes[i];
  for (int r = 0; r < nranks; r++) {
    c->speed[r] = devs[r].speed;
    if (plan_split_resolve_budget(b, &devs[r], r, o, &c->budget[r], &c->cap[r], err, errlen) != 0) {
      rc = PLAN_EINVAL;
      goto out;
    }
    if (c->ratio) c->resident_cap[r] = b->share[r] * block_total;
  }
  if (c->ratio) c->allow_stream = b->cpu_share > 0.0;
  make_levels(c);
  size_t ncache = (size_t)c->R * (size_t)c->B * (size_t)c->B;
  if (ncache <= ((size_t)1 << 20))
    for (int k = 0; k < 2; k++) c->memo[k] = calloc(ncache, sizeof *c->memo[k]);

  int first[PLAN_MAX_RANKS];
  if (c->ratio) {
    if (ratio_ranges(c, b, first, err, errlen) != 0) {
      rc = PLAN_EINVAL;
      goto out;
    }
    int fixed[PLAN_MAX_RANKS];
    memcpy(fixed, first, sizeof fixed);
    if (plan_split_solve(c, fixed, first) != 0) {
      rc = plan_split_report(c, devs, fixed, err, errlen);
      goto out;
    }
  } else if (plan_split_solve(c, NULL, first) != 0) {
    rc = plan_split_report(c, devs, NULL, err, errlen);
    goto out;
  }
  fill_plan(c, devs, first, p);
  /* cpu,FRACTION caps by the host memory of rank 0's node, when known. */
  uint64_t cpu_cap = b->cpu_bytes;
  if (!cpu_cap && b->cpu_frac > 0.0 && devs[0].host_bytes)
    cpu_cap = (uint64_t)floor(b->cpu_frac * (double)devs[0].host_bytes);
  if (cpu_cap) {
    uint64_t streamed = 0;
    for (int r = 0; r < nranks; r++) streamed += p->r[r].streamed_bytes;
    if (streamed > cpu_cap) {
      if (err && errlen)
        snprintf(err, errlen,
                 "the plan streams %.2f GiB from pinned host memory but the budget caps it at "
                 "cpu,%.2fgb: raise the cpu entry or use cpu,*",
                 streamed / GIB, cpu_cap / GIB);
      rc = PLAN_EINFEASIBLE;
      goto out;
    }
  }
  *out = *p;
  rc = PLAN_OK;
out:
  if (c) {
    free(c->memo[0]);
    free(c->memo[1]);
  }
  free(c);
  free(p);
  return rc;
}
