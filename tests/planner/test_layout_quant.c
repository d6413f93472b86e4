/* Quantized weights in the CUDA stage's layout (layout.h, MODEL.md
 * "Quantized weights on the GPU"), after every other buffer (a plain bf16
 * layout's, then the bypassed LoRAs' pairs, one buffer per block, and at
 * W8A8 their (max(rows, text_len), rank) A x):
 *   - weight-only: one buffer of plan_model.dequant_bytes, with bypassed
 *     LoRAs at bf16 precision plus dim x max(dim, ffn_dim) bf16 (the copy a
 *     weight is merged with its pairs into, MODEL.md "LoRA");
 *   - W8A8: the input codes (max(rows, text_len), max(dim, ffn_dim)) of one
 *     byte each, their fp32 scales (max(rows, text_len)), with bypassed
 *     LoRAs the codes dequantised to bf16 (the same shape), with the
 *     epilogue the fp32 products (max(rows x ffn_dim, text_len x dim));
 * rows the chunk rows (or all tokens). The planner's activation bytes grow
 * by exactly what the layout adds; a plan's binary form carries the
 * epilogue flag to every rank. The sizes here come from MODEL.md's shapes
 * (a linear layer's input is dim or ffn_dim wide; the context has
 * text_len rows). */
#include "layout.h"
#include "plan_test.h"

static uint64_t aligned(uint64_t x) {
  return (x + PLAN_LAYOUT_ALIGN - 1) / PLAN_LAYOUT_ALIGN * PLAN_LAYOUT_ALIGN;
}

/* The buffer of kind k at the aligned end (*end), bytes long. */
static void expect_next(const plan_layout *l, plan_buf k, uint64_t bytes, uint64_t *end,
                        const char *what) {
  const plan_buffer *p = plan_layout_find(l, k, 0);
  CHECK(p && p->bytes == bytes && p->offset == aligned(*end),
        "%s: %llu bytes at %llu, want %llu at %llu", what, p ? (unsigned long long)p->bytes : 0ull,
        p ? (unsigned long long)p->offset : 0ull, (unsigned long long)bytes,
        (unsigned long long)aligned(*end));
  *end = aligned(*end) + bytes;
}

static void test_case(int big, int w8a8, int epilogue, int64_t lora_rank, int64_t chunk_rows,
                      uint64_t dequant) {
  test_wan t;
  test_wan_make(&t, big);
  const plan_workload w = {.frames = 81, .height = 480, .width = 832, .micro_batches = 2,
                           .context_len = 512};
  const plan_rank q = {.first_block = 0, .last_block = 3, .has_embed = 1, .has_head = 1,
                       .order = PLAN_ORDER_MICRO, .chunk_rows = chunk_rows};
  static plan_layout base, with;
  plan_stage_shape s;
  char err[256] = "";
  plan_stage_shape_of(&t.m, &w, &q, NULL, 0, &s);
  CHECK(plan_layout_make(&s, &base, err, sizeof err) == PLAN_OK, "bf16: %s", err);
  const uint64_t act0 = plan_act_bytes(&t.m, &w, &(plan_stage_desc){.order = PLAN_ORDER_MICRO,
      .first_block = 0, .last_block = 3, .has_prev = 0, .has_next = 0, .has_embed = 1,
      .has_head = 1, .chunk_rows = chunk_rows, .simple_attn = 0});
  t.m.w8a8 = w8a8;
  t.m.w8a8_epilogue = epilogue;
  t.m.dequant_bytes = dequant;
  if (lora_rank) {
    t.m.lora_block_elems = 1000;
    t.m.lora_rank = lora_rank;
  }
  plan_stage_shape_of(&t.m, &w, &q, NULL, 0, &s);
  CHECK(plan_layout_make(&s, &with, err, sizeof err) == PLAN_OK, "quantized: %s", err);
  const int64_t L = plan_tokens(&w), R = chunk_rows > 0 && chunk_rows < L ? chunk_rows : L;
  const uint64_t D = (uint64_t)t.m.dim, F = (uint64_t)t.m.ffn_dim, C = (uint64_t)t.m.text_len;
  const uint64_t rows = (uint64_t)R > C ? (uint64_t)R : C, k = F > D ? F : D;
  uint64_t end = base.total;
  for (int b = 0; b < 4 && lora_rank; b++) { /* the pairs' buffers, bf16 */
    const plan_buffer *p = plan_layout_find(&with, PLAN_BUF_LORA_W, b);
    CHECK(p && p->bytes == 1000 * 2 && p->offset == aligned(end), "block %d's pairs", b);
    end = aligned(end) + 1000 * 2;
  }
  if (lora_rank && w8a8)
    expect_next(&with, PLAN_BUF_LORA_T, rows * (uint64_t)lora_rank * 2, &end, "pairs' A x");
  CHECK((plan_layout_find(&with, PLAN_BUF_LORA_T, 0) != NULL) == (w8a8 && lora_rank),
        "the pairs' A x only with W8A8 and LoRAs");
  const uint64_t merge = lora_rank && !w8a8 ? D * k * 2 : 0; /* the largest linear weight */
  /* merged from the dequantised copy into its own, at the next aligned offset */
  const uint64_t scratch = merge ? aligned(dequant) + merge : dequant;
  if (scratch) expect_next(&with, PLAN_BUF_DEQUANT, scratch, &end, "dequantised or merged weight");
  if (w8a8) {
    expect_next(&with, PLAN_BUF_XQ, rows * k, &end, "input codes");
    expect_next(&with, PLAN_BUF_XS, rows * 4, &end, "input scales");
    if (lora_rank) expect_next(&with, PLAN_BUF_XHAT, rows * k * 2, &end, "input dequantised");
    const uint64_t acc = (uint64_t)R * F > C * D ? (uint64_t)R * F : C * D;
    if (epilogue) expect_next(&with, PLAN_BUF_W8A8_ACC, acc * 4, &end, "products");
  }
  CHECK((plan_layout_find(&with, PLAN_BUF_XHAT, 0) != NULL) == (w8a8 && lora_rank),
        "the dequantised input only with W8A8 and LoRAs");
  CHECK((plan_layout_find(&with, PLAN_BUF_W8A8_ACC, 0) != NULL) == (w8a8 && epilogue),
        "the products scratch only with W8A8's epilogue");
  CHECK(with.total == end, "total %llu, want %llu", (unsigned long long)with.total,
        (unsigned long long)end);
  const uint64_t act1 = plan_act_bytes(&t.m, &w, &(plan_stage_desc){.order = PLAN_ORDER_MICRO,
      .first_block = 0, .last_block = 3, .has_prev = 0, .has_next = 0, .has_embed = 1,
      .has_head = 1, .chunk_rows = chunk_rows, .simple_attn = 0});
  CHECK(act1 - act0 == with.total - base.total, "planner's bytes grow by %llu, the layout's by %llu",
        (unsigned long long)(act1 - act0), (unsigned long long)(with.total - base.total));
  printf("%s, w8a8 %d, epilogue %d, LoRA rank %lld, %lld rows, dequant %.1f MB: stage +%.1f MB "
         "(quantization and LoRAs)\n",
         big ? "14B" : "1.3B", w8a8, epilogue, (long long)lora_rank, (long long)R,
         (double)dequant / 1e6, (double)(with.total - base.total) / 1e6);
}

/* A plan of an epilogue model says so, in its binary form too. */
static void test_wire(void) {
  test_wan t;
  test_wan_make(&t, 0);
  t.m.w8a8 = PLAN_W8A8_INT8;
  t.m.w8a8_epilogue = 1;
  const plan_workload w = {.frames = 17, .height = 96, .width = 128, .micro_batches = 2,
                           .context_len = 512};
  plan_device devs[2];
  test_device(&devs[0], "gpu0", 64, 1.0);
  test_device(&devs[1], "gpu1", 64, 1.0);
  plan_budget b;
  plan_options o;
  plan_options_default(&o);
  static plan p, back;
  static uint8_t wire[PLAN_WIRE_MAX];
  size_t n = 0;
  char err[4096];
  CHECK(plan_budget_parse(NULL, 2, &b, err, sizeof err) == PLAN_OK &&
            plan_make(&(plan_inputs){&t.m, devs, 2, &b, &w, &o}, &p, err, sizeof err) == PLAN_OK &&
            plan_encode(&p, wire, sizeof wire, &n, err, sizeof err) == PLAN_OK &&
            plan_decode(wire, n, &back, err, sizeof err) == PLAN_OK,
        "plan, encode, decode: %s", err);
  CHECK(p.w8a8_epilogue == 1 && back.w8a8_epilogue == 1, "the epilogue flag through the wire");
}

int main(void) {
  sp_test_begin("test_layout_quant");
  test_case(1, PLAN_W8A8_FP8, 0, 0, 0, 0);
  test_case(1, PLAN_W8A8_FP8, 1, 0, 0, 0);
  test_case(1, PLAN_W8A8_INT8, 1, 64, 4096, 0);
  test_case(0, PLAN_W8A8_FP8, 0, 32, 300, 0);
  test_case(1, PLAN_W8A8_NONE, 0, 0, 0, 5120ull * 13824 * 2);
  test_case(0, PLAN_W8A8_NONE, 0, 16, 2048, 1536ull * 8960 * 2);
  test_case(1, PLAN_W8A8_NONE, 0, 64, 0, 0);             /* pairs merged into a bf16 copy */
  test_case(0, PLAN_W8A8_NONE, 0, 8, 0, 1536ull * 1536 * 2); /* dequantised, then merged */
  test_case(0, PLAN_W8A8_NONE, 0, 8, 0, 1000);  /* the merged copy at the next aligned offset */
  test_wire();
  return sp_test_end();
}
