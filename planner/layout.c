/* The CUDA stage's device layout (layout.h): a bump allocation over one
 * arena, every buffer starting at the next multiple of PLAN_LAYOUT_ALIGN.
 * Notation as in model.c: L tokens, D dim, F ffn_dim, hd head_dim, C
 * text_len (every context is zero-padded to it), TD text_dim, R chunk
 * rows, P prompts, nb blocks of the stage, a operand bytes. */
#include <string.h>

#include "layout.h"
#include "plan_strbuf.h"

uint64_t plan_layout_align(uint64_t bytes) {
  return (bytes + PLAN_LAYOUT_ALIGN - 1) / PLAN_LAYOUT_ALIGN * PLAN_LAYOUT_ALIGN;
}

static const char *const buf_names[PLAN_BUF_KINDS] = {
    [PLAN_BUF_EMBED_W] = "embedding weights",
    [PLAN_BUF_HEAD_W] = "head weights",
    [PLAN_BUF_BLOCK_W] = "resident block weights",
    [PLAN_BUF_SLOT_W] = "prefetch slot",
    [PLAN_BUF_CTX_K] = "cross-attention k",
    [PLAN_BUF_CTX_V] = "cross-attention v",
    [PLAN_BUF_ACT] = "activation buffer",
    [PLAN_BUF_KV] = "self-attention k, v / ffn hidden",
    [PLAN_BUF_HB] = "normed input",
    [PLAN_BUF_PB] = "projection output",
    [PLAN_BUF_QB] = "q",
    [PLAN_BUF_AB] = "attention output",
    [PLAN_BUF_CTXB] = "context operand",
    [PLAN_BUF_CTXF] = "embedded context",
    [PLAN_BUF_CTXH] = "text-embedding hidden",
    [PLAN_BUF_COS] = "rope cos",
    [PLAN_BUF_SIN] = "rope sin",
    [PLAN_BUF_MOD] = "block modulation",
    [PLAN_BUF_E2] = "head modulation input",
    [PLAN_BUF_TVEC] = "time-embedding temporaries",
    [PLAN_BUF_TOK] = "patch tokens",
    [PLAN_BUF_LAT] = "latent",
    [PLAN_BUF_ATTN_SCRATCH] = "attention scratch",
    [PLAN_BUF_LORA_W] = "lora pairs",
    [PLAN_BUF_LORA_T] = "lora temporary",
    [PLAN_BUF_SEQ_HEADS] = "sequence-parallel heads",
    [PLAN_BUF_SEQ_PACK] = "sequence-parallel send rows",
    [PLAN_BUF_CACHE_RES] = "step cache residuals",
    [PLAN_BUF_CACHE_IN] = "step cache inputs",
    [PLAN_BUF_CACHE_NEG] = "step cache gate",
    [PLAN_BUF_DEQUANT] = "dequantised weight",
    [PLAN_BUF_XQ] = "quantised input",
    [PLAN_BUF_XS] = "quantised input's scales",
    [PLAN_BUF_XHAT] = "quantised input dequantised",
    [PLAN_BUF_W8A8_ACC] = "W8A8 products",
};

uint64_t plan_layout_cache_bytes(int prompts, int64_t tokens, int64_t dim) {
  if (prompts < 1 || tokens < 1 || dim < 1) return 0;
  const uint64_t per = (uint64_t)tokens * (uint64_t)dim;
  if (per / (uint64_t)dim != (uint64_t)tokens || per > UINT64_MAX / 4 / (uint64_t)prompts)
    return UINT64_MAX;
  return per * 4 * (uint64_t)prompts;
}

const char *plan_buf_name(plan_buf k) {
  return (int)k >= 0 && k < PLAN_BUF_KINDS ? buf_names[k] : "?";
}

size_t plan_attn_scratch_bytes(int64_t chunk, int64_t Lk, int64_t heads) {
  if (chunk < 1 || Lk < 1 || heads < 1) return 0;
  /* rows of S and P padded to 8 elements: each row start 16-byte aligned */
  const size_t rows = (size_t)chunk * (size_t)heads, ld = (size_t)((Lk + 7) / 8 * 8);
  if (rows > SIZE_MAX / 8 / ld) return SIZE_MAX; /* cannot exist */
  return (size_t)plan_layout_align(rows * ld * sizeof(float)) +
         (size_t)plan_layout_align(rows * ld * 2);
}

uint64_t plan_attn_stage_scratch_bytes(int64_t tokens, int64_t text_len, int64_t heads) {
  if (tokens < 1 || heads < 1) return 0;
  const int64_t Lk = tokens > text_len ? tokens : text_len;
  const size_t per_row = plan_attn_scratch_bytes(1, Lk, heads);
  int64_t chunk = (int64_t)(PLAN_ATTN_SCRATCH_CAP / (per_row ? per_row : 1));
  if (chunk < 1) chunk = 1;
  if (chunk > tokens) chunk = tokens;
  return plan_attn_scratch_bytes(chunk, Lk, heads);
}

/* The layout under construction; `over` is set once a size overflows.
 * The shape's sizes in the notation above: R the rows of the block
 * transients (L unless chunked); Ulysses: U ranks, LA tokens in all
 * (U 1 and LA = L without); nx the experts held. */
typedef struct carver {
  plan_layout *l;
  int over;
  const plan_stage_shape *s;
  uint64_t L, D, F, C, TD, hd, a, P, nb, R, U, LA;
  uint64_t tt; /* time tables: 1, or 2 (TI2V) */
  int nx;
} carver;

static uint64_t mul(carver *c, uint64_t a, uint64_t b) {
  if (a && b > UINT64_MAX / a) {
    c->over = 1;
    return 0;
  }
  return a * b;
}

/* The next buffer: at the aligned end of the previous one. */
static void take(carver *c, plan_buf kind, int index, uint64_t bytes) {
  plan_layout *l = c->l;
  uint64_t off = plan_layout_align(l->total);
  if (off < l->total || bytes > UINT64_MAX - off || l->count >= PLAN_LAYOUT_MAX) {
    c->over = 1;
    return;
  }
  l->b[l->count++] = (plan_buffer){.kind = kind, .index = index, .offset = off, .bytes = bytes};
  l->total = off + bytes;
}

/* The shape's sizes and counts in range; PLAN_OK or plan_fail's status. */
static int shape_check(const plan_stage_shape *s, char *err, size_t errlen) {
  if (s->dim < 1 || s->ffn_dim < 1 || s->heads < 1 || s->head_dim < 2 || s->text_len < 1 ||
      s->text_dim < 1 || s->freq_dim < 1 || s->in_dim < 1 || s->out_dim < 1 || s->patch < 1 ||
      s->operand_bytes < 1 || s->tokens < 1 || s->latent_voxels < 1 || s->seq < 0 ||
      (s->seq > 1 && (s->heads % s->seq || s->seq_tokens < s->tokens)))
    return plan_fail(err, errlen,
                     "layout: sizes must be >= 1 (dim %lld, ffn %lld, heads %lld, head dim "
                     "%lld, text %lld x %lld, tokens %lld, latent voxels %lld; Ulysses ranks %d "
                     "dividing the heads, holding %lld tokens in all)",
                     (long long)s->dim, (long long)s->ffn_dim, (long long)s->heads,
                     (long long)s->head_dim, (long long)s->text_len, (long long)s->text_dim,
                     (long long)s->tokens, (long long)s->latent_voxels, s->seq,
                     (long long)s->seq_tokens);
  if (s->nblocks < 1 || s->nblocks > PLAN_MAX_BLOCKS || s->prompts < 1 || s->act_buffers < 1 ||
      s->act_buffers > PLAN_LAYOUT_MAX_ACT || s->prefetch_depth < 0)
    return plan_fail(err, errlen,
                     "layout: %d blocks (1..%d), %d prompts, %d activation buffers (1..%d), "
                     "prefetch depth %d",
                     s->nblocks, PLAN_MAX_BLOCKS, s->prompts, s->act_buffers,
                     PLAN_LAYOUT_MAX_ACT, s->prefetch_depth);
  return PLAN_OK;
}

/* Weights first: each expert's end-stage groups and resident blocks
 * (swap: one device copy of the blocks, expert 0's places), the slots. */
static void take_weights(carver *c, int slots) {
  const plan_stage_shape *s = c->s;
  for (int e = 0; e < c->nx; e++) {
    if (s->has_embed) take(c, PLAN_BUF_EMBED_W, e, s->embed_bytes);
    if (s->has_head) take(c, PLAN_BUF_HEAD_W, e, s->head_bytes);
  }
  for (int e = 0; e < (s->swap ? 1 : c->nx); e++)
    for (int b = 0; b < s->nblocks; b++)
      if (!(s->streamed && s->streamed[b]))
        take(c, PLAN_BUF_BLOCK_W, e * s->nblocks + b, s->block_bytes);
  for (int k = 0; k < slots; k++) take(c, PLAN_BUF_SLOT_W, k, s->block_bytes);
}

/* P nb C D a each, per expert: the cross-attention k, v of every block
 * and prompt slot (CFG branches have different contexts), made once per
 * prompt with the expert's weights. Then (L D + 7 D tt) 4 per message: the
 * residual stream x with its time embedding e and modulation e0 (TI2V:
 * twice, tt = 2), which travel with it. */
static void take_kv_and_messages(carver *c) {
  uint64_t kv = mul(c, mul(c, mul(c, c->P, c->nb), mul(c, c->C, c->D)), c->a);
  for (int e = 0; e < c->nx; e++) {
    take(c, PLAN_BUF_CTX_K, e, kv);
    take(c, PLAN_BUF_CTX_V, e, kv);
  }
  for (int i = 0; i < c->s->act_buffers; i++)
    take(c, PLAN_BUF_ACT, i, mul(c, mul(c, c->L + 7 * c->tt, c->D), 4));
}

/* A block's transients. max(2 L D a, R F a): self-attention needs k and v
 * of all L rows (every query reads every key; Ulysses: the rank's rows,
 * all LA rows of its heads are the all-to-all's, take_ulysses), the FFN
 * the hidden of one chunk; never both alive, so one buffer (v starts L D
 * elements after k). Then four chunk-sized [R, D] a: normed input,
 * projection output, q, attention output. */
static void take_block_transients(carver *c) {
  const uint64_t L = c->L, D = c->D, R = c->R, a = c->a;
  uint64_t kvb = mul(c, mul(c, 2 * L, D), a), ffn = mul(c, mul(c, R, c->F), a);
  take(c, PLAN_BUF_KV, 0, kvb > ffn ? kvb : ffn);
  const plan_buf chunk[4] = {PLAN_BUF_HB, PLAN_BUF_PB, PLAN_BUF_QB, PLAN_BUF_AB};
  for (int i = 0; i < 4; i++) take(c, chunk[i], 0, mul(c, mul(c, R, D), a));
}

/* Context scratch: the GEMM operand ([C, TD] on the way in, [C, D]
 * after), the embedded context fp32, and on the first stage the text
 * MLP's hidden. RoPE cos and sin, fp32, hd/2 frequency pairs per token. A
 * block's modulation [6, D] and the head's [2, D] input per time table,
 * the time MLP (sinusoid, hidden, output). */
static void take_context_rope_time(carver *c) {
  const uint64_t C = c->C, D = c->D, TD = c->TD, a = c->a, L = c->L, hd = c->hd;
  take(c, PLAN_BUF_CTXB, 0, mul(c, mul(c, C, TD > D ? TD : D), a));
  take(c, PLAN_BUF_CTXF, 0, mul(c, mul(c, C, D), 4));
  if (c->s->has_embed) take(c, PLAN_BUF_CTXH, 0, mul(c, mul(c, C, D), a));
  take(c, PLAN_BUF_COS, 0, mul(c, L * (hd / 2), 4));
  take(c, PLAN_BUF_SIN, 0, mul(c, L * (hd / 2), 4));
  take(c, PLAN_BUF_MOD, 0, 6 * D * 4 * c->tt);
  take(c, PLAN_BUF_E2, 0, 2 * D * 4 * c->tt);
  take(c, PLAN_BUF_TVEC, 0, ((uint64_t)c->s->freq_dim + 2 * D) * 4);
}

/* End stages: the patch tokens [LA, patch x channels] (Ulysses: the
 * whole sequence's, patchified whole and gathered whole at the head) and
 * the latent or prediction, fp32 (once on a stage that is both). */
static void take_end_stage(carver *c) {
  const plan_stage_shape *s = c->s;
  if (!s->has_embed && !s->has_head) return;
  uint64_t pin = (uint64_t)(s->in_dim * s->patch), pout = (uint64_t)(s->out_dim * s->patch);
  uint64_t cmax = (uint64_t)(s->in_dim > s->out_dim ? s->in_dim : s->out_dim);
  take(c, PLAN_BUF_TOK, 0, mul(c, mul(c, c->LA, pin > pout ? pin : pout), 4));
  take(c, PLAN_BUF_LAT, 0, mul(c, mul(c, cmax, (uint64_t)s->latent_voxels), 4));
}

/* Bypassed LoRAs: every block's pairs of every expert stay on the
 * device (streamed and swapped blocks' too: they are small, and switching
 * jobs rewrites them); at W8A8, where the pairs run as GEMMs of their own,
 * the A x of a chunk's rows or of the context's (max(R, C), rank) a. (At
 * bf16 precision a layer's pairs are merged into a copy of its weight
 * instead: take_quant's scratch.) */
static void take_lora(carver *c) {
  const plan_stage_shape *s = c->s;
  if (!s->lora_elems || s->lora_rank <= 0) return;
  for (int e = 0; e < c->nx; e++)
    for (int b = 0; b < s->nblocks; b++)
      take(c, PLAN_BUF_LORA_W, e * s->nblocks + b, mul(c, s->lora_elems, c->a));
  if (s->w8a8)
    take(c, PLAN_BUF_LORA_T, 0,
         mul(c, mul(c, c->R > c->C ? c->R : c->C, (uint64_t)s->lora_rank), c->a));
}

/* Ulysses' all-to-all (DESIGN.md "Layouts"): the rank's q, k, v rows
 * packed peer by peer (L D a), sent, received as every token's q, k, v
 * of its H/U heads (3 LA D/U a, peer slices contiguous, so no unpack),
 * the attention output there (LA D/U a), sent back into the pack. After
 * the buffers above, so they sit where they do without it. */
static void take_ulysses(carver *c) {
  if (c->U <= 1) return;
  take(c, PLAN_BUF_SEQ_HEADS, 0, mul(c, mul(c, 4 * c->LA, c->D / c->U), c->a));
  take(c, PLAN_BUF_SEQ_PACK, 0, mul(c, mul(c, c->L, c->D), c->a));
}

/* Step caching: the last stage keeps each micro-batch's residual of the
 * whole transformer, the first (when not also last) a copy of each one's
 * input for the last stage (DESIGN.md "Step caching"). */
static void take_step_cache(carver *c) {
  const plan_stage_shape *s = c->s;
  const uint64_t cache = plan_layout_cache_bytes(s->prompts, s->tokens, s->dim);
  if (cache == UINT64_MAX) c->over = 1;
  if (s->cache && s->has_head) {
    take(c, PLAN_BUF_CACHE_RES, 0, cache);
    take(c, PLAN_BUF_CACHE_NEG, 0, c->D * 4);
  }
  if (s->cache && s->has_embed && !s->has_head) take(c, PLAN_BUF_CACHE_IN, 0, cache);
}

/* Quantized weights (MODEL.md "Quantized weights on the GPU"): the
 * weight-only path's dequantised weight, followed, with bypassed LoRA pairs
 * at bf16 precision, by the copy a layer's weight and its pairs are merged
 * into right before its GEMM (MODEL.md "LoRA": the largest linear weight,
 * D max(D, F) a; never merged in place); W8A8's input codes (1 byte each)
 * and token scales for the most rows a linear layer takes (a chunk, or the
 * context's C), the bf16 copy of the quantised input that bypassed LoRA
 * pairs read, and the fp32 products of the epilogue path (a chunk's rows
 * times ffn_dim, or the context's times dim). */
static void take_quant(carver *c) {
  const plan_stage_shape *s = c->s;
  const uint64_t rq = c->R > c->C ? c->R : c->C, kmax = c->F > c->D ? c->F : c->D;
  const int pairs = s->lora_elems && s->lora_rank > 0;
  uint64_t scratch = s->dequant_bytes;
  if (pairs && !s->w8a8) /* the merged copy from plan_layout_align(dequant_bytes) on */
    scratch = plan_layout_align(scratch) + mul(c, mul(c, c->D, kmax), c->a);
  if (scratch) take(c, PLAN_BUF_DEQUANT, 0, scratch);
  if (!s->w8a8) return;
  take(c, PLAN_BUF_XQ, 0, mul(c, rq, kmax));
  take(c, PLAN_BUF_XS, 0, mul(c, rq, 4));
  if (pairs) take(c, PLAN_BUF_XHAT, 0, mul(c, mul(c, rq, kmax), 2));
  if (s->w8a8_epilogue) {
    const uint64_t blk = mul(c, c->R, kmax), ctx = mul(c, c->C, c->D);
    take(c, PLAN_BUF_W8A8_ACC, 0, mul(c, blk > ctx ? blk : ctx, 4));
  }
}

/* The prefetch slots of the streamed blocks into *slots; PLAN_OK or
 * plan_fail's status. */
static int count_slots(const plan_stage_shape *s, int nstreamed, int *slots, char *err,
                       size_t errlen) {
  *slots = 0;
  if (!nstreamed) return PLAN_OK;
  int n = s->prefetch_depth > 0 ? s->prefetch_depth : 2;
  if (n > nstreamed) n = nstreamed;
  if (n > PLAN_LAYOUT_MAX_SLOTS)
    return plan_fail(err, errlen, "layout: %d prefetch slots, at most %d", n,
                     PLAN_LAYOUT_MAX_SLOTS);
  *slots = n;
  return PLAN_OK;
}

/* The carver over l with the shape's sizes (notation at the top). */
static carver carver_of(const plan_stage_shape *s, plan_layout *l) {
  carver c = {.l = l, .s = s};
  c.L = (uint64_t)s->tokens;
  c.D = (uint64_t)s->dim;
  c.F = (uint64_t)s->ffn_dim;
  c.C = (uint64_t)s->text_len;
  c.TD = (uint64_t)s->text_dim;
  c.hd = (uint64_t)s->head_dim;
  c.a = (uint64_t)s->operand_bytes;
  c.P = (uint64_t)s->prompts;
  c.nb = (uint64_t)s->nblocks;
  c.R = s->chunk_rows > 0 && (uint64_t)s->chunk_rows < c.L ? (uint64_t)s->chunk_rows : c.L;
  c.U = s->seq > 1 ? (uint64_t)s->seq : 1;
  c.LA = c.U > 1 ? (uint64_t)s->seq_tokens : c.L;
  c.nx = s->experts > 1 ? s->experts : 1;
  c.tt = s->time_tables > 1 ? 2 : 1;
  return c;
}

int plan_layout_make(const plan_stage_shape *s, plan_layout *out, char *err, size_t errlen) {
  int rc = shape_check(s, err, errlen);
  if (rc != PLAN_OK) return rc;
  /* Built in place (a layout is large; the planner's model makes many), so
   * on failure *out holds a partial layout. Only count entries are
   * written. */
  plan_layout *l = out;
  l->count = 0;
  l->total = 0;
  carver c = carver_of(s, l);
  int nstreamed = 0, slots = 0;
  for (int b = 0; s->streamed && b < s->nblocks; b++) nstreamed += s->streamed[b] != 0;
  if ((rc = count_slots(s, nstreamed, &slots, err, errlen)) != PLAN_OK) return rc;
  if (c.nx > PLAN_LAYOUT_MAX_EXPERTS || (s->swap && c.nx < 2) || (s->swap && nstreamed))
    return plan_fail(err, errlen,
                     "layout: %d experts (1..%d), swap %d with %d streamed blocks (swap needs "
                     "two experts and nothing streamed)",
                     c.nx, PLAN_LAYOUT_MAX_EXPERTS, s->swap, nstreamed);
  /* The carve order fixes every offset: the stage and the planner's tests
   * compare them. */
  take_weights(&c, slots);
  take_kv_and_messages(&c);
  take_block_transients(&c);
  take_context_rope_time(&c);
  take_end_stage(&c);
  /* The simple attention backend's scores (flash and cuDNN hold none);
   * Ulysses: LA queries of H/U heads and L of H, bounded by LA of H. */
  if (s->simple_attn)
    take(&c, PLAN_BUF_ATTN_SCRATCH, 0,
         plan_attn_stage_scratch_bytes((int64_t)c.LA, s->text_len, s->heads));
  take_lora(&c);
  take_ulysses(&c);
  take_step_cache(&c);
  take_quant(&c);
  if (c.over) return plan_fail(err, errlen, "layout: the arena's size overflows 64 bits");
  l->nstreamed = nstreamed;
  l->slots = slots;
  l->rows = (int64_t)c.R;
  return PLAN_OK;
}

const plan_buffer *plan_layout_find(const plan_layout *l, plan_buf kind, int index) {
  for (int i = 0; i < l->count; i++)
    if (l->b[i].kind == kind && l->b[i].index == index) return &l->b[i];
  return NULL;
}

void plan_stage_shape_of(const plan_model *m, const plan_workload *w, const plan_rank *q,
                         const uint8_t *streamed, int simple_attn, plan_stage_shape *out) {
  const int first = q->has_embed, last = q->has_head;
  int64_t g[3];
  plan_latent_grid(w, g);
  plan_stage_shape s = {
      .dim = m->dim,
      .ffn_dim = m->ffn_dim,
      .heads = m->heads,
      .head_dim = m->head_dim,
      .text_len = m->text_len,
      .text_dim = m->text_dim,
      .freq_dim = m->freq_dim,
      .in_dim = m->in_dim,
      .out_dim = m->out_dim,
      .patch = 4,
      .operand_bytes = m->weight_dtype_bytes > 0 ? m->weight_dtype_bytes : 2,
      .embed_bytes = plan_expert_bytes(m, m->embed_bytes),
      .head_bytes = plan_expert_bytes(m, m->head_bytes),
      .block_bytes = m->block_bytes ? plan_expert_bytes(m, m->block_bytes[q->first_block]) : 0,
      .experts = m->experts,
      .swap = q->experts_mode == PLAN_EXPERTS_SWAP,
      .tokens = plan_rank_tokens(w),
      .seq_tokens = plan_tokens(w),
      .seq = w->seq,
      .latent_voxels = g[0] * g[1] * g[2],
      .prompts = w->micro_batches > 0 ? w->micro_batches : 1,
      .nblocks = q->last_block - q->first_block + 1,
      .streamed = streamed,
      .prefetch_depth = q->prefetch_depth,
      .has_embed = first,
      .has_head = last,
      .act_buffers = plan_act_buffers(q->order, w->micro_batches, !first, !last),
      .chunk_rows = q->chunk_rows,
      .simple_attn = simple_attn,
      .lora_elems = m->lora_block_elems,
      .lora_rank = m->lora_rank,
      .cache = m->cache,
      .time_tables = m->time_tables,
      .dequant_bytes = m->dequant_bytes,
      .w8a8 = m->w8a8,
      .w8a8_epilogue = m->w8a8_epilogue,
  };
  *out = s;
}
