/* The CUDA stage's device layout (planner/layout.h) against the planner's
 * memory model and against the carving the stage did before the layout
 * was one function (written out here, buffer by buffer, as the reference).
 *
 * For the tiny, 1.3B and 14B models, several clip sizes and random ones,
 * 1..4 ranks (so every stage position: only, first, middle, last), both
 * orders, 1..3 micro-batches, forced stream fractions and prefetch depths,
 * row caps, and both attention kinds, every rank of every plan gives a
 * layout whose:
 * - buffers are in carve order, 256-byte aligned, and do not overlap (the
 *   one declared union, k/v or the FFN hidden, is a single buffer big
 *   enough for either);
 * - resident blocks, slots, activation buffers and end-stage buffers are
 *   the ones the rank holds, at the plan's chunk rows;
 * - total equals the plan's peak less its reserve (the arena the planner
 *   counts), and plan_act_bytes plus the aligned weights;
 * - total equals the reference carving (the arena does not change). */
#include <math.h>

#include "layout.h"
#include "plan_test.h"

/* The three presets of wan_config.c as plan_model, block bytes from the
 * published sizes (plan_test.h) and the tiny one from its tensors. */
static void model_make(test_wan *t, int which) {
  if (which > 0) {
    test_wan_make(t, which == 2);
    return;
  }
  test_wan_make(t, 0);
  const int64_t D = 256, F = 640;
  t->m.num_blocks = 4;
  t->m.dim = D;
  t->m.ffn_dim = F;
  t->m.heads = 2;
  /* block: modulation 6D, 8 DxD linears with bias, 4 norms of D, norm3
   * weight and bias, ffn DxF and FxD with biases; bf16 */
  uint64_t blk = (uint64_t)(6 * D + 8 * (D * D + D) + 6 * D + F * D + F + D * F + D) * 2;
  for (int i = 0; i < 4; i++) t->blocks[i] = blk;
  t->m.embed_bytes = (uint64_t)(D * 64 + D + 4096 * D + D + D * D + D + 256 * D + D + D * D + D +
                                6 * D * D + 6 * D) * 2;
  t->m.head_bytes = (uint64_t)(2 * D + 64 * D + 64) * 2;
}

/* The stage's carving as it was before it used the layout: one bump
 * allocation per buffer, 256-byte aligned, in this order. */
static uint64_t ref_used;
static void ref_take(uint64_t bytes) { ref_used = ((ref_used + 255) & ~(uint64_t)255) + bytes; }

static uint64_t ref_scratch(int64_t chunk, int64_t Lk, int64_t heads) {
  uint64_t rows = (uint64_t)(chunk * heads), ld = (uint64_t)((Lk + 7) / 8 * 8);
  return (rows * ld * 4 + 255) / 256 * 256 + (rows * ld * 2 + 255) / 256 * 256;
}

static uint64_t ref_carve(const plan_stage_shape *s) {
  const int64_t L = s->tokens, D = s->dim, T = s->text_len, hd = s->head_dim, F = s->ffn_dim;
  const int64_t R = s->chunk_rows > 0 && s->chunk_rows < L ? s->chunk_rows : L;
  ref_used = 0;
  if (s->has_embed) ref_take(s->embed_bytes);
  if (s->has_head) ref_take(s->head_bytes);
  int nstreamed = 0;
  for (int b = 0; b < s->nblocks; b++) {
    if (s->streamed && s->streamed[b])
      nstreamed++;
    else
      ref_take(s->block_bytes);
  }
  int depth = 0;
  if (nstreamed) {
    depth = s->prefetch_depth > 0 ? s->prefetch_depth : 2;
    if (depth > nstreamed) depth = nstreamed;
  }
  for (int k = 0; k < depth; k++) ref_take(s->block_bytes);
  uint64_t kv = (uint64_t)s->prompts * (uint64_t)s->nblocks * (uint64_t)(T * D);
  ref_take(kv * 2);
  ref_take(kv * 2);
  const int64_t tt = s->time_tables > 1 ? 2 : 1; /* TI2V: a second e, e0 per message */
  for (int i = 0; i < s->act_buffers; i++) ref_take((uint64_t)(L * D + 7 * D * tt) * 4);
  uint64_t kv_rows = (uint64_t)(L * D) * 2, ffn = (uint64_t)(R * F) * 2;
  ref_take(2 * kv_rows > ffn ? 2 * kv_rows : ffn);
  for (int i = 0; i < 4; i++) ref_take((uint64_t)(R * D) * 2);
  int64_t tw = s->text_dim > D ? s->text_dim : D;
  ref_take((uint64_t)(T * tw) * 2);
  ref_take((uint64_t)(T * D) * 4);
  if (s->has_embed) ref_take((uint64_t)(T * D) * 2);
  ref_take((uint64_t)(L * hd / 2) * 4);
  ref_take((uint64_t)(L * hd / 2) * 4);
  ref_take((uint64_t)(6 * D * tt) * 4);
  ref_take((uint64_t)(2 * D * tt) * 4);
  ref_take((uint64_t)(s->freq_dim + 2 * D) * 4);
  if (s->has_embed || s->has_head) {
    int64_t pmax = (s->in_dim > s->out_dim ? s->in_dim : s->out_dim) * s->patch;
    int64_t cmax = s->in_dim > s->out_dim ? s->in_dim : s->out_dim;
    ref_take((uint64_t)(L * pmax) * 4);
    ref_take((uint64_t)cmax * (uint64_t)s->latent_voxels * 4);
  }
  if (s->simple_attn) {
    int64_t Lk = L > T ? L : T;
    uint64_t per_row = ref_scratch(1, Lk, s->heads);
    int64_t chunk = (int64_t)((1ull << 30) / per_row);
    if (chunk < 1) chunk = 1;
    if (chunk > L) chunk = L;
    ref_take(ref_scratch(chunk, Lk, s->heads));
  }
  return ref_used;
}

static int count_kind(const plan_layout *l, plan_buf k) {
  int n = 0;
  for (int i = 0; i < l->count; i++) n += l->b[i].kind == k;
  return n;
}

static int g_layouts = 0, g_simple = 0, g_streamed = 0, g_chunked = 0;
static int g_pos[4] = {0}; /* only, first, middle, last */

/* Every check of one rank of plan p. */
static void check_rank(const plan_model *m, const plan_workload *w, const plan *p, int r,
                       int simple, const char *what) {
  const plan_rank *q = &p->r[r];
  const uint8_t *flags = &p->streamed[q->first_block];
  plan_stage_shape sh;
  plan_stage_shape_of(m, w, q, flags, simple, &sh);
  static plan_layout l;
  char err[256];
  int rc = plan_layout_make(&sh, &l, err, sizeof err);
  CHECK(rc == PLAN_OK, "%s rank %d: %s", what, r, err);
  if (rc != PLAN_OK) return;
  g_layouts++;
  g_pos[q->has_embed && q->has_head ? 0 : q->has_embed ? 1 : q->has_head ? 3 : 2]++;
  g_simple += simple;
  g_streamed += q->num_streamed > 0;
  g_chunked += q->chunk_rows < p->tokens;
  const int64_t L = p->tokens, D = m->dim;
  const int nb = q->last_block - q->first_block + 1;

  /* order, alignment, no overlap */
  uint64_t end = 0;
  int prev_kind = -1;
  for (int i = 0; i < l.count; i++) {
    const plan_buffer *b = &l.b[i];
    CHECK(b->offset % PLAN_LAYOUT_ALIGN == 0, "%s rank %d: %s at %llu, not aligned", what, r,
          plan_buf_name(b->kind), (unsigned long long)b->offset);
    CHECK(b->offset >= end, "%s rank %d: %s at %llu overlaps the buffer before (end %llu)",
          what, r, plan_buf_name(b->kind), (unsigned long long)b->offset,
          (unsigned long long)end);
    CHECK((int)b->kind >= prev_kind, "%s rank %d: %s out of carve order", what, r,
          plan_buf_name(b->kind));
    prev_kind = (int)b->kind;
    end = b->offset + b->bytes;
  }
  CHECK(end == l.total, "%s rank %d: total %llu, last buffer ends at %llu", what, r,
        (unsigned long long)l.total, (unsigned long long)end);

  /* what the rank holds */
  CHECK(count_kind(&l, PLAN_BUF_EMBED_W) == q->has_embed, "%s rank %d: embed", what, r);
  CHECK(count_kind(&l, PLAN_BUF_HEAD_W) == q->has_head, "%s rank %d: head", what, r);
  CHECK(count_kind(&l, PLAN_BUF_CTXH) == q->has_embed, "%s rank %d: text hidden", what, r);
  CHECK(count_kind(&l, PLAN_BUF_TOK) == (q->has_embed || q->has_head) &&
            count_kind(&l, PLAN_BUF_LAT) == (q->has_embed || q->has_head),
        "%s rank %d: latent buffers", what, r);
  CHECK(count_kind(&l, PLAN_BUF_BLOCK_W) == q->num_resident, "%s rank %d: %d resident, %d in "
        "the layout", what, r, q->num_resident, count_kind(&l, PLAN_BUF_BLOCK_W));
  for (int b = 0; b < nb; b++)
    CHECK((plan_layout_find(&l, PLAN_BUF_BLOCK_W, b) != NULL) == !flags[b],
          "%s rank %d: block %d resident %d", what, r, b, !flags[b]);
  int slots = q->num_streamed < q->prefetch_depth ? q->num_streamed : q->prefetch_depth;
  CHECK(l.nstreamed == q->num_streamed && l.slots == slots &&
            count_kind(&l, PLAN_BUF_SLOT_W) == slots,
        "%s rank %d: %d slots in the layout, want %d", what, r, l.slots, slots);
  int nbuf = plan_act_buffers(q->order, p->micro_batches, r > 0, r < p->nranks - 1);
  CHECK(count_kind(&l, PLAN_BUF_ACT) == nbuf, "%s rank %d: %d activation buffers, want %d",
        what, r, count_kind(&l, PLAN_BUF_ACT), nbuf);
  CHECK(count_kind(&l, PLAN_BUF_ATTN_SCRATCH) == simple, "%s rank %d: scratch", what, r);
  CHECK(l.rows == q->chunk_rows, "%s rank %d: rows %lld, plan %lld", what, r, (long long)l.rows,
        (long long)q->chunk_rows);
  const plan_buffer *kv = plan_layout_find(&l, PLAN_BUF_KV, 0),
                    *hb = plan_layout_find(&l, PLAN_BUF_HB, 0),
                    *act = plan_layout_find(&l, PLAN_BUF_ACT, 0),
                    *ck = plan_layout_find(&l, PLAN_BUF_CTX_K, 0);
  CHECK(kv && hb && act && ck, "%s rank %d: a fixed buffer is missing", what, r);
  if (kv && hb && act && ck) {
    /* the union: k and v of all rows, or the FFN hidden of a chunk */
    CHECK(kv->bytes >= (uint64_t)(2 * L * D * 2) &&
              kv->bytes >= (uint64_t)(q->chunk_rows * m->ffn_dim * 2),
          "%s rank %d: k/v / ffn union of %llu bytes", what, r, (unsigned long long)kv->bytes);
    CHECK(hb->bytes == (uint64_t)(q->chunk_rows * D * 2), "%s rank %d: chunk buffer", what, r);
    CHECK(act->bytes == (uint64_t)(L * D + 7 * D * (m->time_tables > 1 ? 2 : 1)) * 4,
          "%s rank %d: message bytes", what, r);
    CHECK(ck->bytes == (uint64_t)p->micro_batches * (uint64_t)nb * (uint64_t)(m->text_len * D) * 2,
          "%s rank %d: context k bytes", what, r);
  }

  /* the planner's memory model is this layout */
  CHECK(l.total == q->peak_bytes - q->reserve_bytes - q->decoder_bytes,
        "%s rank %d: layout %llu bytes, the plan counts %llu", what, r,
        (unsigned long long)l.total, (unsigned long long)(q->peak_bytes - q->reserve_bytes));
  CHECK(q->act_bytes == l.total - q->weight_bytes - q->stream_slot_bytes,
        "%s rank %d: act %llu, layout less weights %llu", what, r,
        (unsigned long long)q->act_bytes,
        (unsigned long long)(l.total - q->weight_bytes - q->stream_slot_bytes));
  uint64_t act_bytes = plan_act_bytes(m, w,
                                      &(plan_stage_desc){.order = q->order,
                                                         .first_block = 0,
                                                         .last_block = nb - 1,
                                                         .has_prev = r > 0,
                                                         .has_next = r < p->nranks - 1,
                                                         .has_embed = q->has_embed,
                                                         .has_head = q->has_head,
                                                         .chunk_rows = q->chunk_rows,
                                                         .simple_attn = simple});
  CHECK(act_bytes == q->act_bytes, "%s rank %d: plan_act_bytes %llu, plan %llu", what, r,
        (unsigned long long)act_bytes, (unsigned long long)q->act_bytes);
  /* and the stage's arena did not change */
  uint64_t ref = ref_carve(&sh);
  CHECK(l.total == ref, "%s rank %d: layout %llu bytes, the stage carved %llu", what, r,
        (unsigned long long)l.total, (unsigned long long)ref);
}

typedef struct clip {
  int64_t frames, height, width;
} clip;

static void test_plans(void) {
  const clip clips[] = {{1, 64, 64}, {5, 64, 64}, {17, 96, 80}, {33, 256, 448},
                        {81, 480, 832}, {0, 0, 0} /* random */};
  const double fracs[] = {-1, 0.5, 1};
  const int64_t caps[] = {0, 64, 1000};
  int made = 0;
  for (int which = 0; which < 3; which++) {
    test_wan t;
    model_make(&t, which);
    /* Half the time a TI2V model's: 48 channels in and out, two time
     * tables in every message and modulation. */
    if (sp_rand_u64() % 2) {
      t.m.in_dim = t.m.out_dim = 48;
      t.m.time_tables = 2;
    }
    for (size_t ci = 0; ci < sizeof clips / sizeof clips[0]; ci++) {
      clip c = clips[ci];
      if (c.frames == 0)
        c = (clip){1 + 4 * sp_rand_int(0, 20), 16 * sp_rand_int(4, 52), 16 * sp_rand_int(4, 52)};
      for (int nr = 1; nr <= 4 && nr <= t.m.num_blocks; nr++) {
        for (int k = 0; k < 6; k++) {
          plan_workload w = {c.frames, c.height, c.width, (int)sp_rand_int(1, 3), t.m.text_len, 0, 0};
          plan_options o;
          plan_options_default(&o);
          o.order = sp_rand_u64() % 2 ? PLAN_ORDER_MICRO : PLAN_ORDER_BLOCK;
          o.stream_frac = fracs[k % 3];
          o.max_rows = caps[(k + nr) % 3];
          o.prefetch_depth = (int)sp_rand_int(1, 3);
          o.simple_attn = k >= 3;
          plan_device d[4];
          for (int r = 0; r < nr; r++)
            test_device(&d[r], "gpu", which == 2 ? (double)sp_rand_int(24, 141) : 80.0, 1.0);
          plan_budget b;
          char err[4096];
          static plan p;
          if (plan_budget_parse("auto", nr, &b, err, sizeof err) != PLAN_OK) continue;
          if (plan_make(&(plan_inputs){&t.m, d, nr, &b, &w, &o}, &p, err, sizeof err) != PLAN_OK)
            continue;
          made++;
          char what[160];
          snprintf(what, sizeof what, "model %d, %lldx%lldx%lld, M %d, %d ranks, %s, frac %g, "
                   "cap %lld, %s",
                   which, (long long)c.frames, (long long)c.height, (long long)c.width,
                   w.micro_batches, nr, plan_order_name(o.order), o.stream_frac,
                   (long long)o.max_rows, o.simple_attn ? "simple" : "fast");
          for (int r = 0; r < nr; r++) check_rank(&t.m, &w, &p, r, o.simple_attn, what);
        }
      }
    }
  }
  printf("test_layout: %d plans, %d layouts (%d only, %d first, %d middle, %d last stages; "
         "%d with simple attention, %d streaming, %d chunked)\n",
         made, g_layouts, g_pos[0], g_pos[1], g_pos[2], g_pos[3], g_simple, g_streamed,
         g_chunked);
  CHECK(made > 150, "only %d plans", made);
  for (int i = 0; i < 4; i++) CHECK(g_pos[i] > 20, "stage position %d: %d layouts", i, g_pos[i]);
  CHECK(g_simple > 100 && g_streamed > 100 && g_chunked > 50,
        "coverage: %d simple, %d streaming, %d chunked", g_simple, g_streamed, g_chunked);
}

/* The simple backend's scratch: the kernel's formula, as many query rows
 * as 1 GiB holds, at least one, at most L. */
static void test_attn_scratch(void) {
  CHECK(plan_attn_scratch_bytes(0, 10, 1) == 0 && plan_attn_scratch_bytes(1, 0, 1) == 0,
        "empty shapes");
  /* 1 query, 2 heads, Lk 9 -> ld 16: 2*16*4 = 128 -> 256, 2*16*2 = 64 -> 256 */
  CHECK(plan_attn_scratch_bytes(1, 9, 2) == 512, "small: %zu", plan_attn_scratch_bytes(1, 9, 2));
  const int64_t shapes[][3] = {{32760, 512, 40}, {32760, 512, 12}, {150, 512, 2}, {1, 512, 1},
                               {300000, 512, 40}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    int64_t L = shapes[i][0], T = shapes[i][1], H = shapes[i][2], Lk = L > T ? L : T;
    uint64_t got = plan_attn_stage_scratch_bytes(L, T, H);
    uint64_t one = ref_scratch(1, Lk, H);
    CHECK(got >= one, "L %lld: %llu below one row", (long long)L, (unsigned long long)got);
    /* the largest chunk that fits the cap (or all L, or the single row) */
    int64_t chunk = 1;
    while (chunk < L && ref_scratch(chunk + 1, Lk, H) <= PLAN_ATTN_SCRATCH_CAP) chunk++;
    if (chunk > 1 || one <= PLAN_ATTN_SCRATCH_CAP)
      CHECK(got == ref_scratch(chunk, Lk, H), "L %lld heads %lld: %llu, want %llu (%lld rows)",
            (long long)L, (long long)H, (unsigned long long)got,
            (unsigned long long)ref_scratch(chunk, Lk, H), (long long)chunk);
  }
}

/* Inputs no stage has are refused with a message. */
static void test_bad_shapes(void) {
  test_wan t;
  model_make(&t, 0);
  plan_workload w = {17, 96, 80, 2, 512, 0, 0};
  plan_rank q = {.first_block = 0, .last_block = 3, .has_embed = 1, .has_head = 1,
                 .order = PLAN_ORDER_MICRO, .chunk_rows = 150};
  plan_stage_shape s;
  plan_stage_shape_of(&t.m, &w, &q, NULL, 0, &s);
  static plan_layout l;
  char err[256] = "";
  CHECK(plan_layout_make(&s, &l, err, sizeof err) == PLAN_OK, "good shape: %s", err);
  plan_stage_shape bad = s;
  bad.tokens = 0;
  CHECK(plan_layout_make(&bad, &l, err, sizeof err) == PLAN_EINVAL && strstr(err, "tokens"),
        "0 tokens: %s", err);
  bad = s;
  bad.act_buffers = PLAN_LAYOUT_MAX_ACT + 1;
  CHECK(plan_layout_make(&bad, &l, err, sizeof err) == PLAN_EINVAL, "too many buffers");
  bad = s;
  bad.dim = INT64_C(1) << 40;
  bad.tokens = INT64_C(1) << 40;
  CHECK(plan_layout_make(&bad, &l, err, sizeof err) == PLAN_EINVAL && strstr(err, "overflow"),
        "overflow: %s", err);
  CHECK(strcmp(plan_buf_name(PLAN_BUF_CTX_K), "cross-attention k") == 0 &&
            strcmp(plan_buf_name(PLAN_BUF_KINDS), "?") == 0,
        "names");
}

int main(void) {
  sp_test_begin("test_layout");
  test_attn_scratch();
  test_bad_shapes();
  test_plans();
  return sp_test_end();
}
