/* A Ulysses rank's share in the planner (plan_workload.seq): the tokens it
 * is counted with against the rows the run's ranks hold (ranks/nets) and
 * the split's definition, its layout buffer by buffer and its stage time
 * against formulas written out here, its memory shrinking with U, and
 * plan_make's refusals. */
#include <math.h>

#include "dit.h"
#include "layout.h"
#include "plan_test.h"

static uint64_t al(uint64_t b) { return (b + 255) / 256 * 256; }

/* The split: every L of 1..300 over U of 1..12 ranks. The run's ranks
 * (rank_dit_seq_rows, what a CPU stage holds) take slices that cover L,
 * differ by at most one row, the longer first; the planner counts the
 * longest, ceil(L / U). */
static void test_split(void) {
  for (int64_t L = 1; L <= 300; L++)
    for (int U = 1; U <= 12; U++) {
      plan_workload w = {1, 16, 16 * L, 1, 512, U, 0};
      CHECK(plan_tokens(&w) == L, "L %lld", (long long)L);
      int64_t sum = 0, most = 0, prev = -1;
      for (int u = 0; u < U; u++) {
        const rank_dit_seq seq = {.n = U, .me = u, .tokens = L};
        int64_t rows = U > 1 ? rank_dit_seq_rows(&seq, L) : L;
        CHECK(rows == L / U + (u < L % U), "L %lld U %d rank %d: %lld rows", (long long)L, U, u,
              (long long)rows);
        CHECK(prev < 0 || rows <= prev, "L %lld U %d: rank %d longer than the one before",
              (long long)L, U, u);
        if (U > 1)
          CHECK(rank_dit_seq_row0(&seq, L) == sum, "L %lld U %d rank %d: not contiguous",
                (long long)L, U, u);
        prev = rows;
        sum += rows;
        if (rows > most) most = rows;
        if (U == 1) break;
      }
      CHECK(sum == L, "L %lld U %d: %lld rows in all", (long long)L, U, (long long)sum);
      CHECK(plan_rank_tokens(&w) == most && most == (L + U - 1) / U,
            "L %lld U %d: planner %lld, largest slice %lld", (long long)L, U,
            (long long)plan_rank_tokens(&w), (long long)most);
    }
}

/* The layout of a middle stage (10 blocks, micro-batch-major: 3 activation
 * buffers) and of a first stage of Wan 14B at 480x848x81 (33,390 tokens:
 * U = 4 and 8 split it unevenly), buffer by buffer. */
static void test_layout(void) {
  static test_wan t;
  test_wan_make(&t, 1);
  const uint64_t D = 5120, F = 13824, a = 2;
  const int64_t L = 21 * 30 * 53;
  uint64_t prev_total = 0;
  for (int U = 1; U <= 8; U *= 2) {
    plan_workload w = {81, 480, 848, 2, 512, U, 0};
    CHECK(plan_tokens(&w) == L, "tokens %lld", (long long)plan_tokens(&w));
    const uint64_t tr = (uint64_t)((L + U - 1) / U);
    for (int first = 0; first <= 1; first++) {
      plan_rank q = {.first_block = 0, .last_block = 9, .has_embed = first,
                     .order = PLAN_ORDER_MICRO};
      plan_stage_shape s;
      plan_stage_shape_of(&t.m, &w, &q, NULL, 0, &s);
      s.embed_bytes = s.head_bytes = s.block_bytes = 0;
      static plan_layout l;
      char err[256];
      CHECK(plan_layout_make(&s, &l, err, sizeof err) == PLAN_OK, "U %d: %s", U, err);
      const plan_buffer *b = plan_layout_find(&l, PLAN_BUF_ACT, 0);
      CHECK(b && b->bytes == (tr + 7) * D * 4, "U %d activation %llu, (t + 7) D 4 = %llu", U,
            b ? (unsigned long long)b->bytes : 0ull, (unsigned long long)((tr + 7) * D * 4));
      b = plan_layout_find(&l, PLAN_BUF_KV, 0);
      uint64_t kv = 2 * tr * D * a > tr * F * a ? 2 * tr * D * a : tr * F * a;
      CHECK(b && b->bytes == kv, "U %d k, v / ffn %llu, want %llu", U,
            b ? (unsigned long long)b->bytes : 0ull, (unsigned long long)kv);
      const plan_buf rows[4] = {PLAN_BUF_HB, PLAN_BUF_PB, PLAN_BUF_QB, PLAN_BUF_AB};
      for (int i = 0; i < 4; i++) {
        b = plan_layout_find(&l, rows[i], 0);
        CHECK(b && b->bytes == tr * D * a, "U %d %s", U, plan_buf_name(rows[i]));
      }
      b = plan_layout_find(&l, PLAN_BUF_COS, 0);
      CHECK(b && b->bytes == tr * 64 * 4, "U %d rope", U);
      /* the all-to-all: every token's q, k, v, o of D/U of the width, and
       * the rank's rows packed */
      const plan_buffer *h = plan_layout_find(&l, PLAN_BUF_SEQ_HEADS, 0);
      const plan_buffer *pk = plan_layout_find(&l, PLAN_BUF_SEQ_PACK, 0);
      if (U == 1)
        CHECK(!h && !pk, "one rank has all-to-all buffers");
      else
        CHECK(h && pk && h->bytes == 4 * (uint64_t)L * (D / U) * a && pk->bytes == tr * D * a,
              "U %d all-to-all %llu + %llu", U, h ? (unsigned long long)h->bytes : 0ull,
              pk ? (unsigned long long)pk->bytes : 0ull);
      /* the first stage patchifies the whole sequence */
      b = plan_layout_find(&l, PLAN_BUF_TOK, 0);
      CHECK(first ? b && b->bytes == (uint64_t)L * 64 * 4 : !b, "U %d patch tokens", U);
      if (first) continue;
      /* the whole arena, weights aside: shrinks with U */
      uint64_t total = plan_act_bytes(&t.m, &w,
                                      &(plan_stage_desc){.order = PLAN_ORDER_MICRO,
                                                         .first_block = 0,
                                                         .last_block = 9,
                                                         .has_prev = 1,
                                                         .has_next = 1,
                                                         .has_embed = 0,
                                                         .has_head = 0,
                                                         .chunk_rows = 0,
                                                         .simple_attn = 0});
      CHECK(total == l.total, "U %d: plan_act_bytes %llu, layout %llu", U,
            (unsigned long long)total, (unsigned long long)l.total);
      CHECK(U == 1 || total < prev_total, "U %d: %llu bytes, not below U %d's %llu", U,
            (unsigned long long)total, U / 2, (unsigned long long)prev_total);
      /* every per-token buffer is tr rows: the bytes above the context's,
       * which do not depend on U, are (3 (t+7) D 4 + max(2 t D, t F) a +
       * 4 t D a + 2 t 64 4 + the all-to-all's), each aligned */
      uint64_t want = 3 * al((tr + 7) * D * 4) + al(kv) + 4 * al(tr * D * a) +
                      2 * al(tr * 64 * 4);
      if (U > 1) want += al(4 * (uint64_t)L * (D / U) * a) + al(tr * D * a);
      uint64_t ctx = 2 * al(2 * 10 * 512 * D * a) + al(512 * D * a) + al(512 * D * 4) +
                     al(6 * D * 4) + al(2 * D * 4) + al((256 + 2 * D) * 4);
      CHECK(total == want + ctx, "U %d: %llu bytes, formula %llu", U, (unsigned long long)total,
            (unsigned long long)(want + ctx));
      prev_total = total;
    }
  }
}

/* The time of that middle stage on one micro-batch: the activations of
 * its t rows arriving, then 10 blocks of 12 t D^2 + 4 t D F + 4 t C D +
 * 4 L^2 D / U FLOPs at 600 TFLOP/s and four all-to-alls of (U-1)/U of
 * t D 2 bytes at the Ulysses link. */
static void test_time(void) {
  static test_wan t;
  test_wan_make(&t, 1);
  plan_options o;
  plan_options_default(&o);
  o.seq_link_gbs = 100.0;
  const double D = 5120, F = 13824, L = 21 * 30 * 53;
  for (int U = 1; U <= 8; U *= 2) {
    plan_workload w = {81, 480, 848, 1, 512, U, 0};
    const double tr = ceil(L / U);
    double a2a = U > 1 ? 4 * tr * D * 2 * (U - 1.0) / U / 100e9 * 1e3 : 0.0;
    CHECK(fabs(plan_seq_a2a_ms(&t.m, &w, &o) - a2a) <= 1e-12 * a2a, "U %d all-to-all %.9f, %.9f",
          U, plan_seq_a2a_ms(&t.m, &w, &o), a2a);
    double blk = (12 * tr * D * D + 4 * tr * D * F + 4 * tr * 512 * D + 4 * L * L * D / U) /
                 600e12 * 1e3;
    double arrive = (tr * D * 4 + 7 * D * 4) / 25e9 * 1e3;
    double want = arrive + 10 * (blk + a2a);
    double got = plan_stage_ms(&t.m, &w, &o,
                               &(plan_stage_desc){.order = PLAN_ORDER_MICRO,
                                                  .speed = 1.0,
                                                  .first_block = 0,
                                                  .last_block = 9,
                                                  .streamed = NULL,
                                                  .depth = 2,
                                                  .has_prev = 1,
                                                  .has_embed = 0,
                                                  .has_head = 0});
    CHECK(fabs(got - want) <= 1e-9 * want, "U %d: stage %.6f ms, formula %.6f", U, got, want);
  }
}

/* plan_make with a Ulysses workload: the plan's tokens are the sequence's,
 * its chunks the rank's rows; a bad U is refused with a line. */
static void test_plan(void) {
  static test_wan t;
  test_wan_make(&t, 1);
  plan_options o;
  plan_options_default(&o);
  plan_device d[2];
  for (int r = 0; r < 2; r++) test_device(&d[r], "gpu", 141.0, 1.0);
  plan_budget b;
  char err[4096];
  CHECK(plan_budget_parse(NULL, 2, &b, err, sizeof err) == PLAN_OK, "budget: %s", err);
  static plan p;
  plan_workload w = {81, 480, 848, 2, 512, 8, 0};
  CHECK(plan_make(&(plan_inputs){&t.m, d, 2, &b, &w, &o}, &p, err, sizeof err) == PLAN_OK,
        "U 8: %s", err);
  const int64_t L = 21 * 30 * 53;
  CHECK(p.tokens == L, "plan tokens %lld", (long long)p.tokens);
  for (int r = 0; r < 2; r++) {
    const plan_rank *q = &p.r[r];
    CHECK(q->chunk_rows <= (L + 7) / 8, "rank %d chunks %lld rows", r, (long long)q->chunk_rows);
    CHECK(q->act_bytes == plan_act_bytes(&t.m, &w,
                                         &(plan_stage_desc){.order = q->order,
                                                            .first_block = q->first_block,
                                                            .last_block = q->last_block,
                                                            .has_prev = r > 0,
                                                            .has_next = r < 1,
                                                            .has_embed = r == 0,
                                                            .has_head = r == 1,
                                                            .chunk_rows = q->chunk_rows,
                                                            .simple_attn = 0}),
          "rank %d act bytes", r);
  }
  const int bad[] = {3, -1, 1000};
  for (int i = 0; i < 3; i++) {
    w.seq = bad[i];
    CHECK(plan_make(&(plan_inputs){&t.m, d, 2, &b, &w, &o}, &p, err, sizeof err) == PLAN_EINVAL &&
              strstr(err, "sequence-parallel"),
          "seq %d: %s", bad[i], err);
  }
}

int main(void) {
  sp_test_begin("planner Ulysses share");
  test_split();
  test_layout();
  test_time();
  test_plan();
  return sp_test_end();
}
