/* The layout choice (grid_choice.h) against formulas written out here:
 * a rank's tokens under Ulysses, the all-to-all, the pipeline of a
 * Ulysses rank and the exchange from their definitions, the 1 x N x 1 layout equal to
 * plan_make's plan, the links by node, memory refusals and the choice being
 * the fastest of the layouts that fit. */
#include <math.h>

#include "grid_choice.h"
#include "layout.h"
#include "plan_test.h"

static plan_workload wl(int64_t f, int64_t h, int64_t w, int micro) {
  plan_workload x = {.frames = f, .height = h, .width = w, .micro_batches = micro,
                     .context_len = 512};
  return x;
}

static void devices(plan_device *d, int n, double gib) {
  for (int i = 0; i < n; i++) test_device(&d[i], "gpu", gib, 1.0);
}

static const plan_grid_eval *find(const plan_grid_choice *c, int R, int S, int U) {
  for (int i = 0; i < c->count; i++)
    if (c->e[i].g.replicas == R && c->e[i].g.stages == S && c->e[i].g.seq == U) return &c->e[i];
  return NULL;
}

static int close_to(double x, double ref) { return fabs(x - ref) <= 1e-9 * fmax(1.0, fabs(ref)); }

int main(void) {
  sp_test_begin("planner grid choice");
  static test_wan big;
  test_wan_make(&big, 1);
  const plan_model *m = &big.m;
  plan_options o;
  plan_options_default(&o);
  plan_links links;
  plan_links_default(&links, &o);
  links.nvlink = 1;
  links.nvlink_gbs = 450.0;
  static plan_device d[8];
  static plan_grid_choice c;
  char err[8192];

  /* 480x832x81, CFG: 32,760 tokens, latent grid 21 x 30 x 52 patches. */
  plan_workload w = wl(81, 480, 832, 2);
  const int64_t L = 21 * 30 * 52;
  CHECK(plan_tokens(&w) == L, "tokens %lld", (long long)plan_tokens(&w));
  devices(d, 8, 141.0);
  int rc = plan_grid_choose(&(plan_grid_inputs){m, d, 8, NULL, &w, &o, &links}, NULL, &c, err,
                            sizeof err);
  CHECK(rc == PLAN_OK, "8 x 141 GiB: %s", err);
  /* 8 = R S U with R <= 2 (M = 2) and U | 40: every factorization is
   * listed, the others refused with the check that failed. */
  int n = 0;
  for (int R = 1; R <= 8; R++)
    for (int U = 1; U <= 8; U++)
      if (8 % (R * U) == 0) n++;
  CHECK(c.count == n, "%d layouts listed, %d factorizations", c.count, n);
  const plan_grid_eval *r4 = find(&c, 4, 2, 1);
  CHECK(r4 && !r4->ok && strstr(r4->why, "micro-batch"), "4x2x1 not refused for M = 2: %s",
        r4 ? r4->why : "missing");
  /* U = 8: L / 8 tokens per rank (32,760 = 8 x 4,095). */
  const plan_grid_eval *u8 = find(&c, 1, 1, 8);
  CHECK(u8 && u8->ok && u8->tokens_per_rank == L / 8, "1x1x8: %lld tokens per rank",
        u8 ? (long long)u8->tokens_per_rank : -1);
  /* Its all-to-alls from the definition: 2 micro-batches x 40 blocks x 4,
   * each (U-1)/U of t x D x 2 bytes at 450 GB/s. */
  double t = (double)(L / 8), D = 5120.0, F = 13824.0;
  double a2a = 2 * 40 * 4 * (t * D * 2 * 7.0 / 8.0) / 450e9 * 1e3;
  CHECK(close_to(u8->a2a_ms, a2a), "1x1x8 all-to-all %.6f ms, formula %.6f", u8->a2a_ms, a2a);
  /* The whole pipeline from the definition: one stage of 40 blocks on 2
   * micro-batches, each block 12 t D^2 + 4 t D F + 4 t C D for the rank's
   * rows and 4 L^2 D / 8 of self-attention (L queries x L keys for D/8 of
   * the width) at 600 TFLOP/s, then its all-to-alls; the embedding (patch
   * GEMM and time MLPs) and the head of t rows. */
  double blk = (12 * t * D * D + 4 * t * D * F + 4 * t * 512 * D + 4.0 * L * L * D / 8) / 600e12;
  double emb = (2 * t * 64 * D + 2 * (256 * D + D * D + 6 * D * D)) / 600e12;
  double head = 2 * t * D * 64 / 600e12;
  double pipe = 2 * (emb + 40 * blk + head) * 1e3 + a2a;
  CHECK(fabs(u8->pipeline_ms - pipe) < 1e-9 * pipe, "1x1x8 pipeline %.6f ms, formula %.6f",
        u8->pipeline_ms, pipe);
  /* The whole step of 1x1x8 = 1/8 of the compute of 1x1x1 (attention,
   * projections, FFN, cross-attention all divide by U) + the all-to-alls,
   * up to the embedding and head (tiny): within 0.5%. */
  const plan_grid_eval *one = NULL;
  static plan_grid_choice c1;
  devices(d, 1, 141.0);
  CHECK(plan_grid_choose(&(plan_grid_inputs){m, d, 1, NULL, &w, &o, &links}, NULL, &c1, err,
                         sizeof err) == PLAN_OK,
        "1 rank: %s", err);
  one = &c1.e[c1.chosen];
  double want = one->step_ms / 8 + a2a;
  CHECK(fabs(u8->step_ms - want) < 0.005 * want, "1x1x8 step %.1f ms, 1x1x1 / 8 + a2a %.1f",
        u8->step_ms, want);

  /* 1 x 1 x 1 is plan_make's plan of one rank: same step and peak. */
  plan_budget b;
  CHECK(plan_budget_parse(NULL, 1, &b, err, sizeof err) == PLAN_OK, "budget: %s", err);
  static plan p;
  CHECK(plan_make(&(plan_inputs){m, d, 1, &b, &w, &o}, &p, err, sizeof err) == PLAN_OK,
        "plan_make: %s", err);
  CHECK(close_to(one->step_ms, p.predicted_step_ms) && one->peak_bytes == p.r[0].peak_bytes,
        "1x1x1 %.3f ms %llu B, plan_make %.3f ms %llu B", one->step_ms,
        (unsigned long long)one->peak_bytes, p.predicted_step_ms,
        (unsigned long long)p.r[0].peak_bytes);

  /* 2 x 1 x 1: each replica runs one micro-batch (the step of a 1-micro-batch
   * plan), then receives the other's prediction: 16 x 21 x 60 x 104 fp32
   * at the link's rate. */
  devices(d, 2, 141.0);
  CHECK(plan_grid_choose(&(plan_grid_inputs){m, d, 2, NULL, &w, &o, &links}, NULL, &c, err,
                         sizeof err) == PLAN_OK,
        "2 ranks: %s", err);
  const plan_grid_eval *r2 = find(&c, 2, 1, 1);
  double latent = 16.0 * 21 * 60 * 104 * 4;
  CHECK(r2 && r2->ok && close_to(r2->exchange_ms, latent / 450e9 * 1e3),
        "2x1x1 exchange %.6f ms, formula %.6f", r2 ? r2->exchange_ms : -1.0,
        latent / 450e9 * 1e3);
  plan_workload w1 = w;
  w1.micro_batches = 1;
  CHECK(plan_make(&(plan_inputs){m, d, 1, &b, &w1, &o}, &p, err, sizeof err) == PLAN_OK,
        "plan_make: %s", err);
  CHECK(close_to(r2->pipeline_ms, p.predicted_step_ms), "2x1x1 pipeline %.3f, one micro %.3f",
        r2->pipeline_ms, p.predicted_step_ms);
  /* The choice is the fastest layout that fits. */
  for (int i = 0; i < c.count; i++)
    CHECK(!c.e[i].ok || c.e[i].step_ms >= c.e[c.chosen].step_ms, "layout %d faster than chosen",
          i);

  /* Links by node: 2 ranks on two nodes, 1 x 1 x 2's all-to-all at the
   * inter-node rate. */
  links.node[1] = 1;
  links.inter_node_gbs = 25.0;
  CHECK(plan_grid_choose(&(plan_grid_inputs){m, d, 2, NULL, &w, &o, &links}, NULL, &c, err,
                         sizeof err) == PLAN_OK,
        "2 nodes: %s", err);
  const plan_grid_eval *u2 = find(&c, 1, 1, 2);
  double a2a2 = 2 * 40 * 4 * ((double)(L / 2) * D * 2 * 0.5) / 25e9 * 1e3;
  CHECK(u2 && close_to(u2->a2a_ms, a2a2), "1x1x2 across nodes %.6f ms, formula %.6f",
        u2 ? u2->a2a_ms : -1.0, a2a2);
  links.node[1] = 0;
  links.inter_node_gbs = 0.0;
  links.node[1] = 1;
  CHECK(plan_grid_choose(&(plan_grid_inputs){m, d, 2, NULL, &w, &o, &links}, NULL, &c, err,
                         sizeof err) == PLAN_EINVAL &&
            strstr(err, "rank 1"),
        "unknown inter-node rate accepted: %s", err);
  links.node[1] = 0;

  /* Memory first: 2 x 20 GiB without streaming holds half of 14B's 28 GB
   * per stage, not all of it: 1x2x1 fits, 1x1x2 and 2x1x1 are refused with
   * plan_make's reason; with --layout 1x1x2 the refusal is the error. */
  devices(d, 2, 20.0);
  CHECK(plan_grid_choose(&(plan_grid_inputs){m, d, 2, NULL, &w, &o, &links}, NULL, &c, err,
                         sizeof err) == PLAN_OK,
        "2 x 20 GiB: %s", err);
  CHECK(c.e[c.chosen].g.stages == 2, "chosen %dx%dx%d", c.e[c.chosen].g.replicas,
        c.e[c.chosen].g.stages, c.e[c.chosen].g.seq);
  CHECK(!find(&c, 1, 1, 2)->ok && !find(&c, 2, 1, 1)->ok && find(&c, 1, 1, 2)->why[0],
        "a 28 GB model fits one 20 GiB stage");
  plan_grid only = {1, 1, 2};
  CHECK(plan_grid_choose(&(plan_grid_inputs){m, d, 2, NULL, &w, &o, &links}, &only, &c, err,
                         sizeof err) == PLAN_EINFEASIBLE &&
            strstr(err, "1x1x2") && c.count == 1,
        "--layout 1x1x2 on 2 x 20 GiB: %s", err);
  /* With streaming every layout fits, and U = 2's peak is below 1 x 2 x 1's
   * all-resident one. */
  CHECK(plan_grid_choose(&(plan_grid_inputs){m, d, 2, "cpu,*", &w, &o, &links}, NULL, &c, err,
                         sizeof err) == PLAN_OK,
        "cpu,*: %s", err);
  for (int i = 0; i < c.count; i++) CHECK(c.e[i].ok, "%d refused with cpu,*: %s", i, c.e[i].why);

  /* A stage runs at its slowest device: 1 x 1 x 2 with one rank at half
   * speed takes twice the compute of two full-speed ranks (every compute
   * term scales with 1 / speed; the all-to-all does not). */
  devices(d, 2, 141.0);
  CHECK(plan_grid_choose(&(plan_grid_inputs){m, d, 2, NULL, &w, &o, &links}, &only, &c, err,
                         sizeof err) == PLAN_OK,
        "uniform: %s", err);
  plan_grid_eval uni = c.e[0];
  d[1].speed = 0.5;
  CHECK(plan_grid_choose(&(plan_grid_inputs){m, d, 2, NULL, &w, &o, &links}, &only, &c, err,
                         sizeof err) == PLAN_OK,
        "half speed: %s", err);
  CHECK(close_to(c.e[0].a2a_ms, uni.a2a_ms) &&
            fabs((c.e[0].step_ms - c.e[0].a2a_ms) - 2 * (uni.step_ms - uni.a2a_ms)) <
                1e-9 * uni.step_ms,
        "half speed: compute %.3f ms, uniform %.3f ms", c.e[0].step_ms - c.e[0].a2a_ms,
        uni.step_ms - uni.a2a_ms);

  /* Replicas of unequal speed: two videos in flight (4 micro-batches) on
   * 2 x 1 x 1 at speeds 1 and 3 split 1:3; the step is the slower of one
   * micro-batch at speed 1 and three at speed 3 (plan_make's step of one
   * rank for each), plus 3 predictions received by the replica that ran
   * one. Two CFG branches stay 1:1. */
  plan_grid r2g = {2, 1, 1};
  d[0].speed = 1.0;
  d[1].speed = 3.0;
  plan_workload w4 = w;
  w4.micro_batches = 4;
  CHECK(plan_grid_choose(&(plan_grid_inputs){m, d, 2, NULL, &w4, &o, &links}, &r2g, &c, err,
                         sizeof err) == PLAN_OK,
        "speeds 1, 3: %s", err);
  double ref[2];
  for (int r = 0; r < 2; r++) {
    plan_workload wr = w;
    wr.micro_batches = r ? 3 : 1;
    CHECK(plan_make(&(plan_inputs){m, &d[r], 1, &b, &wr, &o}, &p, err, sizeof err) == PLAN_OK, "%s",
          err);
    ref[r] = p.predicted_step_ms;
  }
  CHECK(c.e[0].micro_per_replica == 3 && close_to(c.e[0].pipeline_ms, fmax(ref[0], ref[1])) &&
            close_to(c.e[0].exchange_ms, 3 * latent / 450e9 * 1e3),
        "speeds 1, 3: %d per replica, pipeline %.3f ms (want %.3f), exchange %.6f",
        c.e[0].micro_per_replica, c.e[0].pipeline_ms, fmax(ref[0], ref[1]), c.e[0].exchange_ms);
  CHECK(plan_grid_choose(&(plan_grid_inputs){m, d, 2, NULL, &w, &o, &links}, &r2g, &c, err,
                         sizeof err) == PLAN_OK &&
            c.e[0].micro_per_replica == 1,
        "2 branches at speeds 1, 3: %d per replica", c.e[0].micro_per_replica);
  d[0].speed = d[1].speed = 1.0;

  /* U must divide 40 heads: 3 ranks give 1x1x3 refused. */
  devices(d, 3, 141.0);
  CHECK(plan_grid_choose(&(plan_grid_inputs){m, d, 3, NULL, &w, &o, &links}, NULL, &c, err,
                         sizeof err) == PLAN_OK,
        "3 ranks: %s", err);
  CHECK(!find(&c, 1, 1, 3)->ok && strstr(find(&c, 1, 1, 3)->why, "divide"), "1x1x3: %s",
        find(&c, 1, 1, 3)->why);

  /* A sequence of fewer tokens than Ulysses ranks: 1 frame x 16 x 16 is
   * one token, 1 x 1 x 2 refused (a rank would hold none). */
  plan_workload tiny = wl(1, 16, 16, 1);
  devices(d, 2, 141.0);
  CHECK(plan_grid_choose(&(plan_grid_inputs){m, d, 2, NULL, &tiny, &o, &links}, NULL, &c, err,
                         sizeof err) == PLAN_OK,
        "tiny: %s", err);
  CHECK(!find(&c, 1, 1, 2)->ok && strstr(find(&c, 1, 1, 2)->why, "sequence-parallel"),
        "1x16x16 on U = 2: %s", find(&c, 1, 1, 2)->why);

  /* Output: the table names every layout and the chosen one; the JSON
   * too. */
  size_t need = plan_grid_format_table(&c, NULL, 0);
  char *text = malloc(need + 1);
  plan_grid_format_table(&c, text, need + 1);
  CHECK(strlen(text) == need && strstr(text, "1x1x2") && strstr(text, "chosen"), "table: %s",
        text);
  free(text);
  need = plan_grid_format_json(&c, NULL, 0);
  text = malloc(need + 1);
  plan_grid_format_json(&c, text, need + 1);
  CHECK(strlen(text) == need && strstr(text, "\"layout\": \"2x1x1\""), "json: %s", text);
  free(text);

  CHECK(close_to(plan_pcie_gbs(4), 0.8 * 31.508) && plan_pcie_gbs(2) == 0.0, "pcie rates");
  return sp_test_end();
}
