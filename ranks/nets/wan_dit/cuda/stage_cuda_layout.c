/* The CUDA stage's arena layout (see stage_cuda.c): the pointers carved
 * from planner/layout.h's layout, at load and again when the latent shape
 * changes (rank_stage_relayout). The weights, prefetch slots and prompt
 * k, v come first in the layout and do not depend on the tokens, so a new
 * shape re-carves only what follows them: the activation buffers, the
 * block transients, the RoPE tables, the end stages' patch and latent
 * buffers, the attention scratch and the LoRA room (whose pairs move with
 * it). The arena is sized at load for cfg.max_tokens, the plan's largest
 * shape, so every later shape's layout fits it. CUDA builds only. */
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "kern_cpu.h"
#include "layout.h"
#include "log.h"
#include "stage_cuda_impl.h"

/* The stage's layout (planner/layout.h) for a latent of `tokens` tokens
 * of which the rank holds `rows` (Ulysses: with the all-to-all's buffers)
 * and `voxels` voxels, from its config and its groups (bf16 end groups,
 * the blocks in their device layouts, the quantized weights' scratch and
 * input buffers at its precision): the same function the planner's memory
 * model uses. The weights, slots and
 * prompt k, v come first and do not depend on the latent. */
int rank_cuda_stage_layout(const rank_stage *s, const cuda_stage *c, int64_t tokens,
                           int64_t rows, int64_t voxels, plan_layout *out) {
  const wan_config *cf = s->c;
  plan_stage_shape sh = {
      .dim = cf->dim,
      .ffn_dim = cf->ffn_dim,
      .heads = cf->heads,
      .head_dim = wan_head_dim(cf),
      .text_len = cf->text_len,
      .text_dim = cf->text_dim,
      .freq_dim = cf->freq_dim,
      .in_dim = cf->in_dim,
      .out_dim = cf->out_dim,
      .patch = wan_patch_in(cf) / cf->in_dim,
      .operand_bytes = 2,
      .embed_bytes = c->l16[WAN_GROUP_EMBED].packed_bytes,
      .head_bytes = c->l16[WAN_GROUP_HEAD].packed_bytes,
      .block_bytes = c->block_bytes,
      .tokens = rows,
      .seq_tokens = s->cfg.seq ? tokens : 0,
      .seq = s->cfg.seq ? s->cfg.seq->n : 0,
      .latent_voxels = voxels,
      .prompts = s->cfg.prompts,
      .nblocks = s->nblocks,
      .streamed = s->cfg.streamed,
      .prefetch_depth = s->cfg.prefetch_depth,
      .has_embed = s->cfg.embed,
      .has_head = s->cfg.head,
      .act_buffers = s->cfg.act_buffers,
      .chunk_rows = s->cfg.chunk_rows,
      .simple_attn = s->cfg.attn == KERN_ATTN_SIMPLE,
      .experts = s->experts,
      .swap = s->cfg.swap_experts,
      .lora_elems = s->cfg.lora_block_elems,
      .lora_rank = s->cfg.lora_rank,
      .cache = s->cfg.cache,
      .time_tables = wan_time_tables(cf),
      .dequant_bytes = c->dequant_bytes,
      .w8a8 = s->cfg.precision == WAN_PRECISION_FP8    ? PLAN_W8A8_FP8
              : s->cfg.precision == WAN_PRECISION_INT8 ? PLAN_W8A8_INT8
                                                       : PLAN_W8A8_NONE,
      .w8a8_epilogue = s->cfg.w8a8_epilogue,
  };
  char err[256];
  if (plan_layout_make(&sh, out, err, sizeof err) != PLAN_OK) {
    sp_log_error("cuda:%d: %s", c->device, err);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* Places a buffer that must not move once loaded: the first carve sets
 * it, a re-layout finds it where it was. */
static void place_fixed(uint16_t **field, char *p, int keep, const plan_buffer *b) {
  if (keep && *field != (uint16_t *)p)
    sp_fatal("internal: re-laying the stage moves its %s %d", plan_buf_name(b->kind), b->index);
  *field = (uint16_t *)p;
}

/* The step cache's gate: dim values of -1 (its place may move with a
 * re-layout, so it is written at every carve; between jobs). */
static void set_neg(cuda_stage *c, float *dev, int64_t dim) {
  float *h = sp_xmalloc((size_t)dim * sizeof *h);
  for (int64_t i = 0; i < dim; i++) h[i] = -1.0f;
  CUDA_CHECK(cudaMemcpy(dev, h, (size_t)dim * sizeof *h, cudaMemcpyHostToDevice));
  free(h);
  c->cache_neg = dev;
}

/* Points every buffer of the stage at its place in the arena; keep: a
 * re-layout, the weights, slots and prompt k, v are where they were. */
static void carve(rank_stage *s, cuda_stage *c, const plan_layout *l, int keep) {
  for (int i = 0; i < l->count; i++) {
    const plan_buffer *b = &l->b[i];
    char *p = c->arena + b->offset;
    if (b->offset + b->bytes > c->arena_bytes)
      sp_fatal("internal: the layout's %s ends past the arena", plan_buf_name(b->kind));
    switch (b->kind) {
    case PLAN_BUF_EMBED_W: place_fixed(&c->ex[b->index].embed_w, p, keep, b); break;
    case PLAN_BUF_HEAD_W: place_fixed(&c->ex[b->index].head_w, p, keep, b); break;
    case PLAN_BUF_BLOCK_W:
      place_fixed(&c->ex[b->index / s->nblocks].block_w[b->index % s->nblocks], p, keep, b);
      break;
    case PLAN_BUF_SLOT_W: place_fixed(&c->slot_w[b->index], p, keep, b); break;
    case PLAN_BUF_CTX_K: place_fixed(&c->ex[b->index].ck, p, keep, b); break;
    case PLAN_BUF_CTX_V: place_fixed(&c->ex[b->index].cv, p, keep, b); break;
    case PLAN_BUF_ACT:
      if (b->bytes != rank_stage_act_bytes(s))
        sp_fatal("internal: layout's activation buffer %llu bytes, a message is %zu",
                 (unsigned long long)b->bytes, rank_stage_act_bytes(s));
      s->act[b->index] = (float *)p;
      break;
    case PLAN_BUF_KV: /* k and v of every row, or the FFN hidden of a chunk */
      c->kb = c->fb = (uint16_t *)p;
      c->vb = c->kb + s->tokens * s->c->dim;
      break;
    case PLAN_BUF_HB: c->hb = (uint16_t *)p; break;
    case PLAN_BUF_PB: c->pb = (uint16_t *)p; break;
    case PLAN_BUF_QB: c->qb = (uint16_t *)p; break;
    case PLAN_BUF_AB: c->ab = (uint16_t *)p; break;
    case PLAN_BUF_CTXB: c->ctxb = (uint16_t *)p; break;
    case PLAN_BUF_CTXF: c->ctxf = (float *)p; break;
    case PLAN_BUF_CTXH: c->ctxh = (uint16_t *)p; break;
    case PLAN_BUF_COS: c->cos_t = (float *)p; break;
    case PLAN_BUF_SIN: c->sin_t = (float *)p; break;
    case PLAN_BUF_MOD: c->m = (float *)p; break;
    case PLAN_BUF_E2: c->e2 = (float *)p; break;
    case PLAN_BUF_TVEC: c->tvec = (float *)p; break;
    case PLAN_BUF_TOK: c->tok = (float *)p; break;
    case PLAN_BUF_LAT: c->lat = (float *)p; break;
    case PLAN_BUF_ATTN_SCRATCH:
      c->attn_scratch = p;
      c->attn_scratch_bytes = (size_t)b->bytes;
      break;
    case PLAN_BUF_LORA_W: c->lora_w[b->index] = (uint16_t *)p; break;
    case PLAN_BUF_LORA_T: c->lora_t = (uint16_t *)p; break;
    case PLAN_BUF_SEQ_HEADS: c->sq = (uint16_t *)p; break;
    case PLAN_BUF_SEQ_PACK: c->spack = (uint16_t *)p; break;
    case PLAN_BUF_CACHE_RES:
    case PLAN_BUF_CACHE_IN: /* one (tokens, dim) fp32 per prompt slot */
      for (int k = 0; k < s->cfg.prompts; k++)
        s->cache[k] = (float *)(p + (size_t)k * rank_stage_cache_bytes(s));
      break;
    case PLAN_BUF_CACHE_NEG: set_neg(c, (float *)p, s->c->dim); break;
    case PLAN_BUF_DEQUANT:
      c->wdq = (uint16_t *)p;
      c->wdq_bytes = (size_t)b->bytes;
      break;
    case PLAN_BUF_XQ: c->xq = p; break;
    case PLAN_BUF_XS: c->xs = (float *)p; break;
    case PLAN_BUF_XHAT: c->xhat = (uint16_t *)p; break;
    case PLAN_BUF_W8A8_ACC:
      c->wacc = p;
      c->wacc_bytes = (size_t)b->bytes;
      break;
    default: sp_fatal("internal: layout buffer kind %d", (int)b->kind);
    }
  }
  /* Swapping: every expert's blocks are the one device copy. */
  for (int e = 1; !keep && s->cfg.swap_experts && e < s->experts; e++)
    for (int b = 0; b < s->nblocks; b++) c->ex[e].block_w[b] = c->ex[0].block_w[b];
}

/* RoPE tables: angles in double on the host, stored fp32; the stage's
 * rows of the grid's table (a Ulysses rank's from its first row on: the
 * tokens' global positions). */
static void upload_rope(rank_stage *s, cuda_stage *c) {
  const wan_config *cf = s->c;
  const int64_t L = s->tokens, LA = rank_cuda_seq_tokens(s), half = wan_head_dim(cf) / 2;
  const int64_t at = rank_cuda_seq_row0(s) * half;
  double *cd = sp_xmalloc((size_t)(LA * half) * 8), *sd = sp_xmalloc((size_t)(LA * half) * 8);
  float *cfl = sp_xmalloc((size_t)(L * half) * 4), *sfl = sp_xmalloc((size_t)(L * half) * 4);
  kern_cpu_rope_table(s->grid.f, s->grid.h, s->grid.w, wan_head_dim(cf), cd, sd);
  for (int64_t i = 0; i < L * half; i++) {
    cfl[i] = (float)cd[at + i];
    sfl[i] = (float)sd[at + i];
  }
  CUDA_CHECK(cudaMemcpy(c->cos_t, cfl, (size_t)(L * half) * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(c->sin_t, sfl, (size_t)(L * half) * 4, cudaMemcpyHostToDevice));
  free(cd);
  free(sd);
  free(cfl);
  free(sfl);
}

/* The attention shapes of this workload, run once on the scratch buffers
 * (their contents do not matter): cuDNN builds its plans and allocates
 * their workspace here, not in the first sampling step. */
void rank_cuda_warm_attention(rank_stage *s, cuda_stage *c) {
  const wan_config *cf = s->c;
  /* The queries and outputs (qb, ab) hold one chunk of c->rows rows: the
   * shapes the blocks run (a warm of all L rows would write past ab). */
  const int64_t L = s->tokens, n = c->rows;
  const int64_t NH = cf->heads, HD = wan_head_dim(cf);
  kern_attn_params ps = {c->qb, c->kb, c->vb, c->ab, n, L, NH, HD, 0.0f};
  if (s->cfg.seq) { /* every token of the rank's heads (stage_cuda_seq.c) */
    const int64_t LA = rank_cuda_seq_tokens(s), Dn = cf->dim / s->cfg.seq->n;
    ps = (kern_attn_params){c->sq, c->sq + LA * Dn, c->sq + 2 * LA * Dn, c->sq + 3 * LA * Dn,
                            LA, LA, NH / s->cfg.seq->n, HD, 0.0f};
  }
  kern_attn_params pc = {c->qb, c->x->ck, c->x->cv, c->ab, n, cf->text_len, NH, HD, 0.0f};
  kern_attn_run(c->attn, ps, c->attn_scratch, c->attn_scratch_bytes, c->stream);
  kern_attn_run(c->attn, pc, c->attn_scratch, c->attn_scratch_bytes, c->stream);
}

/* Carves the layout for s->tokens (rank_cuda_stage_layout) into the
 * arena; keep: a re-layout. Sets the chunk rows, the profile (whole
 * sub-layers only: off while chunking) and the RoPE tables. */
void rank_cuda_lay_out(rank_stage *s, cuda_stage *c, const plan_layout *lay, int keep) {
  carve(s, c, lay, keep);
  c->rows = lay->rows;
  if (s->cfg.profile && c->rows < s->tokens) {
    rank_prof_destroy(c->prof);
    c->prof = NULL;
    sp_log_warn("--profile: off, the blocks run in chunks of %lld rows (the profile's ops are "
                "whole sub-layers)",
                (long long)c->rows);
  } else if (s->cfg.profile && !c->prof) {
    c->prof = rank_prof_create(c->stream);
  }
  upload_rope(s, c);
}

/* The LoRA pairs (ex[0].lora set) of every expert's blocks, copied to the
 * host before their room moves; NULL when there are none. */
static uint16_t *lora_save(const rank_stage *s, const cuda_stage *c) {
  if (!c->ex[0].lora) return NULL;
  const size_t n = (size_t)s->cfg.lora_block_elems, nw = (size_t)s->nblocks * (size_t)s->experts;
  uint16_t *h = sp_xmalloc(n * nw * sizeof *h + 1);
  for (size_t i = 0; i < nw; i++)
    CUDA_CHECK(cudaMemcpy(h + i * n, c->lora_w[i], n * sizeof *h, cudaMemcpyDeviceToHost));
  return h;
}

/* The saved pairs into their new room, and their views moved with it
 * (old: each room before, [experts x nblocks]). */
static void lora_restore(const rank_stage *s, cuda_stage *c, const uint16_t *h,
                         uint16_t *const *old) {
  const size_t n = (size_t)s->cfg.lora_block_elems;
  for (int e = 0; e < s->experts; e++)
    for (int b = 0; b < s->nblocks; b++) {
      const size_t i = (size_t)e * (size_t)s->nblocks + (size_t)b;
      uint16_t *dev = c->lora_w[i];
      CUDA_CHECK(cudaMemcpy(dev, h + i * n, n * sizeof *h, cudaMemcpyHostToDevice));
      wan_block_lora_bf16 *v = &c->ex[e].lora[b];
#define MOVE_(field, in_, out_)                                                                 \
      if (v->field.r) {                                                                         \
        v->field.a = dev + (v->field.a - old[i]);                                               \
        v->field.b = dev + (v->field.b - old[i]);                                               \
      }
      WAN_BLOCK_LINEARS(MOVE_)
#undef MOVE_
    }
}

int rank_cuda_relayout(rank_stage *s) {
  cuda_stage *c = s->impl;
  CUDA_CHECK(cudaSetDevice(c->device));
  CUDA_CHECK(cudaStreamSynchronize(c->stream));
  if (c->copy) CUDA_CHECK(cudaStreamSynchronize(c->copy));
  plan_layout *lay = sp_xmalloc(sizeof *lay);
  if (rank_cuda_stage_layout(s, c, rank_cuda_seq_tokens(s), s->tokens, rank_cuda_voxels(s),
                             lay) != SP_OK) {
    free(lay);
    return SP_ERR_RUNTIME;
  }
  if (lay->total > c->arena_bytes) {
    sp_log_error("internal: cuda:%d: the layout of a %lld-token latent needs %llu bytes, the "
                 "arena loaded for %lld tokens holds %zu",
                 c->device, (long long)s->tokens, (unsigned long long)lay->total,
                 (long long)s->cfg.max_tokens, c->arena_bytes);
    free(lay);
    return SP_ERR_RUNTIME;
  }
  uint16_t *pairs = lora_save(s, c);
  const size_t nw = (size_t)s->nblocks * (size_t)s->experts;
  uint16_t **old = sp_xmalloc(nw * sizeof *old);
  memcpy(old, c->lora_w, nw * sizeof *old);
  rank_cuda_lay_out(s, c, lay, 1);
  free(lay);
  if (pairs) lora_restore(s, c, pairs, old);
  free(pairs);
  free(old);
  rank_cuda_warm_attention(s, c);
  CUDA_CHECK(cudaStreamSynchronize(c->stream));
  return SP_OK;
}
