/* Two-expert models (Wan 2.2 A14B) in the planner: the arena of a stage
 * holding both experts, the choice per rank between both experts resident,
 * swapping at the switch and streaming, the predicted switch cost, and the
 * plan's forms with the experts' fields. References are written out here: the
 * buffers a stage of two experts adds to a one-expert stage, the budgets
 * that separate the choices from the weights' sizes, the switch's timeline
 * in closed form. */
#include <math.h>

#include "layout.h"
#include "plan_test.h"

/* The tiny preset (4 blocks, dim 256) as two experts: every group counted
 * twice (plan_model's convention), experts 2. */
static void two_experts(test_wan *t) {
  test_wan_make(t, 0);
  const int64_t D = 256, F = 640;
  t->m.num_blocks = 4;
  t->m.dim = D;
  t->m.ffn_dim = F;
  t->m.heads = 2;
  uint64_t blk = (uint64_t)(6 * D + 8 * (D * D + D) + 6 * D + F * D + F + D * F + D) * 2;
  for (int i = 0; i < 4; i++) t->blocks[i] = 2 * blk;
  t->m.embed_bytes = 2 * (uint64_t)(D * 64 + D + 4096 * D + D + D * D + D + 256 * D + D +
                                    D * D + D + 6 * D * D + 6 * D) * 2;
  t->m.head_bytes = 2 * (uint64_t)(2 * D + 64 * D + 64) * 2;
  t->m.experts = 2;
}

static uint64_t align256(uint64_t x) { return (x + 255) / 256 * 256; }

static int count_kind(const plan_layout *l, plan_buf k) {
  int n = 0;
  for (int i = 0; i < l->count; i++) n += l->b[i].kind == k;
  return n;
}

/* A two-expert layout is the one-expert layout of the same shape plus, in
 * aligned buffers of their own, the second expert's embedding, head and
 * blocks (not when swapping) and its cross-attention k and v. */
static void test_layout_totals(void) {
  test_wan t;
  two_experts(&t);
  plan_workload w = {17, 96, 80, 2, 512, 0, 0};
  for (int pos = 0; pos < 4; pos++)
    for (int swap = 0; swap < 2; swap++) {
      plan_rank q = {.first_block = 0, .last_block = 2, .has_embed = pos & 1,
                     .has_head = (pos >> 1) & 1, .order = PLAN_ORDER_MICRO,
                     .chunk_rows = 100,
                     .experts_mode = swap ? PLAN_EXPERTS_SWAP : PLAN_EXPERTS_RESIDENT};
      plan_stage_shape two, one;
      plan_stage_shape_of(&t.m, &w, &q, NULL, 0, &two);
      one = two;
      one.experts = 1;
      one.swap = 0;
      static plan_layout l1, l2;
      char err[256];
      CHECK(plan_layout_make(&one, &l1, err, sizeof err) == PLAN_OK, "one expert: %s", err);
      CHECK(plan_layout_make(&two, &l2, err, sizeof err) == PLAN_OK, "two experts: %s", err);
      const uint64_t D = 256, P = 2, nb = 3, C = 512;
      CHECK(two.block_bytes == t.blocks[0] / 2 && two.embed_bytes == t.m.embed_bytes / 2,
            "the shape's groups are one expert's");
      uint64_t extra = (q.has_embed ? align256(two.embed_bytes) : 0) +
                       (q.has_head ? align256(two.head_bytes) : 0) +
                       (swap ? 0 : nb * align256(two.block_bytes)) + 2 * align256(P * nb * C * D * 2);
      CHECK(l2.total == l1.total + extra,
            "pos %d swap %d: two experts %llu bytes, one %llu + %llu", pos, swap,
            (unsigned long long)l2.total, (unsigned long long)l1.total,
            (unsigned long long)extra);
      CHECK(count_kind(&l2, PLAN_BUF_BLOCK_W) == (int)(swap ? nb : 2 * nb) &&
                count_kind(&l2, PLAN_BUF_CTX_K) == 2 && count_kind(&l2, PLAN_BUF_CTX_V) == 2 &&
                count_kind(&l2, PLAN_BUF_EMBED_W) == 2 * q.has_embed &&
                count_kind(&l2, PLAN_BUF_HEAD_W) == 2 * q.has_head,
            "pos %d swap %d: buffer counts", pos, swap);
      for (int e = 0; e < (swap ? 1 : 2); e++)
        for (int b = 0; b < (int)nb; b++)
          CHECK(plan_layout_find(&l2, PLAN_BUF_BLOCK_W, e * (int)nb + b) != NULL,
                "pos %d swap %d: expert %d block %d", pos, swap, e, b);
    }
  /* swap needs two experts and nothing streamed */
  plan_rank q = {.first_block = 0, .last_block = 2, .order = PLAN_ORDER_MICRO,
                 .experts_mode = PLAN_EXPERTS_SWAP};
  uint8_t fl[3] = {0, 1, 0};
  plan_stage_shape s;
  plan_stage_shape_of(&t.m, &w, &q, fl, 0, &s);
  static plan_layout l;
  char err[256] = "";
  CHECK(plan_layout_make(&s, &l, err, sizeof err) == PLAN_EINVAL && strstr(err, "swap"),
        "swap with a streamed block: '%s'", err);
}

/* One rank, a workload too small to chunk: RESIDENT down to the budget that
 * holds both experts' weights, SWAP down to the one that holds one copy of
 * the blocks (both end groups stay), STREAM below; no swap without a cpu
 * entry. */
static void test_choice(void) {
  test_wan t;
  two_experts(&t);
  plan_workload w = {1, 64, 64, 2, 512, 0, 0};
  plan_options o;
  plan_options_default(&o);
  o.order = PLAN_ORDER_MICRO;
  const uint64_t act =
      plan_act_bytes(&t.m, &w, &(plan_stage_desc){.order = PLAN_ORDER_MICRO, .first_block = 0,
          .last_block = 3, .has_prev = 0, .has_next = 0, .has_embed = 1, .has_head = 1,
          .chunk_rows = plan_tokens(&w), .simple_attn = 0});
  const uint64_t ends = 2 * align256(t.m.embed_bytes / 2) + 2 * align256(t.m.head_bytes / 2);
  const uint64_t one = 4 * align256(t.blocks[0] / 2);
  const uint64_t need_res = o.reserve_bytes + act + ends + 2 * one;
  const uint64_t need_swap = o.reserve_bytes + act + ends + one;
  const struct {
    uint64_t budget;
    int cpu, mode; /* mode -1: infeasible */
  } cases[] = {
      {need_res + (1 << 20), 1, PLAN_EXPERTS_RESIDENT}, {need_res, 1, PLAN_EXPERTS_RESIDENT},
      {need_res, 0, PLAN_EXPERTS_RESIDENT},             {need_res - 1, 1, PLAN_EXPERTS_SWAP},
      {need_swap, 1, PLAN_EXPERTS_SWAP},                {need_swap - 1, 1, PLAN_EXPERTS_STREAM},
      {need_res - 1, 0, -1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char bs[128], err[4096];
    snprintf(bs, sizeof bs, "cuda:0,%llub%s", (unsigned long long)cases[i].budget,
             cases[i].cpu ? ";cpu,*" : "");
    plan_budget b;
    CHECK(plan_budget_parse(bs, 1, &b, err, sizeof err) == PLAN_OK, "%s: %s", bs, err);
    plan_device d;
    test_device(&d, "gpu", 80.0, 1.0);
    static plan p;
    int rc = plan_make(&(plan_inputs){&t.m, &d, 1, &b, &w, &o}, &p, err, sizeof err);
    if (cases[i].mode < 0) {
      CHECK(rc == PLAN_EINFEASIBLE, "%s: feasible (%s)", bs,
            rc ? err : plan_experts_mode_name(p.r[0].experts_mode));
      continue;
    }
    CHECK(rc == PLAN_OK, "%s: %s", bs, err);
    if (rc != PLAN_OK) continue;
    const plan_rank *q = &p.r[0];
    CHECK(q->experts_mode == cases[i].mode, "%s: %s, want %s", bs,
          plan_experts_mode_name(q->experts_mode), plan_experts_mode_name(cases[i].mode));
    CHECK(q->chunk_rows == p.tokens, "%s: chunked (%lld rows)", bs, (long long)q->chunk_rows);
    if (q->experts_mode == PLAN_EXPERTS_SWAP)
      CHECK(q->num_streamed == 0 && q->weight_bytes == ends + one &&
                q->streamed_bytes == 2 * one && q->peak_bytes == need_swap,
            "%s: swap weights %llu (want %llu), host %llu, peak %llu (want %llu)", bs,
            (unsigned long long)q->weight_bytes, (unsigned long long)(ends + one),
            (unsigned long long)q->streamed_bytes, (unsigned long long)q->peak_bytes,
            (unsigned long long)need_swap);
    if (q->experts_mode == PLAN_EXPERTS_RESIDENT)
      CHECK(q->weight_bytes == ends + 2 * one && q->peak_bytes == need_res,
            "%s: resident weights %llu", bs, (unsigned long long)q->weight_bytes);
    if (q->experts_mode == PLAN_EXPERTS_STREAM)
      CHECK(q->num_streamed > 0 && q->stream_slot_bytes > 0 &&
                q->stream_slot_bytes % align256(t.blocks[0] / 2) == 0,
            "%s: stream with %d blocks, slots %llu (one expert's block each)", bs,
            q->num_streamed, (unsigned long long)q->stream_slot_bytes);
    /* the layout of the rank is the plan's arena */
    plan_stage_shape sh;
    plan_stage_shape_of(&t.m, &w, q, p.streamed, 0, &sh);
    static plan_layout l;
    CHECK(plan_layout_make(&sh, &l, err, sizeof err) == PLAN_OK &&
              l.total == q->peak_bytes - q->reserve_bytes,
          "%s: layout %llu, plan %llu", bs, (unsigned long long)l.total,
          (unsigned long long)(q->peak_bytes - q->reserve_bytes));
  }
}

/* The switch cost: copies of c ms per block on one engine, starting when
 * block 0's last use is done; compute of k ms per block. Copies slower than
 * compute: the low-noise pass ends at nb c + k instead of (nb - 1) k + nb k,
 * so the cost is nb c - (2 nb - 2) k (when positive). Fast copies: 0. */
static void test_switch_ms(void) {
  test_wan t;
  test_wan_make(&t, 1);
  for (int i = 0; i < 40; i++) t.blocks[i] *= 2;
  t.m.embed_bytes *= 2;
  t.m.head_bytes *= 2;
  t.m.experts = 2;
  plan_workload w = {81, 480, 832, 2, 512, 0, 0};
  plan_options o;
  plan_options_default(&o);
  const double k = plan_block_flops(&t.m, plan_tokens(&w), 512) / (o.gpu_tflops * 1e12) * 1e3;
  for (int nb = 1; nb <= 20; nb += 19)
    for (int order = PLAN_ORDER_MICRO; order <= PLAN_ORDER_BLOCK; order++) {
      const double reps = order == PLAN_ORDER_BLOCK ? 2.0 : 1.0;
      o.host_link_gbs = 0.5; /* slow: the copies show */
      const double c = 702788608.0 / (o.host_link_gbs * 1e9) * 1e3;
      double want = nb * c - (2.0 * nb - 2.0) * reps * k;
      double got = plan_switch_ms(&t.m, &w, &o, order, 1.0, 0, nb - 1);
      CHECK(want > 0 && fabs(got - want) < 1e-6 * want, "nb %d %s: %g ms, want %g", nb,
            plan_order_name(order), got, want);
      o.host_link_gbs = 1e6; /* fast: hidden */
      got = plan_switch_ms(&t.m, &w, &o, order, 1.0, 0, nb - 1);
      CHECK(got == 0.0 || (nb == 1 && got < 1.0), "nb %d fast link: %g ms", nb, got);
    }
}

/* A two-expert plan through JSON, the table and the binary form. */
static void test_forms(void) {
  test_wan t;
  test_wan_make(&t, 1);
  for (int i = 0; i < 40; i++) t.blocks[i] *= 2;
  t.m.embed_bytes *= 2;
  t.m.head_bytes *= 2;
  t.m.experts = 2;
  plan_workload w = {81, 480, 832, 2, 512, 0, 0};
  plan_options o;
  plan_options_default(&o);
  plan_device d[2];
  test_device(&d[0], "gpu0", 24.0, 1.0);
  test_device(&d[1], "gpu1", 80.0, 1.0);
  plan_budget b;
  char err[4096];
  CHECK(plan_budget_parse("cpu,*", 2, &b, err, sizeof err) == PLAN_OK, "%s", err);
  static plan p, back;
  int rc = plan_make(&(plan_inputs){&t.m, d, 2, &b, &w, &o}, &p, err, sizeof err);
  CHECK(rc == PLAN_OK, "plan: %s", err);
  if (rc != PLAN_OK) return;
  int modes[4] = {0};
  for (int r = 0; r < 2; r++) modes[p.r[r].experts_mode]++;
  CHECK(modes[PLAN_EXPERTS_ONE] == 0, "a two-expert plan with a one-expert rank");
  static uint8_t wire[PLAN_WIRE_MAX];
  size_t len = 0;
  CHECK(plan_encode(&p, wire, sizeof wire, &len, err, sizeof err) == PLAN_OK, "encode: %s", err);
  CHECK(plan_decode(wire, len, &back, err, sizeof err) == PLAN_OK, "decode: %s", err);
  for (int r = 0; r < 2; r++)
    CHECK(back.r[r].experts_mode == p.r[r].experts_mode &&
              back.r[r].predicted_switch_ms == p.r[r].predicted_switch_ms,
          "rank %d: the experts fields do not round-trip", r);
  /* a swap's cost only on a swap; a mode out of range is refused */
  back.r[0].experts_mode = 9;
  CHECK(plan_validate(&back, err, sizeof err) != PLAN_OK, "mode 9 accepted");
  back.r[0].experts_mode = PLAN_EXPERTS_RESIDENT;
  back.r[0].num_streamed = 0;
  back.r[0].predicted_switch_ms = 5.0;
  CHECK(plan_validate(&back, err, sizeof err) != PLAN_OK, "a resident rank with a switch cost");
  size_t n = plan_format_json(&p, NULL, 0);
  char *js = malloc(n + 1), *tx;
  plan_format_json(&p, js, n + 1);
  n = plan_format_table(&p, NULL, 0);
  tx = malloc(n + 1);
  plan_format_table(&p, tx, n + 1);
  for (int r = 0; r < 2; r++) {
    char key[64], line[64];
    snprintf(key, sizeof key, "\"experts\":\"%s\"", plan_experts_mode_name(p.r[r].experts_mode));
    snprintf(line, sizeof line, "# rank %d experts: %s", r,
             plan_experts_mode_name(p.r[r].experts_mode));
    CHECK(strstr(js, key) != NULL, "JSON lacks %s", key);
    CHECK(strstr(tx, line) != NULL, "table lacks '%s'", line);
  }
  printf("test_experts: 24 GiB rank %s (switch %.1f ms), 80 GiB rank %s\n",
         plan_experts_mode_name(p.r[0].experts_mode), p.r[0].predicted_switch_ms,
         plan_experts_mode_name(p.r[1].experts_mode));
  free(js);
  free(tx);
}

int main(void) {
  sp_test_begin("test_experts");
  test_layout_totals();
  test_choice();
  test_switch_ms();
  test_forms();
  return sp_test_end();
}
