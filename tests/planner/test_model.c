/* The model of a rank: token counts and FLOPs against the published Wan 2.1
 * facts (MODEL.md "Cost"), the time model of both orders against
 * closed forms, the memory model against the CUDA stage's layout computed by
 * hand, and its structure (what each buffer adds). */
#include <math.h>

#include "plan_test.h"

static int close_rel(double a, double b, double tol) { return fabs(a - b) <= tol * fabs(b); }

static void test_tokens_flops(void) {
  plan_workload w = {81, 480, 832, 1, 512, 0, 0};
  CHECK(plan_tokens(&w) == 32760, "480x832x81 -> %lld", (long long)plan_tokens(&w));
  plan_workload w7 = {81, 720, 1280, 1, 512, 0, 0};
  CHECK(plan_tokens(&w7) == 75600, "720x1280x81 -> %lld", (long long)plan_tokens(&w7));
  plan_workload w1 = {1, 480, 832, 1, 512, 0, 0};
  CHECK(plan_tokens(&w1) == 30 * 52, "one frame");

  test_wan big, small;
  test_wan_make(&big, 1);
  test_wan_make(&small, 0);
  /* published: 14B 42 TFLOP per block at 480p, 1.68 PFLOP per forward,
   * 163 TFLOP at 720p; 1.3B 9.4 TFLOP at 480p (rounded to 2-3 digits) */
  double f14 = plan_block_flops(&big.m, 32760, 512);
  CHECK(close_rel(f14, 42e12, 0.01), "14B 480p %.4g", f14);
  CHECK(close_rel(40 * f14, 1.68e15, 0.01), "14B forward %.4g", 40 * f14);
  CHECK(close_rel(plan_block_flops(&big.m, 75600, 512), 163e12, 0.01), "14B 720p");
  CHECK(close_rel(plan_block_flops(&small.m, 32760, 512), 9.4e12, 0.01), "1.3B 480p %.4g",
        plan_block_flops(&small.m, 32760, 512));
}

/* Stage time without streaming: blocks x FLOPs / (rate x speed), plus the
 * activation receive over the peer link; with streaming, the closed forms
 * of a single-copy-engine pipeline. */
static void test_stage_time(void) {
  test_wan t;
  test_wan_make(&t, (int)(sp_rand_u64() % 2));
  plan_options o;
  plan_options_default(&o);
  o.gpu_tflops = 200.0 + 800.0 * sp_rand_unit();
  o.host_link_gbs = 5.0 + 50.0 * sp_rand_unit();
  plan_workload w = {1 + 4 * sp_rand_int(0, 20), 16 * sp_rand_int(16, 52), 16 * sp_rand_int(16, 52), 1, 512, 0, 0};
  double L = (double)plan_tokens(&w), D = (double)t.m.dim, F = (double)t.m.ffn_dim;
  double speed = 0.25 + 2.0 * sp_rand_unit();
  double blk = (12 * L * D * D + 4 * L * D * F + 4 * L * L * D + 4 * L * 512 * D) /
               (o.gpu_tflops * 1e12 * speed) * 1e3;
  int n = (int)sp_rand_int(2, t.m.num_blocks);
  uint8_t none[64] = {0};
  double ms = plan_stage_ms(&t.m, &w, &o, &(plan_stage_desc){.order = PLAN_ORDER_MICRO,
      .speed = speed, .first_block = 0, .last_block = n - 1, .streamed = none, .depth = 2,
      .has_prev = 0, .has_embed = 0, .has_head = 0});
  CHECK(close_rel(ms, n * blk, 1e-9), "%d resident blocks: %.6f ms, want %.6f", n, ms, n * blk);
  double with_recv = plan_stage_ms(&t.m, &w, &o, &(plan_stage_desc){.order = PLAN_ORDER_MICRO,
      .speed = speed, .first_block = 0, .last_block = n - 1, .streamed = none, .depth = 2,
      .has_prev = 1, .has_embed = 0, .has_head = 0});
  double recv = (L * D * 4.0 + 7 * D * 4.0) / (o.peer_link_gbs * 1e9) * 1e3;
  CHECK(close_rel(with_recv, n * blk + recv, 1e-9), "receive adds %.6f ms", with_recv - ms);

  /* fp8 W8A8: the linear layers' 12 L D^2 + 4 L D F at fp8_linear_ratio of
   * their bf16 time (fp8_fast_linear_ratio under fast accumulation), the
   * attention terms unchanged; int8 keeps the bf16 rate */
  plan_model q = t.m;
  q.w8a8 = PLAN_W8A8_FP8;
  o.fp8_linear_ratio = 0.3 + 0.7 * sp_rand_unit();
  o.fp8_fast_linear_ratio = 0.3 + 0.7 * sp_rand_unit();
  for (int fast = 0; fast < 2; fast++) {
    o.fp8_fast_accum = fast;
    const double r8 = fast ? o.fp8_fast_linear_ratio : o.fp8_linear_ratio;
    double blk8 = ((12 * L * D * D + 4 * L * D * F) * r8 + 4 * L * L * D + 4 * L * 512 * D) /
                  (o.gpu_tflops * 1e12 * speed) * 1e3;
    double ms8 = plan_stage_ms(&q, &w, &o, &(plan_stage_desc){.order = PLAN_ORDER_MICRO,
        .speed = speed, .first_block = 0, .last_block = n - 1, .streamed = none, .depth = 2,
        .has_prev = 0, .has_embed = 0, .has_head = 0});
    CHECK(close_rel(ms8, n * blk8, 1e-9), "fp8%s (linear ratio %.3f): %.6f ms, want %.6f",
          fast ? " fast" : "", r8, ms8, n * blk8);
  }
  o.fp8_fast_accum = 0;
  q.w8a8 = PLAN_W8A8_INT8;
  double msi8 = plan_stage_ms(&q, &w, &o, &(plan_stage_desc){.order = PLAN_ORDER_MICRO,
      .speed = speed, .first_block = 0, .last_block = n - 1, .streamed = none, .depth = 2,
      .has_prev = 0, .has_embed = 0, .has_head = 0});
  CHECK(close_rel(msi8, n * blk, 1e-9), "int8: %.6f ms, want the bf16 %.6f", msi8, n * blk);

  /* one streamed block at the end: its copy hides behind n-1 blocks, so it
   * costs max(compute, copy - (n-1) compute) more only when the copy is longer */
  double copy = (double)t.m.block_bytes[0] / (o.host_link_gbs * 1e9) * 1e3;
  uint8_t last[64] = {0};
  last[n - 1] = 1;
  double ms1 = plan_stage_ms(&t.m, &w, &o, &(plan_stage_desc){.order = PLAN_ORDER_MICRO,
      .speed = speed, .first_block = 0, .last_block = n - 1, .streamed = last, .depth = 2,
      .has_prev = 0, .has_embed = 0, .has_head = 0});
  double want1 = fmax((n - 1) * blk, copy) + blk;
  CHECK(close_rel(ms1, want1, 1e-9), "streamed last: %.6f, want %.6f", ms1, want1);

  /* every block streamed, a link so slow that copies dominate: n copies
   * back to back, then the last block's compute */
  plan_options slow = o;
  slow.host_link_gbs = 0.01;
  uint8_t all[64];
  memset(all, 1, sizeof all);
  double cslow = (double)t.m.block_bytes[0] / (slow.host_link_gbs * 1e9) * 1e3;
  double msa = plan_stage_ms(&t.m, &w, &slow, &(plan_stage_desc){.order = PLAN_ORDER_MICRO,
      .speed = speed, .first_block = 0, .last_block = n - 1, .streamed = all, .depth = 2,
      .has_prev = 0, .has_embed = 0, .has_head = 0});
  CHECK(close_rel(msa, n * cslow + blk, 1e-9), "copy-bound: %.3f, want %.3f", msa,
        n * cslow + blk);
  /* a link so fast that every copy hides behind the block before it: the
   * resident time plus only the first copy (nothing runs before it) */
  plan_options fast = o;
  fast.host_link_gbs = 1e9;
  double first_copy = (double)t.m.block_bytes[0] / (fast.host_link_gbs * 1e9) * 1e3;
  double msf = plan_stage_ms(&t.m, &w, &fast, &(plan_stage_desc){.order = PLAN_ORDER_MICRO,
      .speed = speed, .first_block = 0, .last_block = n - 1, .streamed = all, .depth = 2,
      .has_prev = 0, .has_embed = 0, .has_head = 0});
  CHECK(close_rel(msf, n * blk + first_copy, 1e-9), "fast copies: %.9f, want %.9f", msf,
        n * blk + first_copy);
  /* one slot cannot overlap a copy with the block before it */
  double d1 = plan_stage_ms(&t.m, &w, &o, &(plan_stage_desc){.order = PLAN_ORDER_MICRO,
      .speed = speed, .first_block = 0, .last_block = n - 1, .streamed = all, .depth = 1,
      .has_prev = 0, .has_embed = 0, .has_head = 0});
  double d2 = plan_stage_ms(&t.m, &w, &o, &(plan_stage_desc){.order = PLAN_ORDER_MICRO,
      .speed = speed, .first_block = 0, .last_block = n - 1, .streamed = all, .depth = 2,
      .has_prev = 0, .has_embed = 0, .has_head = 0});
  CHECK(close_rel(d1, n * (copy + blk), 1e-9), "depth 1: %.3f, want %.3f", d1, n * (copy + blk));
  CHECK(d2 <= d1 + 1e-9, "depth 2 slower than depth 1");
  /* twice the speed halves a compute-bound stage */
  double fast2 = plan_stage_ms(&t.m, &w, &o, &(plan_stage_desc){.order = PLAN_ORDER_MICRO,
      .speed = 2 * speed, .first_block = 0, .last_block = n - 1, .streamed = none, .depth = 2,
      .has_prev = 0, .has_embed = 0, .has_head = 0});
  CHECK(close_rel(fast2, ms / 2, 1e-9), "speed scaling");
}

/* Block-major against closed forms: a step of M micro-batches where every
 * block runs all M while it is on the GPU, so each streamed block is copied
 * once per step; micro-batch-major copies it once per micro-batch. */
static void test_block_major_time(void) {
  test_wan t;
  test_wan_make(&t, (int)(sp_rand_u64() % 2));
  plan_options o;
  plan_options_default(&o);
  o.gpu_tflops = 200.0 + 800.0 * sp_rand_unit();
  o.host_link_gbs = 5.0 + 50.0 * sp_rand_unit();
  int M = (int)sp_rand_int(1, 4);
  plan_workload w = {1 + 4 * sp_rand_int(0, 20), 16 * sp_rand_int(16, 52), 16 * sp_rand_int(16, 52), M, 512, 0, 0};
  double L = (double)plan_tokens(&w), D = (double)t.m.dim, F = (double)t.m.ffn_dim;
  double speed = 0.25 + 2.0 * sp_rand_unit();
  double blk = (12 * L * D * D + 4 * L * D * F + 4 * L * L * D + 4 * L * 512 * D) /
               (o.gpu_tflops * 1e12 * speed) * 1e3;
  double recv = (L * D * 4.0 + 7 * D * 4.0) / (o.peer_link_gbs * 1e9) * 1e3;
  double copy = (double)t.m.block_bytes[0] / (o.host_link_gbs * 1e9) * 1e3;
  int n = (int)sp_rand_int(2, t.m.num_blocks);
  uint8_t none[64] = {0}, all[64], last[64] = {0};
  memset(all, 1, sizeof all);
  last[n - 1] = 1;

  /* all resident: both orders do the same work, M n blocks and M receives */
  double bm = plan_stage_ms(&t.m, &w, &o, &(plan_stage_desc){.order = PLAN_ORDER_BLOCK,
      .speed = speed, .first_block = 0, .last_block = n - 1, .streamed = none, .depth = 2,
      .has_prev = 1, .has_embed = 0, .has_head = 0});
  double mm = plan_stage_ms(&t.m, &w, &o, &(plan_stage_desc){.order = PLAN_ORDER_MICRO,
      .speed = speed, .first_block = 0, .last_block = n - 1, .streamed = none, .depth = 2,
      .has_prev = 1, .has_embed = 0, .has_head = 0});
  CHECK(close_rel(bm, M * (n * blk + recv), 1e-9), "block resident %.6f, want %.6f", bm,
        M * (n * blk + recv));
  CHECK(close_rel(mm, M * (n * blk + recv), 1e-9), "micro resident %.6f", mm);

  /* the last block streamed: its one copy hides behind the M (n-1) block runs before it */
  double b1 = plan_stage_ms(&t.m, &w, &o, &(plan_stage_desc){.order = PLAN_ORDER_BLOCK,
      .speed = speed, .first_block = 0, .last_block = n - 1, .streamed = last, .depth = 2,
      .has_prev = 0, .has_embed = 0, .has_head = 0});
  double want1 = fmax((n - 1) * M * blk, copy) + M * blk;
  CHECK(close_rel(b1, want1, 1e-9), "block streamed last %.6f, want %.6f", b1, want1);

  /* copy-bound: n copies back to back once per step, then M runs of the
   * last block; micro-batch-major pays the copies M times */
  plan_options slow = o;
  slow.host_link_gbs = 0.01;
  double cslow = (double)t.m.block_bytes[0] / (slow.host_link_gbs * 1e9) * 1e3;
  double bs = plan_stage_ms(&t.m, &w, &slow, &(plan_stage_desc){.order = PLAN_ORDER_BLOCK,
      .speed = speed, .first_block = 0, .last_block = n - 1, .streamed = all, .depth = 2,
      .has_prev = 0, .has_embed = 0, .has_head = 0});
  double ms = plan_stage_ms(&t.m, &w, &slow, &(plan_stage_desc){.order = PLAN_ORDER_MICRO,
      .speed = speed, .first_block = 0, .last_block = n - 1, .streamed = all, .depth = 2,
      .has_prev = 0, .has_embed = 0, .has_head = 0});
  CHECK(close_rel(bs, n * cslow + M * blk, 1e-9), "block copy-bound %.3f, want %.3f", bs,
        n * cslow + M * blk);
  CHECK(close_rel(ms, M * (n * cslow + blk), 1e-9), "micro copy-bound %.3f, want %.3f", ms,
        M * (n * cslow + blk));
  /* one slot: every copy waits for the block before it to finish all M */
  double d1 = plan_stage_ms(&t.m, &w, &o, &(plan_stage_desc){.order = PLAN_ORDER_BLOCK,
      .speed = speed, .first_block = 0, .last_block = n - 1, .streamed = all, .depth = 1,
      .has_prev = 0, .has_embed = 0, .has_head = 0});
  CHECK(close_rel(d1, n * (copy + M * blk), 1e-9), "block depth 1 %.3f, want %.3f", d1,
        n * (copy + M * blk));

  /* the pipeline: micro sum/M + (M-1)/M max, block the plain sum */
  int R = (int)sp_rand_int(1, 6);
  double st[6], sum = 0, mx = 0;
  for (int r = 0; r < R; r++) {
    st[r] = 10 + 1000 * sp_rand_unit();
    sum += st[r];
    mx = fmax(mx, st[r]);
  }
  CHECK(close_rel(plan_pipeline_ms(PLAN_ORDER_BLOCK, M, R, st), sum, 1e-12), "block pipeline");
  CHECK(close_rel(plan_pipeline_ms(PLAN_ORDER_MICRO, M, R, st), sum / M + (M - 1.0) / M * mx,
                  1e-12),
        "micro pipeline");
}

static void test_act_buffers(void) {
  /* micro: 1 + prev + next; block: max(M, 1) + prev */
  for (int M = 0; M <= 5; M++)
    for (int prev = 0; prev <= 1; prev++)
      for (int next = 0; next <= 1; next++) {
        int mi = plan_act_buffers(PLAN_ORDER_MICRO, M, prev, next);
        int bl = plan_act_buffers(PLAN_ORDER_BLOCK, M, prev, next);
        CHECK(mi == 1 + prev + next, "micro M %d prev %d next %d: %d", M, prev, next, mi);
        CHECK(bl == (M > 1 ? M : 1) + prev, "block M %d prev %d next %d: %d", M, prev, next, bl);
        CHECK(plan_act_buffers(PLAN_ORDER_AUTO, M, prev, next) == (mi > bl ? mi : bl), "auto");
      }
}

/* The device layout of the CUDA stage, by hand for the two published
 * models at 480x832x81 (32,760 tokens), 2 micro-batches:
 *   nbuf (L D 4 + 7 D 4) + max(2 L D a, R F a) + 4 R D a + nb M 2 C D a
 *   + C D 4 + C max(TD, D) a [+ C D a first] + L hd 4
 *   + 6 D 4 + 2 D 4 + (256 + 2 D) 4 [+ 2 L 64 4 first or last].
 * Each case is written out with the literal sizes, and its total was also
 * worked out separately (the constants at the end of each line). */
static uint64_t hand(uint64_t D, uint64_t F, int nbuf, uint64_t nb, uint64_t R, int first,
                     int ends) {
  const uint64_t L = 32760, M = 2, C = 512, TD = 4096, hd = 128, a = 2;
  uint64_t kv_or_ffn = 2 * L * D * a > R * F * a ? 2 * L * D * a : R * F * a;
  return (uint64_t)nbuf * (L * D * 4 + 7 * D * 4) + kv_or_ffn + 4 * R * D * a +
         nb * M * 2 * C * D * a + C * D * 4 + C * (TD > D ? TD : D) * a +
         (first ? C * D * a : 0) + L * hd * 4 + 6 * D * 4 + 2 * D * 4 + (256 + 2 * D) * 4 +
         (ends ? 2 * L * 64 * 4 : 0);
}

static void test_memory_layout(void) {
  test_wan big, small;
  test_wan_make(&big, 1);
  test_wan_make(&small, 0);
  plan_workload w = {81, 480, 832, 2, 512, 0, 0};
  const int64_t L = 32760;
  struct {
    test_wan *t;
    int order, nb, prev, next, first, last;
    int64_t rows;
    int nbuf;
    uint64_t total;
  } cases[] = {
      /* 14B, a middle stage of 20 blocks, micro: 3 buffers */
      {&big, PLAN_ORDER_MICRO, 20, 1, 1, 0, 0, L, 3, 4712940544ull},
      /* 14B, the first of several stages, block-major, 8192-row chunks: 2 buffers */
      {&big, PLAN_ORDER_BLOCK, 20, 0, 1, 1, 0, 8192, 2, 2822759424ull},
      /* 14B on one rank, block-major: 2 buffers, both ends */
      {&big, PLAN_ORDER_BLOCK, 40, 0, 0, 1, 1, L, 2, 4483318784ull},
      /* 1.3B on one rank, micro: 1 buffer */
      {&small, PLAN_ORDER_MICRO, 30, 0, 0, 1, 1, L, 1, 1422199808ull},
      /* 1.3B, the last stage, block-major, 4096-row chunks: 3 buffers */
      {&small, PLAN_ORDER_BLOCK, 15, 1, 0, 0, 1, 4096, 3, 990891008ull},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const plan_model *m = &cases[i].t->m;
    uint64_t got = plan_act_bytes(m, &w, &(plan_stage_desc){.order = cases[i].order,
        .first_block = 0, .last_block = (cases[i].nb) - 1, .has_prev = cases[i].prev,
        .has_next = cases[i].next, .has_embed = cases[i].first, .has_head = cases[i].last,
        .chunk_rows = cases[i].rows, .simple_attn = 0});
    uint64_t want = hand((uint64_t)m->dim, (uint64_t)m->ffn_dim, cases[i].nbuf,
                         (uint64_t)cases[i].nb, (uint64_t)cases[i].rows, cases[i].first,
                         cases[i].first || cases[i].last);
    CHECK(want == cases[i].total, "case %zu: the two hand computations differ (%llu, %llu)", i,
          (unsigned long long)want, (unsigned long long)cases[i].total);
    CHECK(got == want, "case %zu: plan_act_bytes %llu, by hand %llu", i, (unsigned long long)got,
          (unsigned long long)want);
  }
  /* the context length of a prompt does not change the layout: C = text_len */
  plan_workload shortctx = w;
  shortctx.context_len = 77;
  CHECK(plan_act_bytes(&big.m, &shortctx, &(plan_stage_desc){.order = PLAN_ORDER_MICRO,
      .first_block = 0, .last_block = 19, .has_prev = 1, .has_next = 1, .has_embed = 0,
      .has_head = 0, .chunk_rows = L, .simple_attn = 0}) == 4712940544ull,
        "context_len changed the layout");
}

/* Structure over random models and workloads: what each term adds. */
static void test_memory(void) {
  test_wan t;
  test_wan_make(&t, (int)(sp_rand_u64() % 2));
  int64_t M = sp_rand_int(1, 4);
  plan_workload w = {1 + 4 * sp_rand_int(0, 20), 16 * sp_rand_int(16, 52), 16 * sp_rand_int(16, 52), (int)M, 512, 0, 0};
  int64_t L = plan_tokens(&w), D = t.m.dim;
  int nb = (int)sp_rand_int(1, 20);
  int order = sp_rand_u64() % 2 ? PLAN_ORDER_MICRO : PLAN_ORDER_BLOCK;
  long long buf = (long long)(L * D * 4 + 7 * D * 4);
  uint64_t base = plan_act_bytes(&t.m, &w, &(plan_stage_desc){.order = order, .first_block = 0,
      .last_block = nb - 1, .has_prev = 0, .has_next = 0, .has_embed = 0, .has_head = 0,
      .chunk_rows = L, .simple_attn = 0});
  /* a previous stage adds one buffer in either order; a next one adds a
   * send buffer only micro-batch-major */
  uint64_t prev = plan_act_bytes(&t.m, &w, &(plan_stage_desc){.order = order, .first_block = 0,
      .last_block = nb - 1, .has_prev = 1, .has_next = 0, .has_embed = 0, .has_head = 0,
      .chunk_rows = L, .simple_attn = 0});
  uint64_t both = plan_act_bytes(&t.m, &w, &(plan_stage_desc){.order = order, .first_block = 0,
      .last_block = nb - 1, .has_prev = 1, .has_next = 1, .has_embed = 0, .has_head = 0,
      .chunk_rows = L, .simple_attn = 0});
  CHECK((long long)(prev - base) == buf, "receive buffer");
  CHECK((long long)(both - prev) == (order == PLAN_ORDER_MICRO ? buf : 0), "send buffer");
  /* block-major holds M buffers where micro-batch-major holds one */
  uint64_t micro = plan_act_bytes(&t.m, &w, &(plan_stage_desc){.order = PLAN_ORDER_MICRO,
      .first_block = 0, .last_block = nb - 1, .has_prev = 0, .has_next = 0, .has_embed = 0,
      .has_head = 0, .chunk_rows = L, .simple_attn = 0});
  uint64_t block = plan_act_bytes(&t.m, &w, &(plan_stage_desc){.order = PLAN_ORDER_BLOCK,
      .first_block = 0, .last_block = nb - 1, .has_prev = 0, .has_next = 0, .has_embed = 0,
      .has_head = 0, .chunk_rows = L, .simple_attn = 0});
  CHECK((long long)(block - micro) == (M - 1) * buf, "block-major buffers");
  /* each block adds its context k, v: 2 x [512, D] bf16 per micro-batch */
  uint64_t more = plan_act_bytes(&t.m, &w, &(plan_stage_desc){.order = order, .first_block = 0,
      .last_block = nb, .has_prev = 0, .has_next = 0, .has_embed = 0, .has_head = 0,
      .chunk_rows = L, .simple_attn = 0});
  CHECK((long long)(more - base) == (long long)(M * 2 * 512 * D * 2),
        "context k/v per block: %llu", (unsigned long long)(more - base));
  /* chunking never increases, and smaller chunks shrink it */
  uint64_t ch = plan_act_bytes(&t.m, &w, &(plan_stage_desc){.order = order, .first_block = 0,
      .last_block = nb - 1, .has_prev = 0, .has_next = 0, .has_embed = 0, .has_head = 0,
      .chunk_rows = 64, .simple_attn = 0});
  CHECK(ch < base, "chunked %llu >= unchunked %llu", (unsigned long long)ch,
        (unsigned long long)base);
  /* more tokens, more memory; the ends add their latent buffers once; the
   * first stage adds the text MLP's hidden */
  plan_workload w2 = w;
  w2.frames += 4;
  CHECK(plan_act_bytes(&t.m, &w2, &(plan_stage_desc){.order = order, .first_block = 0,
      .last_block = nb - 1, .has_prev = 0, .has_next = 0, .has_embed = 0, .has_head = 0,
      .chunk_rows = plan_tokens(&w2), .simple_attn = 0}) > base, "more frames");
  uint64_t ends = (uint64_t)(2 * L * 64 * 4);
  uint64_t head = plan_act_bytes(&t.m, &w, &(plan_stage_desc){.order = order, .first_block = 0,
      .last_block = nb - 1, .has_prev = 0, .has_next = 0, .has_embed = 0, .has_head = 1,
      .chunk_rows = L, .simple_attn = 0});
  uint64_t embed = plan_act_bytes(&t.m, &w, &(plan_stage_desc){.order = order, .first_block = 0,
      .last_block = nb - 1, .has_prev = 0, .has_next = 0, .has_embed = 1, .has_head = 0,
      .chunk_rows = L, .simple_attn = 0});
  uint64_t one = plan_act_bytes(&t.m, &w, &(plan_stage_desc){.order = order, .first_block = 0,
      .last_block = nb - 1, .has_prev = 0, .has_next = 0, .has_embed = 1, .has_head = 1,
      .chunk_rows = L, .simple_attn = 0});
  CHECK(head - base == ends, "head buffers");
  CHECK(embed - base == ends + (uint64_t)(512 * D * 2), "embed buffers");
  CHECK(one == embed, "a stage with both ends holds the latent buffers once");
}

int main(void) {
  sp_test_begin("test_model");
  test_tokens_flops();
  test_act_buffers();
  test_memory_layout();
  for (int i = 0; i < 200; i++) {
    test_stage_time();
    test_block_major_time();
    test_memory();
  }
  return sp_test_end();
}
