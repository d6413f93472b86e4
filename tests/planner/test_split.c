/* The split: the worked examples, optimality against brute force, and
 * properties over many seeded random models, inventories, budgets and
 * workloads. */
#include <math.h>

#include "layout.h"
#include "plan_test.h"

static plan g_plan, g_plan2; /* large: keep off the stack */

static double max_stage(const plan *p) { /* per step */
  double m = 0;
  for (int r = 0; r < p->nranks; r++) m = fmax(m, p->r[r].predicted_step_ms);
  return m;
}
static int total_streamed(const plan *p) {
  int n = 0;
  for (int r = 0; r < p->nranks; r++) n += p->r[r].num_streamed;
  return n;
}
static int nblocks(const plan *p, int r) { return p->r[r].last_block - p->r[r].first_block + 1; }

static int make_o(const plan_model *m, const plan_device *d, int n, const char *budget,
                  const plan_workload *w, const plan_options *o, plan *out, char *err,
                  size_t errlen) {
  plan_budget b;
  int rc = plan_budget_parse(budget, n, &b, err, errlen);
  if (rc) return rc;
  return plan_make(&(plan_inputs){m, d, n, &b, w, o}, out, err, errlen);
}
static int make(const plan_model *m, const plan_device *d, int n, const char *budget,
                const plan_workload *w, plan *out, char *err, size_t errlen) {
  plan_options o;
  plan_options_default(&o);
  return make_o(m, d, n, budget, w, &o, out, err, errlen);
}
static int forced(double frac, int nb) { /* ceil(frac nb), frac < 0: none */
  if (frac < 0) return 0;
  int k = 0;
  while (k < nb && (double)k < frac * nb - 1e-9) k++;
  return k;
}

/* Structural invariants of any plan the planner returns for options o,
 * checked here directly rather than through plan_validate alone. */
static void check_plan_o(const plan *p, const plan_model *m, const plan_options *o,
                         const char *what) {
  char err[512];
  CHECK(plan_validate(p, err, sizeof err) == PLAN_OK, "%s: %s", what, err);
  int seen[PLAN_MAX_BLOCKS] = {0}, next = 0;
  double sum = 0, mx = 0, M = p->micro_batches;
  for (int r = 0; r < p->nranks; r++) {
    const plan_rank *q = &p->r[r];
    CHECK(q->order == p->r[0].order &&
              (q->order == PLAN_ORDER_MICRO || q->order == PLAN_ORDER_BLOCK),
          "%s: rank %d order %d", what, r, q->order);
    if (o->order != PLAN_ORDER_AUTO) CHECK(q->order == o->order, "%s: order not as asked", what);
    int kmin = forced(o->stream_frac, q->last_block - q->first_block + 1);
    CHECK(q->num_streamed >= kmin, "%s: rank %d streams %d, forced %d", what, r, q->num_streamed,
          kmin);
    if (o->max_rows > 0) CHECK(q->chunk_rows <= o->max_rows, "%s: rows over the cap", what);
    sum += q->predicted_step_ms;
    mx = fmax(mx, q->predicted_step_ms);
    CHECK(q->first_block == next, "%s: rank %d starts at %d, want %d", what, r, q->first_block, next);
    uint64_t res = 0, str = 0, maxs = 0;
    for (int i = q->first_block; i <= q->last_block && i < PLAN_MAX_BLOCKS; i++) {
      seen[i]++;
      /* the arena holds every group at an aligned offset */
      uint64_t bb = plan_layout_align(m->block_bytes[i]);
      if (p->streamed[i]) {
        str += bb;
        if (bb > maxs) maxs = bb;
      } else {
        res += bb;
      }
    }
    next = q->last_block + 1;
    uint64_t fixed = (r == 0 ? plan_layout_align(m->embed_bytes) : 0) +
                     (r == p->nranks - 1 ? plan_layout_align(m->head_bytes) : 0);
    CHECK(q->weight_bytes == res + fixed, "%s: rank %d weight %llu, resident blocks %llu", what, r,
          (unsigned long long)q->weight_bytes, (unsigned long long)(res + fixed));
    CHECK(q->streamed_bytes == str, "%s: rank %d streamed bytes", what, r);
    CHECK(q->stream_slot_bytes == (uint64_t)(q->num_streamed < q->prefetch_depth
                                                 ? q->num_streamed
                                                 : q->prefetch_depth) * maxs,
          "%s: rank %d slots", what, r);
    CHECK(q->peak_bytes == q->weight_bytes + q->stream_slot_bytes + q->act_bytes +
                               q->reserve_bytes + q->decoder_bytes,
          "%s: rank %d peak is not the sum of its parts", what, r);
    CHECK(q->decoder_bytes == (r == p->nranks - 1 ? o->decoder_bytes : 0),
          "%s: rank %d keeps %llu decoder bytes", what, r, (unsigned long long)q->decoder_bytes);
    CHECK(q->peak_bytes <= q->budget_bytes, "%s: rank %d peak over budget", what, r);
    /* streaming only when needed: the whole range resident would not fit */
    if (q->num_streamed > 0 && kmin == 0)
      CHECK(q->weight_bytes + q->streamed_bytes + q->act_bytes + q->reserve_bytes +
                    q->decoder_bytes > q->budget_bytes,
            "%s: rank %d streams %d blocks although all fit", what, r, q->num_streamed);
    /* which blocks stream: the largest (no resident block is larger than
     * a streamed one), and among equal sizes spread so that the range's
     * first block stays resident unless every block of its size streams */
    if (q->num_streamed > 0 && q->num_resident > 0) {
      uint64_t min_str = UINT64_MAX, max_res = 0;
      int first_size_resident = 0;
      for (int i = q->first_block; i <= q->last_block; i++) {
        uint64_t bi = m->block_bytes[i];
        if (p->streamed[i]) min_str = bi < min_str ? bi : min_str;
        else max_res = bi > max_res ? bi : max_res;
        if (!p->streamed[i] && bi == m->block_bytes[q->first_block]) first_size_resident = 1;
      }
      CHECK(max_res <= min_str, "%s: rank %d streams a %llu-byte block and keeps a %llu-byte one",
            what, r, (unsigned long long)min_str, (unsigned long long)max_res);
      CHECK(!p->streamed[q->first_block] || !first_size_resident,
            "%s: rank %d streams its first block and keeps one of the same size", what, r);
    }
  }
  CHECK(next == m->num_blocks, "%s: blocks end at %d of %d", what, next, m->num_blocks);
  for (int i = 0; i < m->num_blocks; i++) CHECK(seen[i] == 1, "%s: block %d held %d times", what, i, seen[i]);
  /* the step: block-major stages in sequence; micro-batch-major pipelined */
  double step = p->r[0].order == PLAN_ORDER_BLOCK ? sum : sum / M + (M - 1) / M * mx;
  CHECK(fabs(p->predicted_step_ms - step) <= 1e-9 * step, "%s: step %.6f, stages give %.6f", what,
        p->predicted_step_ms, step);
}
static void check_plan(const plan *p, const plan_model *m, const char *what) {
  plan_options o;
  plan_options_default(&o);
  check_plan_o(p, m, &o, what);
}

static void test_worked_examples(void) {
  test_wan big, small;
  test_wan_make(&big, 1);
  test_wan_make(&small, 0);
  plan_workload w = {81, 480, 832, 2, 512, 0, 0};
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

  /* per-device fractions: the budget is that share of each GPU's memory */
  test_device(&d[1], "gpu48", 48, 1);
  rc = make(&big.m, d, 2, "cuda:0,0.75;cuda:1,0.5;cpu,*", &w, &g_plan, err, sizeof err);
  CHECK(rc == PLAN_OK && g_plan.r[0].budget_bytes == (uint64_t)(0.75 * 24 * TEST_GIB) &&
            g_plan.r[1].budget_bytes == (uint64_t)(24 * TEST_GIB),
        "fractions per GPU: %s %llu %llu", err, (unsigned long long)g_plan.r[0].budget_bytes,
        (unsigned long long)g_plan.r[1].budget_bytes);
  /* cpu,FRACTION caps the streamed bytes at that share of host memory */
  d[0].host_bytes = d[1].host_bytes = (uint64_t)(8 * TEST_GIB);
  rc = make(&big.m, d, 2, "cuda:0,0.5;cuda:1,0.25;cpu,0.5", &w, &g_plan, err, sizeof err);
  CHECK(rc == PLAN_EINFEASIBLE && strstr(err, "cpu,4.00gb"), "cpu fraction cap: %s", err);
  test_device(&d[1], "gpu24-b", 24, 1);

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

/* Brute force over every split (no streaming, random unequal blocks), per
 * order: micro-batch-major must reach the smallest slowest stage, block-major
 * the smallest sum of stages (its step), each with its own memory; auto must
 * keep the faster of the two plans, micro-batch-major on a tie. */
static void test_optimal(void) {
  static plan pm, pb;
  for (int it = 0; it < 150; it++) {
    test_wan t;
    test_wan_make(&t, (int)(sp_rand_u64() % 2));
    int B = (int)sp_rand_int(1, 9), R = (int)sp_rand_int(1, B < 4 ? B : 4);
    t.m.num_blocks = B;
    for (int i = 0; i < B; i++) t.blocks[i] = (uint64_t)sp_rand_int(50, 1500) << 20;
    plan_workload w = {1 + 4 * sp_rand_int(0, 10), 16 * sp_rand_int(16, 40), 16 * sp_rand_int(16, 40),
                       (int)sp_rand_int(1, 3), 512, 0, 0};
    plan_device d[4];
    for (int r = 0; r < R; r++) {
      char name[16];
      snprintf(name, sizeof name, "g%d", r);
      test_device(&d[r], name, 3.0 + 10.0 * sp_rand_unit(), 0.5 + sp_rand_unit());
    }
    plan_options o;
    plan_options_default(&o);
    char err[4096];
    /* enumerate splits: cut points c_1 < ... < c_{R-1} */
    double best_micro = INFINITY, best_block = INFINITY;
    int cuts[5];
    int64_t L = plan_tokens(&w), R64 = L < 64 ? L : 64;
    for (uint32_t mask = 0; mask < (1u << (B - 1)); mask++) {
      if (__builtin_popcount(mask) != R - 1) continue;
      int k = 0;
      cuts[k++] = 0;
      for (int i = 1; i < B; i++)
        if (mask & (1u << (i - 1))) cuts[k++] = i;
      cuts[k] = B;
      double worst = 0, total = 0;
      int ok_micro = 1, ok_block = 1;
      for (int r = 0; r < R; r++) {
        int a = cuts[r], e = cuts[r + 1] - 1;
        uint64_t bytes = (r == 0 ? plan_layout_align(t.m.embed_bytes) : 0) +
                         (r == R - 1 ? plan_layout_align(t.m.head_bytes) : 0);
        for (int i = a; i <= e; i++) bytes += plan_layout_align(t.blocks[i]);
        /* the smallest activations this range can have: the most chunked */
        uint64_t act_m = plan_act_bytes(&t.m, &w, &(plan_stage_desc){.order = PLAN_ORDER_MICRO,
            .first_block = a, .last_block = e, .has_prev = r > 0, .has_next = r < R - 1,
            .has_embed = r == 0, .has_head = r == R - 1, .chunk_rows = R64, .simple_attn = 0});
        uint64_t act_b = plan_act_bytes(&t.m, &w, &(plan_stage_desc){.order = PLAN_ORDER_BLOCK,
            .first_block = a, .last_block = e, .has_prev = r > 0, .has_next = r < R - 1,
            .has_embed = r == 0, .has_head = r == R - 1, .chunk_rows = R64, .simple_attn = 0});
        double margin = fmax(0.05 * (double)d[r].total_bytes, 256.0 * 1024 * 1024);
        double budget = (double)d[r].total_bytes - margin;
        if ((double)(bytes + act_m + o.reserve_bytes) > budget) ok_micro = 0;
        if ((double)(bytes + act_b + o.reserve_bytes) > budget) ok_block = 0;
        uint8_t none[16] = {0};
        worst = fmax(worst, plan_stage_ms(&t.m, &w, &o, &(plan_stage_desc){
            .order = PLAN_ORDER_MICRO, .speed = d[r].speed, .first_block = a, .last_block = e,
            .streamed = none, .depth = 2, .has_prev = r > 0, .has_embed = r == 0,
            .has_head = r == R - 1}));
        total += plan_stage_ms(&t.m, &w, &o, &(plan_stage_desc){.order = PLAN_ORDER_BLOCK,
            .speed = d[r].speed, .first_block = a, .last_block = e, .streamed = none, .depth = 2,
            .has_prev = r > 0, .has_embed = r == 0, .has_head = r == R - 1});
      }
      if (ok_micro) best_micro = fmin(best_micro, worst);
      if (ok_block) best_block = fmin(best_block, total);
    }
    o.order = PLAN_ORDER_MICRO;
    int rcm = make_o(&t.m, d, R, NULL, &w, &o, &pm, err, sizeof err);
    if (!isfinite(best_micro)) {
      CHECK(rcm == PLAN_EINFEASIBLE, "micro: brute force finds no split, planner rc %d", rcm);
    } else {
      CHECK(rcm == PLAN_OK, "micro: brute force finds %.3f ms, planner fails: %s", best_micro, err);
      if (rcm == PLAN_OK) {
        check_plan_o(&pm, &t.m, &o, "optimal micro");
        CHECK(fabs(max_stage(&pm) - best_micro) <= 1e-9 * best_micro,
              "micro: planner %.6f ms, optimum %.6f ms", max_stage(&pm), best_micro);
      }
    }
    o.order = PLAN_ORDER_BLOCK;
    int rcb = make_o(&t.m, d, R, NULL, &w, &o, &pb, err, sizeof err);
    if (!isfinite(best_block)) {
      CHECK(rcb == PLAN_EINFEASIBLE, "block: brute force finds no split, planner rc %d", rcb);
    } else {
      CHECK(rcb == PLAN_OK, "block: brute force finds %.3f ms, planner fails: %s", best_block, err);
      if (rcb == PLAN_OK) {
        check_plan_o(&pb, &t.m, &o, "optimal block");
        CHECK(fabs(pb.predicted_step_ms - best_block) <= 1e-8 * best_block,
              "block: planner %.6f ms, optimum %.6f ms", pb.predicted_step_ms, best_block);
      }
    }
    o.order = PLAN_ORDER_AUTO;
    int rca = make_o(&t.m, d, R, NULL, &w, &o, &g_plan, err, sizeof err);
    CHECK((rca == PLAN_OK) == (rcm == PLAN_OK || rcb == PLAN_OK), "auto rc %d, micro %d, block %d",
          rca, rcm, rcb);
    if (rca == PLAN_OK) {
      check_plan_o(&g_plan, &t.m, &o, "optimal auto");
      int want = rcm != PLAN_OK ? PLAN_ORDER_BLOCK
                 : rcb != PLAN_OK ? PLAN_ORDER_MICRO
                 : pb.predicted_step_ms < pm.predicted_step_ms * (1 - 1e-9) ? PLAN_ORDER_BLOCK
                                                                            : PLAN_ORDER_MICRO;
      const plan *same = want == PLAN_ORDER_BLOCK ? &pb : &pm;
      CHECK(g_plan.r[0].order == want && g_plan.predicted_step_ms == same->predicted_step_ms,
            "auto chose %d (%.6f ms), want %d (%.6f ms)", g_plan.r[0].order,
            g_plan.predicted_step_ms, want, same->predicted_step_ms);
    }
  }
}

static const char *random_budget(int R, const plan_device *d, char *s, size_t n) {
  switch (sp_rand_u64() % 5) {
  case 0: return NULL;
  case 1: return "cpu,*";
  case 2: snprintf(s, n, "%.2f", 0.5 + 0.5 * sp_rand_unit()); return s;
  default: {
    size_t len = 0;
    for (int r = 0; r < R; r++)
      if (sp_rand_u64() % 2)
        len += (size_t)snprintf(s + len, n - len, "cuda:%d,%.1fgb;", r,
                                (double)d[r].total_bytes / TEST_GIB * (0.4 + 0.55 * sp_rand_unit()));
    snprintf(s + len, n - len, "%s", sp_rand_u64() % 2 || !len ? "cpu,*" : "");
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
    test_wan_make(&t, (int)(sp_rand_u64() % 2));
    int B = (int)sp_rand_int(2, 48), R = (int)sp_rand_int(1, B < 6 ? B : 6);
    int equal = (int)(sp_rand_u64() % 2);
    uint64_t blk = (uint64_t)sp_rand_int(30, 800) << 20;
    t.m.num_blocks = B;
    for (int i = 0; i < B; i++) t.blocks[i] = equal ? blk : (uint64_t)sp_rand_int(30, 800) << 20;
    plan_workload w = {1 + 4 * sp_rand_int(0, 20), 16 * sp_rand_int(16, 52), 16 * sp_rand_int(16, 52),
                       (int)sp_rand_int(1, 4), 512, 0, 0};
    plan_device d[6];
    for (int r = 0; r < R; r++) {
      char name[16];
      snprintf(name, sizeof name, "g%d", r);
      test_device(&d[r], name, 2.0 + 46.0 * sp_rand_unit(), 0.5 + 1.5 * sp_rand_unit());
    }
    char bs[512];
    const char *budget = random_budget(R, d, bs, sizeof bs);
    /* the order and, now and then, a forced stream fraction or row cap */
    plan_options o;
    plan_options_default(&o);
    o.order = (int)(sp_rand_u64() % 3);
    if (sp_rand_u64() % 4 == 0) o.stream_frac = sp_rand_unit();
    if (sp_rand_u64() % 4 == 0) o.max_rows = sp_rand_int(1, 20000);
    char what[700];
    snprintf(what, sizeof what, "it %d (B %d, R %d, budget %s, order %d, frac %g, rows %lld)", it,
             B, R, budget ? budget : "auto", o.order, o.stream_frac, (long long)o.max_rows);
    char err[4096];
    int rc = make_o(&t.m, d, R, budget, &w, &o, &g_plan, err, sizeof err);
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
          int rc2 = make_o(&t.m, d, R, sb, &w, &o, &g_plan2, err, sizeof err);
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
    check_plan_o(&g_plan, &t.m, &o, what);
    if ((!budget || !strstr(budget, "cpu")) && o.stream_frac < 0)
      CHECK(total_streamed(&g_plan) == 0, "%s: streams without cpu", what);

    /* monotone in memory: every card 1.5x bigger, same budget kind -> still
     * feasible and never slower. (The total streamed count is not monotone
     * across different splits: with more memory a balanced split that hides
     * its copies can beat an unbalanced one that streams nothing; the split
     * minimizes time. For a fixed range it is: test_single_rank_monotone.)
     * What is minimized depends on the order: micro-batch-major the slowest
     * stage, block-major the step; auto compares plans of both, so it is
     * checked only for feasibility. */
    if (!budget || strcmp(budget, "cpu,*") == 0) {
      plan_device d2[6];
      memcpy(d2, d, sizeof d);
      for (int r = 0; r < R; r++) d2[r].total_bytes = d2[r].free_bytes = d[r].total_bytes / 2 * 3;
      int rc2 = make_o(&t.m, d2, R, budget, &w, &o, &g_plan2, err, sizeof err);
      CHECK(rc2 == PLAN_OK, "%s: more memory infeasible: %s", what, err);
      if (rc2 == PLAN_OK && o.order == PLAN_ORDER_MICRO)
        CHECK(max_stage(&g_plan2) <= max_stage(&g_plan) * (1 + 1e-9), "%s: more memory is slower",
              what);
      if (rc2 == PLAN_OK && o.order == PLAN_ORDER_BLOCK)
        CHECK(g_plan2.predicted_step_ms <= g_plan.predicted_step_ms * (1 + 1e-9),
              "%s: more memory is slower", what);
    }
  }
  printf("  properties: %d planned (%d streaming, %d chunked), %d infeasible\n", planned, streamed,
         chunked, infeasible);
  CHECK(planned > 50 && infeasible > 10 && streamed > 10, "random cases do not cover the kinds");
}

/* Asymmetric budgets favour the bigger card: two equal-speed ranks, one
 * with more memory; the bigger one holds at least as many resident blocks
 * and, when memory binds without streaming, at least as many blocks. A
 * property of the balanced (micro-batch-major) split: block-major minimizes
 * the sum of stages, which may put more blocks, streamed ones too, on the
 * big card. */
static void test_asymmetric(void) {
  plan_options o;
  plan_options_default(&o);
  o.order = PLAN_ORDER_MICRO;
  for (int it = 0; it < 100; it++) {
    test_wan t;
    test_wan_make(&t, 1);
    plan_workload w = {81, 480, 832, (int)sp_rand_int(1, 2), 512, 0, 0};
    double small = 9 + 6 * sp_rand_unit(), bigm = small + 2 + 20 * sp_rand_unit();
    int big_first = (int)(sp_rand_u64() % 2);
    plan_device d[2];
    test_device(&d[0], big_first ? "big" : "small", big_first ? bigm : small, 1);
    test_device(&d[1], big_first ? "small" : "big", big_first ? small : bigm, 1);
    int ib = big_first ? 0 : 1, is = 1 - ib;
    const char *budget = sp_rand_u64() % 2 ? "cpu,*" : NULL;
    char err[4096];
    int rc = make_o(&t.m, d, 2, budget, &w, &o, &g_plan, err, sizeof err);
    if (rc != PLAN_OK) continue;
    check_plan_o(&g_plan, &t.m, &o, "asymmetric");
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
    test_wan_make(&t, (int)(sp_rand_u64() % 2));
    int B = (int)sp_rand_int(1, 40);
    t.m.num_blocks = B;
    int equal = (int)(sp_rand_u64() % 2);
    for (int i = 0; i < B; i++) t.blocks[i] = equal ? t.blocks[0] : (uint64_t)sp_rand_int(30, 800) << 20;
    plan_workload w = {1 + 4 * sp_rand_int(0, 20), 16 * sp_rand_int(16, 52), 16 * sp_rand_int(16, 52),
                       (int)sp_rand_int(1, 4), 512, 0, 0};
    double gib = 1.5 + 10 * sp_rand_unit();
    /* a fixed order keeps the range's preferences (fewest streamed, then
     * coarsest chunks); auto may switch orders, and only its time, the
     * faster of two monotone times, is monotone */
    plan_options o;
    plan_options_default(&o);
    o.order = (int)(sp_rand_u64() % 3);
    int prev_streamed = -1;
    double prev_ms = INFINITY;
    int64_t prev_rows = 0;
    for (int step = 0; step < 12; step++, gib *= 1.25) {
      plan_device d;
      test_device(&d, "g", gib, 1);
      char err[4096];
      int rc = make_o(&t.m, &d, 1, "cpu,*", &w, &o, &g_plan, err, sizeof err);
      if (rc != PLAN_OK) {
        CHECK(prev_streamed < 0, "%.2f GiB infeasible after a smaller card fit: %s", gib, err);
        continue;
      }
      check_plan_o(&g_plan, &t.m, &o, "single rank");
      int s = total_streamed(&g_plan);
      if (prev_streamed >= 0) {
        CHECK(g_plan.r[0].predicted_step_ms <= prev_ms * (1 + 1e-9), "%.2f GiB is slower", gib);
        if (o.order != PLAN_ORDER_AUTO)
          CHECK(s <= prev_streamed, "%.2f GiB streams %d, less memory streamed %d", gib, s,
                prev_streamed);
        if (o.order != PLAN_ORDER_AUTO && s == prev_streamed)
          CHECK(g_plan.r[0].chunk_rows >= prev_rows, "%.2f GiB chunks finer for as many streamed",
                gib);
      }
      prev_streamed = s;
      prev_ms = g_plan.r[0].predicted_step_ms;
      prev_rows = g_plan.r[0].chunk_rows;
    }
  }
}

/* The automatic order. One rank streaming over a slow host link, 2
 * micro-batches: block-major copies each streamed block once per step
 * instead of twice and is faster, and auto takes it. Four ranks, everything
 * resident: the pipeline overlaps the stages, micro-batch-major is faster. */
static void test_order_choice(void) {
  static plan pm, pb;
  test_wan big;
  test_wan_make(&big, 1);
  plan_workload w = {81, 480, 832, 2, 512, 0, 0};
  plan_options o;
  plan_options_default(&o);
  o.host_link_gbs = 5; /* a 702 MB copy takes 140 ms, a block 70 ms: copies do not hide */
  plan_device d[4];
  char err[4096];
  test_device(&d[0], "gpu24", 24, 1);
  o.order = PLAN_ORDER_MICRO;
  int rcm = make_o(&big.m, d, 1, "cpu,*", &w, &o, &pm, err, sizeof err);
  o.order = PLAN_ORDER_BLOCK;
  int rcb = make_o(&big.m, d, 1, "cpu,*", &w, &o, &pb, err, sizeof err);
  o.order = PLAN_ORDER_AUTO;
  int rca = make_o(&big.m, d, 1, "cpu,*", &w, &o, &g_plan, err, sizeof err);
  CHECK(rcm == PLAN_OK && rcb == PLAN_OK && rca == PLAN_OK, "1 rank: %s", err);
  if (rcm == PLAN_OK && rcb == PLAN_OK && rca == PLAN_OK) {
    check_plan_o(&g_plan, &big.m, &o, "order 1 rank");
    CHECK(pm.r[0].num_streamed > 0 && pb.r[0].num_streamed > 0, "1 rank streams nothing");
    CHECK(pb.predicted_step_ms < pm.predicted_step_ms, "block %.1f ms not faster than micro %.1f",
          pb.predicted_step_ms, pm.predicted_step_ms);
    CHECK(g_plan.r[0].order == PLAN_ORDER_BLOCK && g_plan.predicted_step_ms == pb.predicted_step_ms,
          "auto chose order %d", g_plan.r[0].order);
    /* block-major holds both micro-batches: one more [L, D] buffer */
    CHECK(pb.r[0].act_bytes > pm.r[0].act_bytes, "block-major holds no more activations");
  }

  plan_options_default(&o);
  for (int r = 0; r < 4; r++) test_device(&d[r], "gpu24", 24, 1);
  o.order = PLAN_ORDER_BLOCK;
  rcb = make_o(&big.m, d, 4, NULL, &w, &o, &pb, err, sizeof err);
  o.order = PLAN_ORDER_AUTO;
  rca = make_o(&big.m, d, 4, NULL, &w, &o, &g_plan, err, sizeof err);
  CHECK(rcb == PLAN_OK && rca == PLAN_OK, "4 ranks: %s", err);
  if (rcb == PLAN_OK && rca == PLAN_OK) {
    check_plan_o(&g_plan, &big.m, &o, "order 4 ranks");
    CHECK(total_streamed(&g_plan) == 0, "4 ranks stream");
    CHECK(g_plan.r[0].order == PLAN_ORDER_MICRO, "4 ranks: auto chose order %d", g_plan.r[0].order);
    CHECK(g_plan.predicted_step_ms < pb.predicted_step_ms, "micro %.1f ms not faster than block %.1f",
          g_plan.predicted_step_ms, pb.predicted_step_ms);
  }
}

/* A forced stream fraction: at least ceil(frac n) blocks of every rank, with
 * or without a cpu entry, still within the budget. */
static void test_stream_frac(void) {
  test_wan big;
  test_wan_make(&big, 1);
  plan_workload w = {81, 480, 832, 2, 512, 0, 0};
  plan_options o;
  plan_options_default(&o);
  plan_device d[2];
  char err[4096];
  test_device(&d[0], "gpu80", 80, 1);
  test_device(&d[1], "gpu80", 80, 1);
  /* everything fits on one 80 GB card: 0.5 streams exactly 20 of 40 */
  o.stream_frac = 0.5;
  int rc = make_o(&big.m, d, 1, NULL, &w, &o, &g_plan, err, sizeof err);
  CHECK(rc == PLAN_OK && g_plan.r[0].num_streamed == 20, "0.5 of 40: rc %d, %d streamed: %s", rc,
        g_plan.r[0].num_streamed, err);
  if (rc == PLAN_OK) check_plan_o(&g_plan, &big.m, &o, "frac 0.5");
  /* 0.3 on two ranks: ceil(0.3 x each range) */
  o.stream_frac = 0.3;
  rc = make_o(&big.m, d, 2, "cpu,*", &w, &o, &g_plan, err, sizeof err);
  CHECK(rc == PLAN_OK, "0.3 on 2 ranks: %s", err);
  if (rc == PLAN_OK) check_plan_o(&g_plan, &big.m, &o, "frac 0.3");
  /* 1: every block */
  o.stream_frac = 1;
  rc = make_o(&big.m, d, 1, NULL, &w, &o, &g_plan, err, sizeof err);
  CHECK(rc == PLAN_OK && g_plan.r[0].num_streamed == 40, "frac 1: %d streamed",
        g_plan.r[0].num_streamed);
  /* 0 is what the budget decides */
  o.stream_frac = 0;
  rc = make_o(&big.m, d, 1, NULL, &w, &o, &g_plan, err, sizeof err);
  CHECK(rc == PLAN_OK && g_plan.r[0].num_streamed == 0, "frac 0 streams");
  /* on a tight budget a forced plan streams at least that many and more
   * when the budget needs it, or fails with the usual report */
  test_device(&d[0], "gpu16", 16, 1);
  o.stream_frac = 0.5;
  rc = make_o(&big.m, d, 1, "cpu,*", &w, &o, &g_plan, err, sizeof err);
  CHECK(rc == PLAN_OK && g_plan.r[0].num_streamed > 20, "tight 0.5: rc %d, %d: %s", rc,
        g_plan.r[0].num_streamed, err);
  o.stream_frac = 0.1; /* 4 streamed, 36 resident: 24 GiB of weights in 16 GB */
  rc = make_o(&big.m, d, 1, NULL, &w, &o, &g_plan, err, sizeof err);
  CHECK(rc == PLAN_EINFEASIBLE && strstr(err, "no plan fits") && strstr(err, "stream fraction 0.1") &&
            strstr(err, "need"),
        "infeasible forced plan: rc %d: %s", rc, err);
  /* out of range */
  o.stream_frac = 1.5;
  rc = make_o(&big.m, d, 1, NULL, &w, &o, &g_plan, err, sizeof err);
  CHECK(rc == PLAN_EINVAL && strstr(err, "stream fraction"), "frac 1.5: %s", err);
}

/* A row cap forces chunking: the coarsest level at or under it. Levels of
 * 32,760 tokens: 32760, 16384, 8192, 4096, ... (halves rounded up to 64). */
static void test_max_rows(void) {
  test_wan small;
  test_wan_make(&small, 0);
  plan_workload w = {81, 480, 832, 2, 512, 0, 0};
  plan_options o;
  plan_options_default(&o);
  plan_device d;
  test_device(&d, "gpu80", 80, 1);
  char err[4096];
  struct {
    int64_t cap, rows;
  } cases[] = {{0, 32760}, {40000, 32760}, {32760, 32760}, {32759, 16384},
               {5000, 4096}, {4096, 4096}, {64, 64}, {10, 10}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    o.max_rows = cases[i].cap;
    int rc = make_o(&small.m, &d, 1, NULL, &w, &o, &g_plan, err, sizeof err);
    CHECK(rc == PLAN_OK, "cap %lld: %s", (long long)cases[i].cap, err);
    if (rc != PLAN_OK) continue;
    check_plan_o(&g_plan, &small.m, &o, "max rows");
    const plan_rank *q = &g_plan.r[0];
    CHECK(q->chunk_rows == cases[i].rows,
          "cap %lld: %lld rows, want %lld", (long long)cases[i].cap, (long long)q->chunk_rows,
          (long long)cases[i].rows);
    CHECK(g_plan.chunked == (cases[i].rows < 32760), "cap %lld: chunked %d",
          (long long)cases[i].cap, g_plan.chunked);
  }
  o.max_rows = -1;
  CHECK(make_o(&small.m, &d, 1, NULL, &w, &o, &g_plan, err, sizeof err) == PLAN_EINVAL,
        "negative cap accepted");
}

/* The VAE decoder's bytes sit on the last rank only: its peak counts them,
 * and a budget that held the whole model on one rank without them must move
 * blocks off that rank (or stream) once they are counted. */
static void test_decoder_bytes(void) {
  test_wan big;
  test_wan_make(&big, 1);
  plan_workload w = {81, 480, 832, 2, 512, 0, 0};
  plan_options o;
  plan_options_default(&o);
  plan_device d[2];
  test_device(&d[0], "gpu0", 80, 1);
  test_device(&d[1], "gpu1", 80, 1);
  char err[4096];
  CHECK(make_o(&big.m, d, 2, "cuda:0,40g;cuda:1,40g", &w, &o, &g_plan, err, sizeof err) ==
            PLAN_OK, "no decoder: %s", err);
  const int last_blocks = nblocks(&g_plan, 1);
  const uint64_t last_peak = g_plan.r[1].peak_bytes;
  o.decoder_bytes = (uint64_t)6 << 30;
  CHECK(make_o(&big.m, d, 2, "cuda:0,40g;cuda:1,40g", &w, &o, &g_plan, err, sizeof err) ==
            PLAN_OK, "decoder: %s", err);
  check_plan_o(&g_plan, &big.m, &o, "decoder");
  CHECK(g_plan.r[1].decoder_bytes == o.decoder_bytes && g_plan.r[0].decoder_bytes == 0,
        "decoder bytes on ranks %llu, %llu", (unsigned long long)g_plan.r[0].decoder_bytes,
        (unsigned long long)g_plan.r[1].decoder_bytes);
  CHECK(nblocks(&g_plan, 1) < last_blocks || g_plan.r[1].peak_bytes > last_peak,
        "the decoder changed nothing on the last rank (%d blocks)", nblocks(&g_plan, 1));
  /* One rank whose budget fits the model but not the model and the decoder. */
  plan_options_default(&o);
  CHECK(make_o(&big.m, d, 1, "cuda:0,30g", &w, &o, &g_plan, err, sizeof err) == PLAN_OK,
        "one rank: %s", err);
  CHECK(total_streamed(&g_plan) == 0, "one rank streams without a decoder");
  o.decoder_bytes = (uint64_t)6 << 30;
  int rc = make_o(&big.m, d, 1, "cuda:0,30g", &w, &o, &g_plan, err, sizeof err);
  CHECK(rc != PLAN_OK, "30 GB held the model, its activations and a 6 GB decoder");
}

int main(void) {
  sp_test_begin("test_split");
  test_decoder_bytes();
  test_order_choice();
  test_stream_frac();
  test_max_rows();
  test_single_rank_monotone();
  test_worked_examples();
  test_optimal();
  test_properties();
  test_asymmetric();
  return sp_test_end();
}
