/* The CUDA text encoder's device layout (planner/t5_layout.h) against the
 * encoder's buffers written out here, one by one, from UMT5.md's forward:
 * every layer's weights (bf16, its ten tensors each padded to 64
 * elements), the final norm (dim bf16), the residual stream x (L, dim)
 * fp32, the normed input (L, dim) bf16, q, k, v and the attention output
 * (L, dim_attn) bf16 each, the FFN's gate and fc1 outputs (L, ffn) fp32,
 * its hidden gelu(gate) * fc1 (L, ffn) bf16, the position buckets (2 L - 1)
 * int32 and the 32 MiB cuBLASLt workspace, each at the next multiple of
 * 256 bytes, in that order.
 *
 * For the published umt5-xxl at 1, 77 and 512 tokens, umt5-tiny (width
 * 4096, dim_attn 64 in 4 heads, feed-forward 128, 2 layers) and random
 * shapes: the layout's buffers,
 * offsets and total equal that list; no two overlap; the published
 * encoder at 512 tokens takes exactly 24 layers of 192,948,224 bf16 values,
 * the norm, 78 MiB of activations, 4 KiB of buckets and the workspace
 * (every buffer a multiple of 256 bytes there, so no padding). Shapes no
 * encoder has are refused with a message. */
#include <string.h>

#include "layout.h"
#include "plan.h"
#include "sp_test.h"
#include "t5_layout.h"

typedef struct encoder {
  int64_t dim, dim_attn, ffn, heads, buckets, layers;
} encoder;

static uint64_t pad64(uint64_t n) { return (n + 63) / 64 * 64; }
static uint64_t align256(uint64_t n) { return (n + 255) / 256 * 256; }

/* One layer's bf16 bytes: norm1, q, k, v, o, norm2, gate, fc1, fc2, pos. */
static uint64_t layer_bytes(const encoder *e) {
  const uint64_t D = (uint64_t)e->dim, A = (uint64_t)e->dim_attn, F = (uint64_t)e->ffn;
  return 2 * (pad64(D) + 4 * pad64(A * D) + pad64(D) + 3 * pad64(F * D) +
              pad64((uint64_t)(e->buckets * e->heads)));
}

static plan_t5_shape shape_of(const encoder *e, int64_t L) {
  return (plan_t5_shape){.dim = e->dim, .dim_attn = e->dim_attn, .ffn = e->ffn,
                         .layers = e->layers, .max_len = L, .layer_bytes = layer_bytes(e)};
}

/* The reference: every buffer's bytes in order. */
static int reference(const encoder *e, int64_t L, uint64_t *bytes) {
  const uint64_t D = (uint64_t)e->dim, A = (uint64_t)e->dim_attn, F = (uint64_t)e->ffn,
                 T = (uint64_t)L;
  int n = 0;
  for (int64_t l = 0; l < e->layers; l++) bytes[n++] = layer_bytes(e);
  const uint64_t rest[] = {D * 2,     T * D * 4, T * D * 2, T * A * 2, T * A * 2,
                           T * A * 2, T * A * 2, T * F * 4, T * F * 4, T * F * 2,
                           (2 * T - 1) * 4, (uint64_t)32 << 20};
  for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) bytes[n++] = rest[i];
  return n;
}

static void check(const encoder *e, int64_t L, const char *what) {
  plan_t5_shape s = shape_of(e, L);
  plan_t5_layout lay;
  char err[256] = "";
  if (plan_t5_layout_make(&s, &lay, err, sizeof err) != PLAN_OK) {
    CHECK(0, "%s, %lld tokens: refused: %s", what, (long long)L, err);
    return;
  }
  uint64_t want[PLAN_T5_MAX_LAYERS + PLAN_T5_KINDS];
  const int n = reference(e, L, want);
  CHECK(lay.count == n, "%s: %d buffers, want %d", what, lay.count, n);
  uint64_t at = 0;
  for (int i = 0; i < n && i < lay.count; i++) {
    const plan_t5_buffer *b = &lay.b[i];
    const plan_t5_buf kind = i < e->layers ? PLAN_T5_LAYER : (plan_t5_buf)(i - e->layers + 1);
    CHECK(b->kind == kind && b->index == (i < e->layers ? i : 0),
          "%s: buffer %d is %s %d, want %s", what, i, plan_t5_buf_name(b->kind), b->index,
          plan_t5_buf_name(kind));
    CHECK(b->bytes == want[i] && b->offset == at && b->offset % 256 == 0,
          "%s, %lld tokens: %s %d at %llu, %llu bytes; want at %llu, %llu bytes", what,
          (long long)L, plan_t5_buf_name(b->kind), b->index, (unsigned long long)b->offset,
          (unsigned long long)b->bytes, (unsigned long long)at, (unsigned long long)want[i]);
    CHECK(plan_t5_layout_find(&lay, b->kind, b->index) == b, "%s: find %s %d", what,
          plan_t5_buf_name(b->kind), b->index);
    at = align256(at + want[i]);
  }
  CHECK(lay.total == at, "%s, %lld tokens: total %llu, want %llu", what, (long long)L,
        (unsigned long long)lay.total, (unsigned long long)at);
  for (int i = 1; i < lay.count; i++)
    CHECK(lay.b[i - 1].offset + lay.b[i - 1].bytes <= lay.b[i].offset, "%s: %d overlaps %d",
          what, i - 1, i);
}

static void check_published(void) {
  const encoder xxl = {4096, 4096, 10240, 64, 32, 24};
  check(&xxl, 1, "umt5-xxl");
  check(&xxl, 77, "umt5-xxl");
  check(&xxl, 512, "umt5-xxl");
  /* At 512 tokens nothing needs padding: the bytes themselves. */
  const uint64_t D = 4096, A = 4096, F = 10240, L = 512;
  const uint64_t layer = 2 * (2 * D + 4 * A * D + 3 * F * D + 32 * 64);
  CHECK(layer == 2 * 192948224ull, "umt5-xxl layer %llu bytes", (unsigned long long)layer);
  const uint64_t act = L * D * 4 + L * D * 2 + 4 * L * A * 2 + 2 * L * F * 4 + L * F * 2;
  CHECK(act == 78ull << 20, "umt5-xxl activations %llu bytes", (unsigned long long)act);
  plan_t5_shape s = shape_of(&xxl, 512);
  plan_t5_layout lay;
  char err[256];
  CHECK(plan_t5_layout_make(&s, &lay, err, sizeof err) == PLAN_OK &&
            lay.total == 24 * layer + D * 2 + act + 4096 + (32ull << 20),
        "umt5-xxl at 512 tokens: %llu bytes", (unsigned long long)lay.total);
  const encoder tiny = {4096, 64, 128, 4, 32, 2};
  for (int64_t L2 = 1; L2 <= 512; L2 = L2 * 3 + 1) check(&tiny, L2, "umt5-tiny");
}

static void check_random(void) {
  for (int k = 0; k < 200; k++) {
    encoder e = {sp_rand_int(1, 2048), sp_rand_int(1, 2048), sp_rand_int(1, 8192),
                 sp_rand_int(1, 64),   2 * sp_rand_int(2, 40), sp_rand_int(1, PLAN_T5_MAX_LAYERS)};
    check(&e, sp_rand_int(1, PLAN_T5_MAX_LEN), "random");
  }
}

static void check_refused(void) {
  const encoder ok = {64, 64, 160, 1, 32, 2};
  const struct {
    const char *what;
    int64_t dim, layers, len;
    uint64_t layer;
  } bad[] = {{"dim 0", 0, 2, 8, 1024},
             {"0 layers", 64, 0, 8, 1024},
             {"65 layers", 64, PLAN_T5_MAX_LAYERS + 1, 8, 1024},
             {"0 tokens", 64, 2, 0, 1024},
             {"513 tokens", 64, 2, PLAN_T5_MAX_LEN + 1, 1024},
             {"empty layers", 64, 2, 8, 0}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    plan_t5_shape s = shape_of(&ok, bad[i].len);
    s.dim = bad[i].dim;
    s.layers = bad[i].layers;
    s.layer_bytes = bad[i].layer;
    plan_t5_layout lay;
    char err[256] = "";
    CHECK(plan_t5_layout_make(&s, &lay, err, sizeof err) == PLAN_EINVAL && err[0],
          "%s: accepted", bad[i].what);
  }
}

int main(void) {
  sp_test_begin("test_t5_layout");
  check_published();
  check_random();
  check_refused();
  return sp_test_end();
}
