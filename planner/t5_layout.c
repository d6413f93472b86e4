/* The CUDA text encoder's device layout (t5_layout.h): a bump allocation,
 * every buffer at the next multiple of PLAN_LAYOUT_ALIGN. Notation: L the
 * longest sequence's tokens, D dim, A dim_attn, F ffn. */
#include "t5_layout.h"

#include <string.h>

#include "layout.h"
#include "plan.h"
#include "plan_strbuf.h"

static const char *const names[PLAN_T5_KINDS] = {
    [PLAN_T5_LAYER] = "layer weights",
    [PLAN_T5_NORM] = "final norm",
    [PLAN_T5_X] = "residual stream",
    [PLAN_T5_XN] = "normed input",
    [PLAN_T5_Q] = "q",
    [PLAN_T5_K] = "k",
    [PLAN_T5_V] = "v",
    [PLAN_T5_ATT] = "attention output",
    [PLAN_T5_GATE] = "ffn gate",
    [PLAN_T5_FC1] = "ffn fc1",
    [PLAN_T5_HIDDEN] = "ffn hidden",
    [PLAN_T5_BUCKET] = "position buckets",
    [PLAN_T5_GEMM_WS] = "cublaslt workspace",
};

const char *plan_t5_buf_name(plan_t5_buf k) {
  return (int)k >= 0 && k < PLAN_T5_KINDS ? names[k] : "?";
}

/* Widths are bounded so that every product below stays under 2^62. */
#define MAX_WIDTH ((int64_t)1 << 20)

static void put(plan_t5_layout *l, plan_t5_buf kind, int index, uint64_t bytes) {
  plan_t5_buffer *b = &l->b[l->count++];
  b->kind = kind;
  b->index = index;
  b->offset = l->total;
  b->bytes = bytes;
  l->total = plan_layout_align(l->total + bytes);
}

int plan_t5_layout_make(const plan_t5_shape *s, plan_t5_layout *out, char *err,
                        size_t errlen) {
  if (s->dim < 1 || s->dim_attn < 1 || s->ffn < 1 || s->dim > MAX_WIDTH ||
      s->dim_attn > MAX_WIDTH || s->ffn > MAX_WIDTH)
    return plan_fail(err, errlen, "t5 layout: widths dim %lld, dim_attn %lld, ffn %lld are "
                     "outside 1..%lld", (long long)s->dim, (long long)s->dim_attn,
                     (long long)s->ffn, (long long)MAX_WIDTH);
  if (s->layers < 1 || s->layers > PLAN_T5_MAX_LAYERS || s->max_len < 1 ||
      s->max_len > PLAN_T5_MAX_LEN)
    return plan_fail(err, errlen, "t5 layout: %lld layers and %lld tokens are outside 1..%d "
                     "and 1..%d", (long long)s->layers, (long long)s->max_len,
                     PLAN_T5_MAX_LAYERS, PLAN_T5_MAX_LEN);
  if (s->layer_bytes < 1 || s->layer_bytes > (UINT64_MAX >> 8) / PLAN_T5_MAX_LAYERS)
    return plan_fail(err, errlen, "t5 layout: a layer of %llu bytes",
                     (unsigned long long)s->layer_bytes);
  memset(out, 0, sizeof *out);
  const uint64_t L = (uint64_t)s->max_len, D = (uint64_t)s->dim, A = (uint64_t)s->dim_attn,
                 F = (uint64_t)s->ffn;
  for (int i = 0; i < (int)s->layers; i++) put(out, PLAN_T5_LAYER, i, s->layer_bytes);
  put(out, PLAN_T5_NORM, 0, D * 2);
  put(out, PLAN_T5_X, 0, L * D * 4);
  put(out, PLAN_T5_XN, 0, L * D * 2);
  put(out, PLAN_T5_Q, 0, L * A * 2);
  put(out, PLAN_T5_K, 0, L * A * 2);
  put(out, PLAN_T5_V, 0, L * A * 2);
  put(out, PLAN_T5_ATT, 0, L * A * 2);
  put(out, PLAN_T5_GATE, 0, L * F * 4);
  put(out, PLAN_T5_FC1, 0, L * F * 4);
  put(out, PLAN_T5_HIDDEN, 0, L * F * 2);
  put(out, PLAN_T5_BUCKET, 0, (2 * L - 1) * 4);
  put(out, PLAN_T5_GEMM_WS, 0, PLAN_T5_GEMM_WS_BYTES);
  return PLAN_OK;
}

const plan_t5_buffer *plan_t5_layout_find(const plan_t5_layout *l, plan_t5_buf kind,
                                          int index) {
  for (int i = 0; i < l->count; i++)
    if (l->b[i].kind == kind && l->b[i].index == index) return &l->b[i];
  return NULL;
}
