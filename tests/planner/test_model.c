/* The model of a rank: token counts and FLOPs against the published Wan 2.1
 * facts (MODEL-WAN21.md "Cost"), the time model against closed forms, the
 * memory model's structure (what each buffer adds). */
#include <math.h>

#include "plan_test.h"

static int close_rel(double a, double b, double tol) { return fabs(a - b) <= tol * fabs(b); }

static void test_tokens_flops(void) {
  plan_workload w = {81, 480, 832, 1, 512};
  CHECK(plan_tokens(&w) == 32760, "480x832x81 -> %lld", (long long)plan_tokens(&w));
  plan_workload w7 = {81, 720, 1280, 1, 512};
  CHECK(plan_tokens(&w7) == 75600, "720x1280x81 -> %lld", (long long)plan_tokens(&w7));
  plan_workload w1 = {1, 480, 832, 1, 512};
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
  test_wan_make(&t, (int)(rnd() % 2));
  plan_options o;
  plan_options_default(&o);
  o.gpu_tflops = 200.0 + 800.0 * rnd_unit();
  o.host_link_gbs = 5.0 + 50.0 * rnd_unit();
  plan_workload w = {1 + 4 * rnd_in(0, 20), 16 * rnd_in(16, 52), 16 * rnd_in(16, 52), 1, 512};
  double L = (double)plan_tokens(&w), D = (double)t.m.dim, F = (double)t.m.ffn_dim;
  double speed = 0.25 + 2.0 * rnd_unit();
  double blk = (12 * L * D * D + 4 * L * D * F + 4 * L * L * D + 4 * L * 512 * D) /
               (o.gpu_tflops * 1e12 * speed) * 1e3;
  int n = (int)rnd_in(2, t.m.num_blocks);
  uint8_t none[64] = {0};
  double ms = plan_stage_ms(&t.m, &w, &o, speed, 0, n - 1, none, 2, 0, 0, 0);
  CHECK(close_rel(ms, n * blk, 1e-9), "%d resident blocks: %.6f ms, want %.6f", n, ms, n * blk);
  double with_recv = plan_stage_ms(&t.m, &w, &o, speed, 0, n - 1, none, 2, 1, 0, 0);
  double recv = (L * D * 4.0 + 7 * D * 4.0) / (o.peer_link_gbs * 1e9) * 1e3;
  CHECK(close_rel(with_recv, n * blk + recv, 1e-9), "receive adds %.6f ms", with_recv - ms);

  /* one streamed block at the end: its copy hides behind n-1 blocks, so it
   * costs max(compute, copy - (n-1) compute) more only when the copy is longer */
  double copy = (double)t.m.block_bytes[0] / (o.host_link_gbs * 1e9) * 1e3;
  uint8_t last[64] = {0};
  last[n - 1] = 1;
  double ms1 = plan_stage_ms(&t.m, &w, &o, speed, 0, n - 1, last, 2, 0, 0, 0);
  double want1 = fmax((n - 1) * blk, copy) + blk;
  CHECK(close_rel(ms1, want1, 1e-9), "streamed last: %.6f, want %.6f", ms1, want1);

  /* every block streamed, a link so slow that copies dominate: n copies
   * back to back, then the last block's compute */
  plan_options slow = o;
  slow.host_link_gbs = 0.01;
  uint8_t all[64];
  memset(all, 1, sizeof all);
  double cslow = (double)t.m.block_bytes[0] / (slow.host_link_gbs * 1e9) * 1e3;
  double msa = plan_stage_ms(&t.m, &w, &slow, speed, 0, n - 1, all, 2, 0, 0, 0);
  CHECK(close_rel(msa, n * cslow + blk, 1e-9), "copy-bound: %.3f, want %.3f", msa,
        n * cslow + blk);
  /* a link so fast that every copy hides behind the block before it: the
   * resident time plus only the first copy (nothing runs before it) */
  plan_options fast = o;
  fast.host_link_gbs = 1e9;
  double first_copy = (double)t.m.block_bytes[0] / (fast.host_link_gbs * 1e9) * 1e3;
  double msf = plan_stage_ms(&t.m, &w, &fast, speed, 0, n - 1, all, 2, 0, 0, 0);
  CHECK(close_rel(msf, n * blk + first_copy, 1e-9), "fast copies: %.9f, want %.9f", msf,
        n * blk + first_copy);
  /* one slot cannot overlap a copy with the block before it */
  double d1 = plan_stage_ms(&t.m, &w, &o, speed, 0, n - 1, all, 1, 0, 0, 0);
  double d2 = plan_stage_ms(&t.m, &w, &o, speed, 0, n - 1, all, 2, 0, 0, 0);
  CHECK(close_rel(d1, n * (copy + blk), 1e-9), "depth 1: %.3f, want %.3f", d1, n * (copy + blk));
  CHECK(d2 <= d1 + 1e-9, "depth 2 slower than depth 1");
  /* twice the speed halves a compute-bound stage */
  double fast2 = plan_stage_ms(&t.m, &w, &o, 2 * speed, 0, n - 1, none, 2, 0, 0, 0);
  CHECK(close_rel(fast2, ms / 2, 1e-9), "speed scaling");
}

static void test_memory(void) {
  test_wan t;
  test_wan_make(&t, (int)(rnd() % 2));
  int64_t M = rnd_in(1, 4);
  plan_workload w = {1 + 4 * rnd_in(0, 20), 16 * rnd_in(16, 52), 16 * rnd_in(16, 52), (int)M, 512};
  int64_t L = plan_tokens(&w), D = t.m.dim;
  int nb = (int)rnd_in(1, 20);
  uint64_t base = plan_act_bytes(&t.m, &w, nb, 0, 0, 0, 0, L, L, L);
  /* each neighbour adds one fp32 [L, D] buffer (receive / send) */
  uint64_t prev = plan_act_bytes(&t.m, &w, nb, 1, 0, 0, 0, L, L, L);
  uint64_t both = plan_act_bytes(&t.m, &w, nb, 1, 1, 0, 0, L, L, L);
  CHECK(llabs((long long)(prev - base) - (long long)(L * D * 4)) <= 1, "receive buffer");
  CHECK(llabs((long long)(both - prev) - (long long)(L * D * 4)) <= 1, "send buffer");
  /* each block adds its context k, v: 2 x [512, D] bf16 per micro-batch */
  uint64_t more = plan_act_bytes(&t.m, &w, nb + 1, 0, 0, 0, 0, L, L, L);
  CHECK(llabs((long long)(more - base) - (long long)(M * 2 * 512 * D * 2)) <= 1,
        "context k/v per block: %llu", (unsigned long long)(more - base));
  /* unchunked, the transient is at least the FFN hidden [L, ffn] bf16 or the
   * full k, v [L, D] bf16 x 2, whichever is larger */
  double lower = (double)L * D * 4 + fmax((double)L * t.m.ffn_dim * 2, 2.0 * L * D * 2);
  CHECK((double)base >= lower, "activations %llu below %g", (unsigned long long)base, lower);
  /* chunking never increases, and smaller chunks shrink it */
  uint64_t ch = plan_act_bytes(&t.m, &w, nb, 0, 0, 0, 0, 64, 64, 64);
  CHECK(ch < base, "chunked %llu >= unchunked %llu", (unsigned long long)ch,
        (unsigned long long)base);
  /* more tokens, more memory; the ends add their buffers */
  plan_workload w2 = w;
  w2.frames += 4;
  CHECK(plan_act_bytes(&t.m, &w2, nb, 0, 0, 0, 0, plan_tokens(&w2), plan_tokens(&w2),
                       plan_tokens(&w2)) > base,
        "more frames");
  CHECK(plan_act_bytes(&t.m, &w, nb, 0, 0, 1, 0, L, L, L) > base, "embed buffers");
  CHECK(plan_act_bytes(&t.m, &w, nb, 0, 0, 0, 1, L, L, L) > base, "head buffers");
}

int main(void) {
  test_seed("test_model");
  test_tokens_flops();
  for (int i = 0; i < 200; i++) {
    test_stage_time();
    test_memory();
  }
  return test_done("test_model");
}
