/* The split: the worked examples, optimality against brute force, and
 * properties over many seeded random models, inventories, budgets and
 * workloads. */
#include <math.h>

#include "plan_test.h"

static plan g_plan, g_plan2; /* large: keep off the stack */

static double max_stage(const plan *p) {
  double m = 0;
  for (int r = 0; r < p->nranks; r++) m = fmax(m, p->r[r].predicted_step_ms / p->micro_batches);
  return m;
}
static int total_streamed(const plan *p) {
  int n = 0;
  for (int r = 0; r < p->nranks; r++) n += p->r[r].num_streamed;
  return n;
}
static int nblocks(const plan *p, int r) { return p->r[r].last_block - p->r[r].first_block + 1; }

static int make(const plan_model *m, const plan_device *d, int n, const char *budget,
                const plan_workload *w, plan *out, char *err, size_t errlen) {
  plan_budget b;
  int rc = plan_budget_parse(budget, n, &b, err, errlen);
  if (rc) return rc;
  plan_options o;
  plan_options_default(&o);
  return plan_make(m, d, n, &b, w, &o, out, err, errlen);
}

/* Structural invariants of any plan the planner returns, checked here
 * directly rather than through plan_validate alone. */
static void check_plan(const plan *p, const plan_model *m, const char *what) {
  char err[512];
  CHECK(plan_validate(p, err, sizeof err) == PLAN_OK, "%s: %s", what, err);
  int seen[PLAN_MAX_BLOCKS] = {0}, next = 0;
  for (int r = 0; r < p->nranks; r++) {
    const plan_rank *q = &p->r[r];
    CHECK(q->first_block == next, "%s: rank %d starts at %d, want %d", what, r, q->first_block, next);
    uint64_t res = 0, str = 0, maxs = 0;
    for (int i = q->first_block; i <= q->last_block && i < PLAN_MAX_BLOCKS; i++) {
      seen[i]++;
      if (p->streamed[i]) {
        str += m->block_bytes[i];
        if (m->block_bytes[i] > maxs) maxs = m->block_bytes[i];
      } else {
        res += m->block_bytes[i];
      }
    }
    next = q->last_block + 1;
    uint64_t fixed = (r == 0 ? m->embed_bytes : 0) + (r == p->nranks - 1 ? m->head_bytes : 0);
    CHECK(q->weight_bytes == res + fixed, "%s: rank %d weight %llu, resident blocks %llu", what, r,
          (unsigned long long)q->weight_bytes, (unsigned long long)(res + fixed));
    CHECK(q->streamed_bytes == str, "%s: rank %d streamed bytes", what, r);
    CHECK(q->stream_slot_bytes == (uint64_t)(q->num_streamed < q->prefetch_depth
                                                 ? q->num_streamed
                                                 : q->prefetch_depth) * maxs,
          "%s: rank %d slots", what, r);
    CHECK(q->peak_bytes == q->weight_bytes + q->stream_slot_bytes + q->act_bytes + q->reserve_bytes,
          "%s: rank %d peak is not the sum of its parts", what, r);
    CHECK(q->peak_bytes <= q->budget_bytes, "%s: rank %d peak over budget", what, r);
    /* streaming only when needed: the whole range resident would not fit */
    if (q->num_streamed > 0)
      CHECK(q->weight_bytes + q->streamed_bytes + q->act_bytes + q->reserve_bytes > q->budget_bytes,
            "%s: rank %d streams %d blocks although all fit", what, r, q->num_streamed);
    /* spread: the first block of a range stays resident unless all stream */
    if (q->num_streamed > 0 && q->num_resident > 0 && m->block_bytes[q->first_block] ==
                                                           m->block_bytes[q->last_block])
      CHECK(!p->streamed[q->first_block] || m->block_bytes[q->first_block] > m->block_bytes[q->first_block + 1],
            "%s: rank %d streams its first block", what, r);
  }
  CHECK(next == m->num_blocks, "%s: blocks end at %d of %d", what, next, m->num_blocks);
  for (int i = 0; i < m->num_blocks; i++) CHECK(seen[i] == 1, "%s: block %d held %d times", what, i, seen[i]);
}

static void test_worked_examples(void) {
  test_wan big, small;
  test_wan_make(&big, 1);
  test_wan_make(&small, 0);
  plan_workload w = {81, 480, 832, 2, 512};
  plan_device d[2];
  char err[4096];

  /* Wan-14B bf16 (28.1 GB) on 2 x 24 GB at 480p: fits, 20 + 20, nothing streamed */
  test_device(&d[0], "gpu24-a", 24, 1);
  test_device(&d[1], "gpu24-b", 24, 1);
  int rc = make(&big.m, d, 2, NULL, &w, &g_plan, err, sizeof err);
  CHECK(rc == PLAN_OK, "14B on 2x24: %s", err);
  if (rc == PLAN_OK) {
    check_plan(&g_plan, &big.m, "14B 2x24");
    CHECK(nblocks(&g_plan, 0) == 20 && nblocks(&g_plan, 1) == 20, "14B 2x24 split %d/%d",
          nblocks(&g_plan, 0), nblocks(&g_plan, 1));
    CHECK(total_streamed(&g_plan) == 0, "14B 2x24 streams");
  }

  /* on 2 x 12 GB: refused without cpu,* (and the message says so) */
  test_device(&d[0], "gpu12-a", 12, 1);
  test_device(&d[1], "gpu12-b", 12, 1);
  rc = make(&big.m, d, 2, NULL, &w, &g_plan, err, sizeof err);
  CHECK(rc == PLAN_EINFEASIBLE, "14B on 2x12 without cpu,* planned");
  CHECK(strstr(err, "need") && strstr(err, "budget") && strstr(err, "cpu,*") &&
            strstr(err, "rank 0") && strstr(err, "rank 1") && strstr(err, "smallest budget"),
        "message: %s", err);
  /* with cpu,*: both ranks stream, spread */
  rc = make(&big.m, d, 2, "cpu,*", &w, &g_plan, err, sizeof err);
  CHECK(rc == PLAN_OK, "14B on 2x12 with cpu,*: %s", err);
  if (rc == PLAN_OK) {
    check_plan(&g_plan, &big.m, "14B 2x12 cpu,*");
    CHECK(g_plan.r[0].num_streamed > 0 && g_plan.r[1].num_streamed > 0, "nothing streamed");
    /* not bunched at the end: some streamed block in the first half of each range */
    for (int r = 0; r < 2; r++) {
      int a = g_plan.r[r].first_block, b = g_plan.r[r].last_block, early = 0;
      for (int i = a; i <= (a + b) / 2; i++) early += g_plan.streamed[i];
      CHECK(early > 0, "rank %d streams only at the end", r);
    }
  }

  /* Wan-1.3B on one 8 GB card: fits */
  test_device(&d[0], "gpu8", 8, 1);
  rc = make(&small.m, d, 1, NULL, &w, &g_plan, err, sizeof err);
  CHECK(rc == PLAN_OK, "1.3B on 8 GB: %s", err);
  if (rc == PLAN_OK) {
    check_plan(&g_plan, &small.m, "1.3B 8GB");
    CHECK(total_streamed(&g_plan) == 0 && !g_plan.chunked, "1.3B on 8 GB streams or chunks");
  }

  /* too many ranks */
  plan_device many[41];
  for (int i = 0; i < 41; i++) test_device(&many[i], "gpu", 80, 1);
  rc = make(&big.m, many, 41, NULL, &w, &g_plan, err, sizeof err);
  CHECK(rc == PLAN_EINVAL && strstr(err, "41 ranks") && strstr(err, "at most 40"), "41 ranks: %s",
        err);

  /* a byte budget over the card */
  test_device(&d[0], "gpu24-a", 24, 1);
  test_device(&d[1], "gpu24-b", 24, 1);
  rc = make(&big.m, d, 2, "cuda:0,30gb;cpu,*", &w, &g_plan, err, sizeof err);
  CHECK(rc == PLAN_EINVAL && strstr(err, "cuda:0,30.00gb") && strstr(err, "24.00 GiB"), "%s", err);

  /* ratio: 40% / 60% of the block bytes */
  rc = make(&big.m, d, 2, "cuda:0,40%;cuda:1,60%", &w, &g_plan, err, sizeof err);
  CHECK(rc == PLAN_OK && nblocks(&g_plan, 0) == 16 && nblocks(&g_plan, 1) == 24,
        "ratio 40/60: %s %d/%d", err, nblocks(&g_plan, 0), nblocks(&g_plan, 1));

  /* ratio 90% / 10%: rank 0 cannot hold 36 blocks of 14B in 24 GB */
  rc = make(&big.m, d, 2, "cuda:0,90%;cuda:1,10%", &w, &g_plan, err, sizeof err);
  CHECK(rc == PLAN_EINFEASIBLE && strstr(err, "blocks 0-35") && strstr(err, "too small") &&
            strstr(err, "ratio budget fixes"),
        "ratio 90/10: %s", err);

  /* a faster card gets more blocks: speeds 1 and 0.5 on big cards -> 2:1 */
  test_device(&d[0], "fast", 80, 1.0);
  test_device(&d[1], "slow", 80, 0.5);
  rc = make(&big.m, d, 2, NULL, &w, &g_plan, err, sizeof err);
  CHECK(rc == PLAN_OK && abs(nblocks(&g_plan, 0) - 27) <= 1, "speed 1:0.5 gives %d/%d",
        nblocks(&g_plan, 0), nblocks(&g_plan, 1));
}

/* Brute force over every split (no streaming, random unequal blocks): the
 * DP's slowest stage must equal the best one. */
static void test_optimal(void) {
  for (int it = 0; it < 150; it++) {
    test_wan t;
    test_wan_make(&t, (int)(rnd() % 2));
    int B = (int)rnd_in(1, 9), R = (int)rnd_in(1, B < 4 ? B : 4);
    t.m.num_blocks = B;
    for (int i = 0; i < B; i++) t.blocks[i] = (uint64_t)rnd_in(50, 1500) << 20;
    plan_workload w = {1 + 4 * rnd_in(0, 10), 16 * rnd_in(16, 40), 16 * rnd_in(16, 40),
                       (int)rnd_in(1, 2), 512};
    plan_device d[4];
    for (int r = 0; r < R; r++) {
      char name[16];
      snprintf(name, sizeof name, "g%d", r);
      test_device(&d[r], name, 3.0 + 10.0 * rnd_unit(), 0.5 + rnd_unit());
    }
    plan_options o;
    plan_options_default(&o);
    plan_budget b;
    char err[4096];
    plan_budget_parse(NULL, R, &b, err, sizeof err);
    int rc = plan_make(&t.m, d, R, &b, &w, &o, &g_plan, err, sizeof err);
    /* enumerate splits: cut points c_1 < ... < c_{R-1} */
    double best = INFINITY;
    int cuts[5];
    int64_t L = plan_tokens(&w);
    for (uint32_t mask = 0; mask < (1u << (B - 1)); mask++) {
      if (__builtin_popcount(mask) != R - 1) continue;
      int k = 0;
      cuts[k++] = 0;
      for (int i = 1; i < B; i++)
        if (mask & (1u << (i - 1))) cuts[k++] = i;
      cuts[k] = B;
      double worst = 0;
      int ok = 1;
      for (int r = 0; r < R && ok; r++) {
        int a = cuts[r], e = cuts[r + 1] - 1;
        uint64_t bytes = (r == 0 ? t.m.embed_bytes : 0) + (r == R - 1 ? t.m.head_bytes : 0);
        for (int i = a; i <= e; i++) bytes += t.blocks[i];
        /* the smallest activations this range can have: the most chunked */
        uint64_t act = plan_act_bytes(&t.m, &w, e - a + 1, r > 0, r < R - 1, r == 0, r == R - 1,
                                      L < 64 ? L : 64, L < 64 ? L : 64, L < 64 ? L : 64);
        double margin = fmax(0.05 * (double)d[r].total_bytes, 256.0 * 1024 * 1024);
        double budget = (double)d[r].total_bytes - margin;
        if ((double)(bytes + act + o.reserve_bytes) > budget) ok = 0;
        uint8_t none[16] = {0};
        double ms = plan_stage_ms(&t.m, &w, &o, d[r].speed, a, e, none, 2, r > 0, r == 0, r == R - 1);
        worst = fmax(worst, ms);
      }
      if (ok) best = fmin(best, worst);
    }
    if (!isfinite(best)) {
      CHECK(rc == PLAN_EINFEASIBLE, "brute force finds no split, planner rc %d", rc);
    } else {
      CHECK(rc == PLAN_OK, "brute force finds %.3f ms, planner fails: %s", best, err);
      if (rc == PLAN_OK) {
        check_plan(&g_plan, &t.m, "optimal");
        CHECK(fabs(max_stage(&g_plan) - best) <= 1e-9 * best, "planner %.6f ms, optimum %.6f ms",
              max_stage(&g_plan), best);
      }
    }
  }
}

static const char *random_budget(int R, const plan_device *d, char *s, size_t n) {
  switch (rnd() % 5) {
  case 0: return NULL;
  case 1: return "cpu,*";
  case 2: snprintf(s, n, "%.2f", 0.5 + 0.5 * rnd_unit()); return s;
  default: {
    size_t len = 0;
    for (int r = 0; r < R; r++)
      if (rnd() % 2)
        len += (size_t)snprintf(s + len, n - len, "cuda:%d,%.1fgb;", r,
                                (double)d[r].total_bytes / TEST_GIB * (0.4 + 0.55 * rnd_unit()));
    snprintf(s + len, n - len, "%s", rnd() % 2 || !len ? "cpu,*" : "");
    if (len && s[len] == '\0') s[len - 1] = '\0';
    return s;
  }
  }
}

/* Random models, inventories, budgets and workloads. */
static void test_properties(void) {
  int planned = 0, infeasible = 0, streamed = 0, chunked = 0;
  for (int it = 0; it < 400; it++) {
    test_wan t;
    test_wan_make(&t, (int)(rnd() % 2));
    int B = (int)rnd_in(2, 48), R = (int)rnd_in(1, B < 6 ? B : 6);
    int equal = (int)(rnd() % 2);
    uint64_t blk = (uint64_t)rnd_in(30, 800) << 20;
    t.m.num_blocks = B;
    for (int i = 0; i < B; i++) t.blocks[i] = equal ? blk : (uint64_t)rnd_in(30, 800) << 20;
    plan_workload w = {1 + 4 * rnd_in(0, 20), 16 * rnd_in(16, 52), 16 * rnd_in(16, 52),
                       (int)rnd_in(1, 4), 512};
    plan_device d[6];
    for (int r = 0; r < R; r++) {
      char name[16];
      snprintf(name, sizeof name, "g%d", r);
      test_device(&d[r], name, 2.0 + 46.0 * rnd_unit(), 0.5 + 1.5 * rnd_unit());
    }
    char bs[512];
    const char *budget = random_budget(R, d, bs, sizeof bs);
    char what[600];
    snprintf(what, sizeof what, "it %d (B %d, R %d, budget %s)", it, B, R, budget ? budget : "auto");
    char err[4096];
    int rc = make(&t.m, d, R, budget, &w, &g_plan, err, sizeof err);
    if (rc == PLAN_EINFEASIBLE) {
      infeasible++;
      CHECK(strstr(err, "need") && strstr(err, "budget") && strstr(err, "rank 0"), "%s: message: %s",
            what, err);
      /* the suggested budget, where the GPUs have it, does work */
      const char *sug = strstr(err, "--budget '");
      if (sug && !strstr(err, "more than a GPU has")) {
        char sb[1024];
        const char *q = sug + 10, *end = strchr(q, '\'');
        if (end && (size_t)(end - q) < sizeof sb) {
          memcpy(sb, q, (size_t)(end - q));
          sb[end - q] = '\0';
          int rc2 = make(&t.m, d, R, sb, &w, &g_plan2, err, sizeof err);
          CHECK(rc2 == PLAN_OK, "%s: suggested budget '%s' fails: %s", what, sb, err);
        }
      }
      continue;
    }
    if (rc != PLAN_OK) {
      /* a random byte budget over the free memory is refused as input */
      CHECK(rc == PLAN_EINVAL && strstr(err, "more than"), "%s: rc %d: %s", what, rc, err);
      continue;
    }
    planned++;
    streamed += total_streamed(&g_plan) > 0;
    chunked += g_plan.chunked;
    check_plan(&g_plan, &t.m, what);
    if (!budget || !strstr(budget, "cpu")) CHECK(total_streamed(&g_plan) == 0, "%s: streams without cpu", what);

    /* monotone in memory: every card 1.5x bigger, same budget kind -> still
     * feasible and never slower. (The total streamed count is not monotone
     * across different splits: with more memory a balanced split that hides
     * its copies can beat an unbalanced one that streams nothing; the split
     * minimizes time. For a fixed range it is: test_single_rank_monotone.) */
    if (!budget || strcmp(budget, "cpu,*") == 0) {
      plan_device d2[6];
      memcpy(d2, d, sizeof d);
      for (int r = 0; r < R; r++) d2[r].total_bytes = d2[r].free_bytes = d[r].total_bytes / 2 * 3;
      int rc2 = make(&t.m, d2, R, budget, &w, &g_plan2, err, sizeof err);
      CHECK(rc2 == PLAN_OK, "%s: more memory infeasible: %s", what, err);
      if (rc2 == PLAN_OK)
        CHECK(max_stage(&g_plan2) <= max_stage(&g_plan) * (1 + 1e-9), "%s: more memory is slower",
              what);
    }
  }
  printf("  properties: %d planned (%d streaming, %d chunked), %d infeasible\n", planned, streamed,
         chunked, infeasible);
  CHECK(planned > 50 && infeasible > 10 && streamed > 10, "random cases do not cover the kinds");
}

/* Asymmetric budgets favour the bigger card: two equal-speed ranks, one
 * with more memory; the bigger one holds at least as many resident blocks
 * and, when memory binds without streaming, at least as many blocks. */
static void test_asymmetric(void) {
  for (int it = 0; it < 100; it++) {
    test_wan t;
    test_wan_make(&t, 1);
    plan_workload w = {81, 480, 832, (int)rnd_in(1, 2), 512};
    double small = 9 + 6 * rnd_unit(), bigm = small + 2 + 20 * rnd_unit();
    int big_first = (int)(rnd() % 2);
    plan_device d[2];
    test_device(&d[0], big_first ? "big" : "small", big_first ? bigm : small, 1);
    test_device(&d[1], big_first ? "small" : "big", big_first ? small : bigm, 1);
    int ib = big_first ? 0 : 1, is = 1 - ib;
    const char *budget = rnd() % 2 ? "cpu,*" : NULL;
    char err[4096];
    int rc = make(&t.m, d, 2, budget, &w, &g_plan, err, sizeof err);
    if (rc != PLAN_OK) continue;
    check_plan(&g_plan, &t.m, "asymmetric");
    CHECK(g_plan.r[ib].num_resident >= g_plan.r[is].num_resident,
          "big card (%.1f GiB) %d resident < small card (%.1f GiB) %d", bigm,
          g_plan.r[ib].num_resident, small, g_plan.r[is].num_resident);
    CHECK(g_plan.r[ib].num_streamed <= g_plan.r[is].num_streamed, "big card streams more");
    if (!budget && g_plan.r[is].peak_bytes + 702788608ull > g_plan.r[is].budget_bytes)
      CHECK(nblocks(&g_plan, ib) >= nblocks(&g_plan, is), "memory-bound: big card has fewer blocks");
  }
}

/* For a fixed range (one rank holds every block), more memory never gives
 * more streamed blocks, nor a slower stage, nor finer chunks for the same
 * streamed count (it may chunk more to stream less). */
static void test_single_rank_monotone(void) {
  for (int it = 0; it < 100; it++) {
    test_wan t;
    test_wan_make(&t, (int)(rnd() % 2));
    int B = (int)rnd_in(1, 40);
    t.m.num_blocks = B;
    int equal = (int)(rnd() % 2);
    for (int i = 0; i < B; i++) t.blocks[i] = equal ? t.blocks[0] : (uint64_t)rnd_in(30, 800) << 20;
    plan_workload w = {1 + 4 * rnd_in(0, 20), 16 * rnd_in(16, 52), 16 * rnd_in(16, 52),
                       (int)rnd_in(1, 4), 512};
    double gib = 1.5 + 10 * rnd_unit();
    int prev_streamed = -1;
    double prev_ms = INFINITY;
    int64_t prev_rows = 0;
    for (int step = 0; step < 12; step++, gib *= 1.25) {
      plan_device d;
      test_device(&d, "g", gib, 1);
      char err[4096];
      int rc = make(&t.m, &d, 1, "cpu,*", &w, &g_plan, err, sizeof err);
      if (rc != PLAN_OK) {
        CHECK(prev_streamed < 0, "%.2f GiB infeasible after a smaller card fit: %s", gib, err);
        continue;
      }
      check_plan(&g_plan, &t.m, "single rank");
      int s = total_streamed(&g_plan);
      if (prev_streamed >= 0) {
        CHECK(s <= prev_streamed, "%.2f GiB streams %d, less memory streamed %d", gib, s,
              prev_streamed);
        CHECK(g_plan.r[0].predicted_step_ms <= prev_ms * (1 + 1e-9), "%.2f GiB is slower", gib);
        if (s == prev_streamed)
          CHECK(g_plan.r[0].ffn_rows >= prev_rows, "%.2f GiB chunks finer for as many streamed",
                gib);
      }
      prev_streamed = s;
      prev_ms = g_plan.r[0].predicted_step_ms;
      prev_rows = g_plan.r[0].ffn_rows;
    }
  }
}

int main(void) {
  test_seed("test_split");
  test_single_rank_monotone();
  test_worked_examples();
  test_optimal();
  test_properties();
  test_asymmetric();
  return test_done("test_split");
}
