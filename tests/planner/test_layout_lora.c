/* Bypassed LoRA pairs in the CUDA stage's layout (layout.h, MODEL.md "LoRA",
 * bypass) at bf16 precision: every block of the stage gets one buffer of
 * the pairs' elements at the operand width per expert (a two-expert
 * model's pairs differ per expert), after every other buffer, then the one
 * scratch a layer's weight is merged with its pairs in (the largest linear
 * weight: dim x max(dim, ffn_dim)); no A x temporary (that is W8A8's,
 * test_layout_quant); the planner's activation bytes grow by exactly what
 * the layout adds; no LoRA leaves the layout as it was. The pairs' sizes
 * here come from MODEL.md's list of a block's linear layers, not from the
 * code that reads LoRA files. */
#include "layout.h"
#include "plan_test.h"

/* Elements of rank-r pairs on every linear layer of a block: 8 (dim x dim)
 * projections, ffn.0 (dim -> ffn_dim) and ffn.2 (ffn_dim -> dim). */
static uint64_t pairs_elems(const plan_model *m, int64_t r) {
  return (uint64_t)r * (uint64_t)(8 * 2 * m->dim + 2 * (m->dim + m->ffn_dim));
}

static uint64_t aligned(uint64_t x) {
  return (x + PLAN_LAYOUT_ALIGN - 1) / PLAN_LAYOUT_ALIGN * PLAN_LAYOUT_ALIGN;
}

static void test_case(int big, int64_t rank, int64_t chunk_rows, int nblocks, int experts) {
  test_wan t;
  test_wan_make(&t, big);
  t.m.experts = experts;
  const plan_workload w = {.frames = 81, .height = 480, .width = 832, .micro_batches = 2,
                           .context_len = 512};
  const plan_rank q = {.first_block = 0, .last_block = nblocks - 1, .has_embed = 1,
                       .has_head = 0, .order = PLAN_ORDER_MICRO, .chunk_rows = chunk_rows};
  static plan_layout base, with;
  plan_stage_shape s;
  char err[256] = "";
  plan_stage_shape_of(&t.m, &w, &q, NULL, 0, &s);
  CHECK(plan_layout_make(&s, &base, err, sizeof err) == PLAN_OK, "no LoRA: %s", err);
  CHECK(plan_layout_find(&base, PLAN_BUF_LORA_W, 0) == NULL &&
            plan_layout_find(&base, PLAN_BUF_LORA_T, 0) == NULL,
        "a layout without LoRA has LoRA buffers");
  const uint64_t act0 =
      plan_act_bytes(&t.m, &w, &(plan_stage_desc){.order = PLAN_ORDER_MICRO, .first_block = 0,
          .last_block = nblocks - 1, .has_prev = 0, .has_next = 1, .has_embed = 1, .has_head = 0,
          .chunk_rows = chunk_rows, .simple_attn = 0});

  t.m.lora_block_elems = pairs_elems(&t.m, rank);
  t.m.lora_rank = rank;
  plan_stage_shape_of(&t.m, &w, &q, NULL, 0, &s);
  CHECK(plan_layout_make(&s, &with, err, sizeof err) == PLAN_OK, "LoRA rank %lld: %s",
        (long long)rank, err);
  const uint64_t a = (uint64_t)t.m.weight_dtype_bytes;
  uint64_t end = base.total;
  for (int b = 0; b < nblocks * experts; b++) {
    const plan_buffer *p = plan_layout_find(&with, PLAN_BUF_LORA_W, b);
    CHECK(p && p->bytes == t.m.lora_block_elems * a && p->offset == aligned(end),
          "block %d of expert %d's pairs: %llu bytes at %llu, want %llu at %llu", b % nblocks,
          b / nblocks,
          p ? (unsigned long long)p->bytes : 0ull, p ? (unsigned long long)p->offset : 0ull,
          (unsigned long long)(t.m.lora_block_elems * a), (unsigned long long)aligned(end));
    end = aligned(end) + t.m.lora_block_elems * a;
  }
  CHECK(plan_layout_find(&with, PLAN_BUF_LORA_T, 0) == NULL, "an A x temporary at bf16");
  const uint64_t D = (uint64_t)t.m.dim, F = (uint64_t)t.m.ffn_dim;
  const uint64_t merge = D * (F > D ? F : D) * a;
  const plan_buffer *mb = plan_layout_find(&with, PLAN_BUF_DEQUANT, 0);
  CHECK(mb && mb->bytes == merge && mb->offset == aligned(end),
        "merge scratch: %llu bytes at %llu, want %llu at %llu",
        mb ? (unsigned long long)mb->bytes : 0ull, mb ? (unsigned long long)mb->offset : 0ull,
        (unsigned long long)merge, (unsigned long long)aligned(end));
  end = aligned(end) + merge;
  CHECK(with.total == end, "total %llu, want %llu", (unsigned long long)with.total,
        (unsigned long long)end);
  const uint64_t act1 =
      plan_act_bytes(&t.m, &w, &(plan_stage_desc){.order = PLAN_ORDER_MICRO, .first_block = 0,
          .last_block = nblocks - 1, .has_prev = 0, .has_next = 1, .has_embed = 1, .has_head = 0,
          .chunk_rows = chunk_rows, .simple_attn = 0});
  CHECK(act1 - act0 == with.total - base.total,
        "planner's bytes grow by %llu, the layout's by %llu", (unsigned long long)(act1 - act0),
        (unsigned long long)(with.total - base.total));
  CHECK(plan_layout_find(&with, PLAN_BUF_LORA_W, nblocks * experts) == NULL,
        "more pairs' buffers than blocks x experts");
  printf("%s, %d expert(s), %d blocks, rank %lld on every linear layer: %.1f MB of pairs per "
         "block, stage +%.1f MB\n", big ? "14B" : "1.3B", experts, nblocks, (long long)rank,
         (double)(t.m.lora_block_elems * a) / 1e6, (double)(with.total - base.total) / 1e6);
}

int main(void) {
  sp_test_begin("test_layout_lora");
  test_case(1, 64, 0, 10, 1);
  test_case(1, 16, 4096, 40, 1);
  test_case(1, 64, 0, 20, 2);
  test_case(0, 8 * sp_rand_int(1, 32), sp_rand_int(0, 1) ? 0 : sp_rand_int(64, 20000),
            (int)sp_rand_int(1, 30), (int)sp_rand_int(1, 2));
  return sp_test_end();
}
