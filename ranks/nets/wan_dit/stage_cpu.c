/* A pipeline stage on the CPU backend (see stage.h): fp32 weights (bf16
 * widened at load), the reference kernels. */
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "log.h"
#include "mfile_format.h"
#include "stage_impl.h"

/* One expert's weights and its per-prompt cross-attention k/v. */
typedef struct cpu_expert {
  float *embed_w;    /* embed group, fp32 packed, or NULL */
  float *head_w;     /* head group, or NULL */
  float **block_w;   /* [nblocks] block groups */
  wan_embed_f32 embed;   /* typed views of embed_w, head_w, block_w[b] */
  wan_head_f32 head;
  wan_block_f32 *blocks; /* [nblocks] */
  float *ck, *cv;    /* (prompts, nblocks, text_len, dim) cross-attention k, v */
  /* Bypassed LoRA (rank_stage_set_lora): this expert's pairs per block. */
  float **lora_w;           /* [nblocks] the pairs' values (rank_stage_lora_block) */
  wan_block_lora_f32 *lora; /* [nblocks] typed views of lora_w[b], or NULL: none */
} cpu_expert;

typedef struct cpu_stage {
  wan_layout l32[3]; /* fp32 packed layouts */
  cpu_expert ex[RANK_MODEL_MAX_EXPERTS]; /* [cfg.experts] */
  cpu_expert *cur;   /* the expert the calls use (rank_stage_set_expert) */
  rank_rope rope;
  rank_dit_seq seq;  /* Ulysses: the stage's ranks (cfg.seq); unused without */
  float *scratch;    /* arena: rank_dit_scratch_floats */
  int64_t lora_rank; /* the bypassed pairs' rank the scratch holds room for */
} cpu_stage;

static cpu_stage *st(rank_stage *s) { return s->impl; }

/* The sequence-parallel ranks for the forward, or NULL: one rank. */
static const rank_dit_seq *seq_of(rank_stage *s) { return s->cfg.seq ? &st(s)->seq : NULL; }

/* The forward's all-to-all (rank_seq_exchange_fn) over the stage's group:
 * counts and offsets in floats, to bytes. */
static void seq_exchange(void *ctx, const float *send, const int64_t *soff, const int64_t *scount,
                         float *recv, const int64_t *roff, const int64_t *rcount) {
  const comm_group *g = ctx;
  size_t so[COMM_GROUP_MAX], sb[COMM_GROUP_MAX], ro[COMM_GROUP_MAX], rb[COMM_GROUP_MAX];
  for (int v = 0; v < g->n; v++) {
    so[v] = (size_t)soff[v] * sizeof(float);
    sb[v] = (size_t)scount[v] * sizeof(float);
    ro[v] = (size_t)roff[v] * sizeof(float);
    rb[v] = (size_t)rcount[v] * sizeof(float);
  }
  comm_group_alltoallv(g, send, so, sb, recv, ro, rb,
                       "the all-to-all of the stage's sequence-parallel ranks");
}

/* Floats of the forward's scratch for bypassed pairs of rank lora_rank. */
static size_t scratch_floats(const rank_stage *s, int64_t lora_rank) {
  return rank_dit_scratch_floats(s->c, rank_grid_tokens(s->grid), s->cfg.seq ? s->cfg.seq->n : 1,
                                 lora_rank);
}

/* Where the stage's weights are read from: the model, a scratch buffer
 * for a group in the file's dtype (tmp_bytes, the largest group's), and
 * the count of bytes read. */
typedef struct group_reader {
  rank_model *m;
  void *tmp;
  size_t tmp_bytes;
  uint64_t *bytes_read;
} group_reader;

/* Reads group g (block) of expert e in the file's dtype and widens it to
 * fp32 into a malloc'd *dst. */
static int load_group(const group_reader *r, cpu_stage *c, int e, wan_group g, int block,
                      float **dst) {
  rank_model *m = r->m;
  int rc = rank_model_read_expert_group(m, e, g, block, r->tmp, r->tmp_bytes, r->bytes_read);
  if (rc != SP_OK) return rc;
  *dst = sp_xmalloc(c->l32[g].packed_bytes);
  rank_dit_widen(rank_model_layout(m, g), r->tmp, &c->l32[g], *dst);
  return SP_OK;
}

/* A bf16 or fp32 block run in fp8 or int8 (cfg.precision), or an fp8 or
 * int8 file's block with LoRAs merged into it: each linear weight
 * quantised per output channel with the quantiser of convert --dtype fp8
 * or int8 and dequantised in place, so it holds exactly what an fp8 or
 * int8 file of the same weights gives (MODEL.md "fp8 weights", "int8
 * weights"). */
static void quantise_block(const wan_layout *l32, wan_precision p, float *w) {
  const mfile_format *f = mfile_format_of(wan_precision_weight_dtype(p));
  for (int i = 0; i < l32->count; i++) {
    if (wan_block_linear_of(i) < 0) continue;
    const wan_tensor *t = &l32->t[i];
    float *x = (float *)((char *)w + t->offset);
    const int64_t rows = t->shape[0], cols = t->numel / rows;
    uint8_t *q = sp_xmalloc((size_t)t->numel);
    float *scale = sp_xmalloc((size_t)rows * sizeof(float));
    f->narrow(x, rows, cols, q, scale);
    f->widen(q, scale, rows, cols, x);
    free(scale);
    free(q);
  }
}

/* Drops one expert's bypassed pairs. */
static void lora_drop_expert(rank_stage *s, cpu_expert *x) {
  for (int b = 0; x->lora_w && b < s->nblocks; b++) free(x->lora_w[b]);
  free(x->lora_w);
  free(x->lora);
  x->lora_w = NULL;
  x->lora = NULL;
}

/* Drops every expert's bypassed pairs (the scratch keeps its size). */
static void lora_drop(rank_stage *s, cpu_stage *c) {
  for (int e = 0; e < RANK_MODEL_MAX_EXPERTS; e++) lora_drop_expert(s, &c->ex[e]);
}

static void cpu_destroy(rank_stage *s) {
  cpu_stage *c = st(s);
  if (!c) return;
  lora_drop(s, c);
  for (int e = 0; e < RANK_MODEL_MAX_EXPERTS; e++) {
    cpu_expert *x = &c->ex[e];
    for (int b = 0; b < s->nblocks; b++) free(x->block_w ? x->block_w[b] : NULL);
    free(x->block_w);
    free(x->blocks);
    free(x->embed_w);
    free(x->head_w);
    free(x->ck);
    free(x->cv);
  }
  free(c->scratch);
  for (int i = 0; i < s->cfg.act_buffers; i++) free(s->act[i]);
  for (int k = 0; s->cache && k < s->cfg.prompts; k++) free(s->cache[k]);
  rank_rope_free(&c->rope);
  free(c);
  s->impl = NULL;
}

static void cpu_embed_text(rank_stage *s, const float *context, int64_t L, float *ctx) {
  cpu_stage *c = st(s);
  rank_dit_embed_text(s->c, &c->cur->embed, context, L, ctx, c->scratch);
}

static size_t kv_offset(const rank_stage *s, int slot, int b) {
  return ((size_t)slot * (size_t)s->nblocks + (size_t)b) * (size_t)(s->c->text_len * s->c->dim);
}

static void cpu_set_prompt(rank_stage *s, int slot, const float *ctx) {
  cpu_stage *c = st(s);
  cpu_expert *x = c->cur;
  for (int b = 0; b < s->nblocks; b++)
    rank_dit_context_kv(s->c, &x->blocks[b], x->lora ? &x->lora[b] : NULL, ctx,
                        x->ck + kv_offset(s, slot, b), x->cv + kv_offset(s, slot, b), c->scratch);
}

/* The time tables of the message x (stage.h): e | e0, then on a TI2V
 * model the frame-0 tokens' e | e0. */
static rank_dit_time time_of(const rank_stage *s, const float *x) {
  const int64_t D = s->c->dim;
  const float *e = x + s->tokens * D;
  rank_dit_time tm = {.e = e, .e0 = e + D};
  if (wan_time_tables(s->c) == 2)
    tm = (rank_dit_time){.e = e, .e0 = e + D, .e_first = e + 7 * D, .e0_first = e + 8 * D,
                         .first = s->first_tokens};
  return tm;
}

static void cpu_embed(rank_stage *s, const float *latent, double t, double t_first, int buf) {
  cpu_stage *c = st(s);
  const int64_t D = s->c->dim;
  float *x = s->act[buf], *e = x + s->tokens * D, *e0 = e + D;
  const int64_t fhw[3] = {s->cfg.lat_f, s->cfg.lat_h, s->cfg.lat_w};
  rank_dit_embed_patch(s->c, &c->cur->embed, latent, fhw, seq_of(s), x, c->scratch);
  rank_dit_embed_time(s->c, &c->cur->embed, t, e, e0, c->scratch);
  if (wan_time_tables(s->c) == 2)
    rank_dit_embed_time(s->c, &c->cur->embed, t_first, e + 7 * D, e0 + 7 * D, c->scratch);
}

/* e of timestep t; e0 and the temporaries in memory of its own (before
 * sampling, not on the step's path). */
static void cpu_time_embed(rank_stage *s, double t, float *e) {
  const wan_config *cf = s->c;
  float *tmp = sp_xmalloc((size_t)(cf->freq_dim + 8 * cf->dim) * sizeof(float));
  rank_dit_embed_time(cf, &st(s)->cur->embed, t, e, tmp, tmp + 6 * cf->dim);
  free(tmp);
}

/* The step cache's buffers for s->tokens rows (again after a relayout). */
static void cache_alloc(rank_stage *s) {
  for (int k = 0; s->cache && k < s->cfg.prompts; k++) {
    free(s->cache[k]);
    s->cache[k] = sp_xmalloc(rank_stage_cache_bytes(s));
  }
}

static void cpu_cache(rank_stage *s, rank_cache_op op, int buf, int k) {
  const int64_t n = (int64_t)(rank_stage_cache_bytes(s) / sizeof(float));
  float *x = s->act[buf], *r = s->cache[k];
  if (op == RANK_CACHE_TAKE)
    memcpy(r, x, (size_t)n * sizeof(float));
  else if (op == RANK_CACHE_KEEP)
    for (int64_t j = 0; j < n; j++) r[j] = x[j] - r[j];
  else
    for (int64_t j = 0; j < n; j++) x[j] += r[j];
}

/* Block-major when n > 1: every micro-batch through block b, then b + 1.
 * The host holds every block anyway; the order only mirrors the CUDA
 * backend's, and each micro-batch sees the same ops either way. */
static void cpu_blocks(rank_stage *s, int n, const int *slots, const int *bufs) {
  cpu_stage *c = st(s);
  const cpu_expert *w = c->cur;
  for (int b = 0; b < s->nblocks; b++)
    for (int j = 0; j < n; j++) {
      float *x = s->act[bufs[j]];
      const rank_dit_time tm = time_of(s, x);
      rank_dit_block(s->c, &w->blocks[b], w->lora ? &w->lora[b] : NULL, x, &tm,
                     w->ck + kv_offset(s, slots[j], b), w->cv + kv_offset(s, slots[j], b), &c->rope,
                     seq_of(s), c->scratch);
    }
}

static void cpu_head(rank_stage *s, int buf, float *out) {
  cpu_stage *c = st(s);
  const float *act = s->act[buf];
  const rank_dit_time tm = time_of(s, act);
  const int64_t fhw[3] = {s->cfg.lat_f, s->cfg.lat_h, s->cfg.lat_w};
  rank_dit_head(s->c, &c->cur->head, act, &tm, fhw, seq_of(s), out, c->scratch);
}

static void cpu_sync(rank_stage *s) { (void)s; /* every call ran to the end */ }

/* Copies the pairs of one expert's blocks (blk[nblocks]) into x: each
 * block's values, and its views moved onto the copy. */
static void lora_copy_expert(rank_stage *s, const rank_stage_lora_block *blk, cpu_expert *x) {
  float **w = sp_xcalloc((size_t)s->nblocks, sizeof *w);
  wan_block_lora_f32 *v = sp_xcalloc((size_t)s->nblocks, sizeof *v);
  for (int b = 0; b < s->nblocks; b++) {
    const rank_stage_lora_block *k = &blk[b];
    w[b] = sp_xmalloc(k->floats * sizeof(float) + 1);
    memcpy(w[b], k->values, k->floats * sizeof(float));
#define MOVE_(field, in_, out_)                                                                 \
    v[b].field = (wan_lora_f32){.a = k->pairs.field.r ? w[b] + (k->pairs.field.a - k->values) : NULL, \
                                .b = k->pairs.field.r ? w[b] + (k->pairs.field.b - k->values) : NULL, \
                                .r = k->pairs.field.r};
    WAN_BLOCK_LINEARS(MOVE_)
#undef MOVE_
  }
  x->lora_w = w;
  x->lora = v;
}

/* Every expert's pairs of l in place of the last; the scratch grows first
 * when their rank needs it. */
static void cpu_set_lora(rank_stage *s, const rank_stage_lora *l) {
  cpu_stage *c = st(s);
  lora_drop(s, c);
  if (!l) return;
  if (l->rank > c->lora_rank) {
    free(c->scratch);
    c->scratch = sp_xmalloc(scratch_floats(s, l->rank) * sizeof(float));
    c->lora_rank = l->rank;
  }
  for (int e = 0; e < s->experts; e++) lora_copy_expert(s, l->block[e], &c->ex[e]);
}

/* The switch between experts: the next calls use expert e's weights and
 * its prompts' k/v. Nothing moves: every expert's blocks stay in memory. */
static void cpu_set_expert(rank_stage *s, int e) { st(s)->cur = &st(s)->ex[e]; }

/* A new latent shape (rank_stage_relayout): the activation buffers, the
 * scratch (room for the LoRA rank it had) and the RoPE angles are made
 * again for s->tokens; the weights and the LoRA pairs stay. */
static int cpu_relayout(rank_stage *s) {
  cpu_stage *c = st(s);
  for (int i = 0; i < s->cfg.act_buffers; i++) {
    free(s->act[i]);
    s->act[i] = sp_xmalloc(rank_stage_act_bytes(s));
  }
  cache_alloc(s);
  free(c->scratch);
  c->scratch = sp_xmalloc(scratch_floats(s, c->lora_rank) * sizeof(float));
  rank_rope_free(&c->rope);
  rank_rope_init(s->c, s->grid, &c->rope);
  return SP_OK;
}

static const wan_dit_backend cpu_ops;

static int cpu_load(rank_model *m, rank_stage *s, uint64_t *bytes_read) {
  const wan_config *cf = s->c;
  const rank_stage_cfg *cfg = &s->cfg;
  cpu_stage *c = sp_xcalloc(1, sizeof *c);
  s->impl = c;
  s->ops = &cpu_ops;
  for (int g = 0; g < 3; g++) wan_layout_make(cf, (wan_group)g, KERN_DTYPE_F32, &c->l32[g]);
  rank_rope_init(cf, s->grid, &c->rope);
  size_t kv = (size_t)cfg->prompts * (size_t)s->nblocks * (size_t)(cf->text_len * cf->dim);
  for (int e = 0; e < s->experts; e++) {
    cpu_expert *x = &c->ex[e];
    x->block_w = sp_xcalloc((size_t)s->nblocks, sizeof *x->block_w);
    x->blocks = sp_xcalloc((size_t)s->nblocks, sizeof *x->blocks);
    x->ck = sp_xmalloc(kv * sizeof(float));
    x->cv = sp_xmalloc(kv * sizeof(float));
  }
  c->cur = &c->ex[0];
  c->scratch = sp_xmalloc(scratch_floats(s, 0) * sizeof(float));
  if (cfg->seq)
    c->seq = (rank_dit_seq){.n = cfg->seq->n, .me = cfg->seq->me,
                            .tokens = rank_grid_tokens(s->grid), .exchange = seq_exchange,
                            .ctx = (void *)cfg->seq};
  for (int i = 0; i < cfg->act_buffers; i++)
    s->act[i] = sp_xmalloc(rank_stage_act_bytes(s));
  cache_alloc(s);

  size_t tmp_bytes = 0;
  for (int g = 0; g < 3; g++) {
    size_t b = rank_model_layout(m, (wan_group)g)->packed_bytes;
    if (b > tmp_bytes) tmp_bytes = b;
  }
  void *tmp = sp_xmalloc(tmp_bytes);
  const group_reader rd = {.m = m, .tmp = tmp, .tmp_bytes = tmp_bytes, .bytes_read = bytes_read};
  int rc = SP_OK;
  double w0 = comm_now();
  for (int e = 0; rc == SP_OK && e < s->experts; e++) {
    cpu_expert *x = &c->ex[e];
    if (cfg->embed)
      rc = load_group(&rd, c, e, WAN_GROUP_EMBED, 0, &x->embed_w);
    for (int b = 0; rc == SP_OK && b < s->nblocks; b++) {
      rc = load_group(&rd, c, e, WAN_GROUP_BLOCK, cfg->first_block + b, &x->block_w[b]);
      /* an fp8 or int8 file's blocks come dequantised already, and merged
       * LoRAs (in fp32) are quantised again */
      if (rc == SP_OK && cfg->precision != WAN_PRECISION_BF16 &&
          (rank_model_get_info(m)->precision != cfg->precision || rank_model_merging(m)))
        quantise_block(&c->l32[WAN_GROUP_BLOCK], cfg->precision, x->block_w[b]);
    }
    if (rc == SP_OK && cfg->head)
      rc = load_group(&rd, c, e, WAN_GROUP_HEAD, 0, &x->head_w);
  }
  s->stats.weights_s = comm_now() - w0;
  free(tmp);
  if (rc != SP_OK) {
    cpu_destroy(s);
    return rc;
  }
  for (int e = 0; e < s->experts; e++) {
    cpu_expert *x = &c->ex[e];
    if (cfg->embed) wan_embed_f32_bind(&c->l32[WAN_GROUP_EMBED], x->embed_w, &x->embed);
    for (int b = 0; b < s->nblocks; b++) {
      wan_block_f32_bind(&c->l32[WAN_GROUP_BLOCK], x->block_w[b], &x->blocks[b]);
      x->blocks[b].precision = cfg->precision;
    }
    if (cfg->head) wan_head_f32_bind(&c->l32[WAN_GROUP_HEAD], x->head_w, &x->head);
  }
  return SP_OK;
}

static const wan_dit_backend cpu_ops = {
    .load = cpu_load,           .destroy = cpu_destroy,   .embed_text = cpu_embed_text,
    .set_prompt = cpu_set_prompt, .embed = cpu_embed,     .blocks = cpu_blocks,
    .head = cpu_head,           .sync = cpu_sync,         .set_lora = cpu_set_lora,
    .set_expert = cpu_set_expert, .relayout = cpu_relayout, .time_embed = cpu_time_embed,
    .cache = cpu_cache};

const net_backend wan_dit_cpu = {wan_dit_net, RANK_DEVICE_CPU, &cpu_ops};
