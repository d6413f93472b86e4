/* The Wan 2.1 DiT forward on the CPU (see dit.h), composed from the
 * reference kernels in kernels/kern_cpu.h. Every comment "MODEL n" points
 * at step n of MODEL.md "Forward, op by op". */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dit.h"
#include "kern_cpu.h"
#include "kern_dtype.h"
#include "kern_quant.h"
#include "log.h"
#include "wan_steps.h"

int rank_rope_init(const wan_config *c, rank_grid grid, rank_rope *out) {
  int64_t L = rank_grid_tokens(grid), half = wan_head_dim(c) / 2;
  out->grid = grid;
  out->cos_t = sp_xmalloc((size_t)(L * half) * sizeof(double));
  out->sin_t = sp_xmalloc((size_t)(L * half) * sizeof(double));
  kern_cpu_rope_table(grid.f, grid.h, grid.w, wan_head_dim(c), out->cos_t, out->sin_t);
  return SP_OK;
}

void rank_rope_free(rank_rope *r) {
  free(r->cos_t);
  free(r->sin_t);
  r->cos_t = r->sin_t = NULL;
}

void rank_dit_widen(const wan_layout *src_l, const void *src, const wan_layout *dst_l,
                    float *dst) {
  for (int i = 0; i < src_l->count; i++) {
    const wan_tensor *s = &src_l->t[i], *d = &dst_l->t[i];
    const char *p = (const char *)src + s->offset;
    float *q = (float *)((char *)dst + d->offset);
    if (s->bytes == d->bytes)
      memcpy(q, p, d->bytes);
    else
      kern_bf16_to_f32_n((const uint16_t *)p, q, (size_t)s->numel);
  }
}

int64_t rank_dit_seq_row0(const rank_dit_seq *seq, int64_t L) {
  return seq ? plan_seq_row0(L, seq->n, seq->me) : 0;
}

int64_t rank_dit_seq_rows(const rank_dit_seq *seq, int64_t L) {
  return seq ? plan_seq_rows(L, seq->n, seq->me) : L;
}

int64_t rank_dit_time_first_rows(const rank_dit_time *tm, int64_t row0, int64_t n) {
  const int64_t k = tm->first - row0;
  return k <= 0 ? 0 : k >= n ? n : k;
}

/* Floats of the block's own regions (h, q, k, v, attn (L, D) each, the FFN
 * hidden (L, ffn_dim), the modulation (6, D) per time table): the
 * sequence-parallel region, then the bypass's follow. */
static size_t block_floats(const wan_config *c, int64_t L) {
  return (size_t)(5 * L * c->dim + L * c->ffn_dim + 6 * c->dim * wan_time_tables(c));
}

/* The sequence-parallel region of a block holding Lu of the L tokens over n
 * ranks: q, k, v and the attention output of its heads for every token
 * (4 x (L, dim / n)) and the packed rows it sends (Lu, dim); none for one
 * rank. */
static size_t seq_floats(const wan_config *c, int64_t L, int64_t Lu, int n) {
  return n > 1 ? (size_t)(4 * L * (c->dim / n) + Lu * c->dim) : 0;
}

/* The bypass's region: A x (rows, r) and B (A x) (rows, max(dim, ffn_dim)),
 * for rows up to max(L, text_len) (a block or the context's k and v). */
static size_t lora_floats(const wan_config *c, int64_t L, int64_t lora_rank) {
  if (lora_rank <= 0) return 0;
  const int64_t rows = L > c->text_len ? L : c->text_len;
  const int64_t wide = c->ffn_dim > c->dim ? c->ffn_dim : c->dim;
  return (size_t)(rows * (lora_rank + wide));
}

size_t rank_dit_scratch_floats(const wan_config *c, int64_t L, int seq_n, int64_t lora_rank) {
  const int64_t D = c->dim, T = c->text_len;
  /* The longest slice is the first. */
  const int64_t Lu = plan_seq_rows(L, seq_n > 1 ? seq_n : 1, 0);
  /* block: its regions + the sequence-parallel and the bypass's; embed
   * text: hidden (text_len, dim) + padded context (text_len, text_dim);
   * patch: tokens (L, 64); head: (Lu, D) + (L, 64) + (2, D) per time
   * table; time: (freq_dim + 8 D) */
  size_t block = block_floats(c, Lu) + seq_floats(c, L, Lu, seq_n) + lora_floats(c, Lu, lora_rank);
  size_t text = (size_t)(T * D + T * c->text_dim);
  size_t head = (size_t)(Lu * D + L * wan_patch_out(c) + 2 * D * wan_time_tables(c));
  size_t patch = (size_t)(L * wan_patch_in(c));
  size_t time = (size_t)(c->freq_dim + 8 * D);
  /* the context's k and v in fp8 with bypassed pairs: its quantised copy
   * (text_len, D) + the bypass's region */
  size_t ctx = lora_rank > 0 ? (size_t)(T * D) + lora_floats(c, T, lora_rank) : 0;
  size_t m = block > ctx ? block : ctx;
  if (text > m) m = text;
  if (head > m) m = head;
  if (patch > m) m = patch;
  if (time > m) m = time;
  return m;
}

/* MODEL 2: sinusoid -> Linear -> SiLU -> Linear = e; SiLU(e) -> Linear = e0. */
void rank_dit_embed_time(const wan_config *c, const wan_embed_f32 *w, double t, float *e,
                         float *e0, float *scratch) {
  const int64_t D = c->dim;
  float *sin_t = scratch;                  /* (freq_dim) */
  float *h = sin_t + c->freq_dim;          /* (D) */
  float *se = h + D;                       /* (D) */
  kern_cpu_time_sinusoid(t, c->freq_dim, sin_t);
  kern_cpu_linear(sin_t, w->time_embedding_0_w, w->time_embedding_0_b, h, 1, c->freq_dim, D);
  kern_cpu_silu(h, D);
  kern_cpu_linear(h, w->time_embedding_2_w, w->time_embedding_2_b, e, 1, D, D);
  memcpy(se, e, (size_t)D * sizeof(float));
  kern_cpu_silu(se, D);
  kern_cpu_linear(se, w->time_projection_1_w, w->time_projection_1_b, e0, 1, D, 6 * D);
}

/* MODEL 3: zero-pad to text_len rows, Linear -> GELU(tanh) -> Linear. */
void rank_dit_embed_text(const wan_config *c, const wan_embed_f32 *w,
                         const float *context, int64_t L, float *ctx, float *scratch) {
  const int64_t D = c->dim, T = c->text_len, TD = c->text_dim;
  float *padded = scratch;   /* (T, TD) */
  float *h = padded + T * TD; /* (T, D) */
  memcpy(padded, context, (size_t)(L * TD) * sizeof(float));
  memset(padded + L * TD, 0, (size_t)((T - L) * TD) * sizeof(float));
  kern_cpu_linear(padded, w->text_embedding_0_w, w->text_embedding_0_b, h, T, TD, D);
  kern_cpu_gelu_tanh(h, T * D);
  kern_cpu_linear(h, w->text_embedding_2_w, w->text_embedding_2_b, ctx, T, D, D);
}

/* MODEL 1: the (1,2,2) patch conv as a linear map of each patch (of this
 * rank's rows: each row is its own GEMM row, so the split changes no bit). */
void rank_dit_embed_patch(const wan_config *c, const wan_embed_f32 *w, const float *latent,
                          const int64_t fhw[3], const rank_dit_seq *seq, float *x,
                          float *scratch) {
  const int64_t F = fhw[0], H = fhw[1], W = fhw[2];
  const int64_t L = F * (H / 2) * (W / 2), Pin = wan_patch_in(c);
  float *tokens = scratch; /* (L, in_dim * 4) */
  kern_cpu_patchify(latent, tokens, c->in_dim, F, H, W);
  /* patch_embedding.weight (D, in_dim, 1, 2, 2) is (D, in_dim*4) row-major. */
  kern_cpu_linear(tokens + rank_dit_seq_row0(seq, L) * Pin, w->patch_embedding_w,
                  w->patch_embedding_b, x, rank_dit_seq_rows(seq, L), Pin, c->dim);
}

/* Block weight p of w, noted in the step log when a test attaches one
 * (wan_steps.h). */
static const float *use(const wan_block_f32 *w, const float *p) {
  if (wan_step_logging()) wan_step_weight(wan_block_f32_index(w, p));
  return p;
}

/* The bypassed LoRA of a linear layer (MODEL.md "LoRA", bypass), after
 * it: y (rows, out) += B (A x), x (rows, in), in fp32; nothing when the
 * layer has no pair. tmp: the bypass's region of the scratch. */
static void lora_add(const wan_lora_f32 *p, const float *x, float *y, int64_t rows, int64_t in,
                     int64_t out, float *tmp) {
  if (p->r == 0) return;
  float *t = tmp, *u = tmp + rows * p->r; /* (rows, r), (rows, out) */
  kern_cpu_linear(x, p->a, NULL, t, rows, in, p->r);
  kern_cpu_linear(t, p->b, NULL, u, rows, p->r, out);
  kern_cpu_gated_add(y, u, NULL, rows, out);
}

/* A linear layer of a block: its weight W (out, in), bias b and bypassed
 * LoRA pair (NULL: none). */
typedef struct block_lin {
  const float *wt, *b;
  const wan_lora_f32 *lora;
} block_lin;

/* Linear layer l on x (rows, in): y (rows, out) = x W^T + b, then its
 * bypassed LoRA pair when it has one. */
static void block_linear(const block_lin *l, const float *x, float *y, int64_t rows, int64_t in,
                         int64_t out, float *tmp) {
  kern_cpu_linear(x, l->wt, l->b, y, rows, in, out);
  if (l->lora) lora_add(l->lora, x, y, rows, in, out, tmp);
}

/* The input x (rows, cols) of a block's linear layers, quantised per token
 * and back when the block runs in fp8 or int8 (MODEL.md "fp8 weights",
 * "int8 weights", the activations), in place: every linear layer that
 * reads x gets the same quantised rows. A block in bf16 (fp32 here) leaves
 * x as it is. */
static void quant_input(const wan_block_f32 *w, float *x, int64_t rows, int64_t cols) {
  if (w->precision == WAN_PRECISION_FP8) kern_fp8_fake_quant_rows(x, rows, cols);
  if (w->precision == WAN_PRECISION_INT8) kern_i8_fake_quant_rows(x, rows, cols);
}

/* lora's pair for a field, or NULL when there is no bypassed LoRA. */
#define PAIR(lora, field) ((lora) ? &(lora)->field : NULL)

/* Linear layer `name` of block w (name_w, name_b) with lora's pair of it. */
#define LIN(w, lora, name) \
  (&(block_lin){use(w, (w)->name##_w), use(w, (w)->name##_b), PAIR(lora, name##_w)})

/* A query or key projection: its linear layer and RMSNorm weight. */
typedef struct qk_proj {
  block_lin lin;
  const float *norm_w;
} qk_proj;

/* Projection x (q or k) of attention att of block w: att_x_w, att_x_b,
 * lora's pair of it, att_norm_x_w. */
#define QK(w, lora, att, x)                                                            \
  (&(qk_proj){{use(w, (w)->att##_##x##_w), use(w, (w)->att##_##x##_b),                  \
               PAIR(lora, att##_##x##_w)},                                               \
              use(w, (w)->att##_norm_##x##_w)})

/* A query or key of MODEL 4: out (rows, D) = RMSNorm(in W^T + b) over the
 * whole width, then RoPE per head when rope is given (self-attention), at
 * the positions of tokens row0 .. row0 + rows - 1. */
static void project_qk(const wan_config *c, const float *in, const qk_proj *p,
                       const rank_rope *rope, int64_t row0, int64_t rows, float *out, float *tmp) {
  const int64_t D = c->dim, half = wan_head_dim(c) / 2;
  block_linear(&p->lin, in, out, rows, D, D, tmp);
  kern_cpu_rmsnorm(out, p->norm_w, out, rows, D, (float)c->eps);
  if (rope)
    kern_cpu_rope_apply(out, rope->cos_t + row0 * half, rope->sin_t + row0 * half, rows,
                        c->heads, wan_head_dim(c));
}

/* Rows (Lu, D) into the n parts the ranks of a stage get, part v its heads'
 * columns [v D/n, (v+1) D/n) of every row: out (n, Lu, D/n); back when
 * !to_parts. */
static void seq_repack(float *rows, float *parts, int64_t Lu, int64_t D, int n, int to_parts) {
  const int64_t Dn = D / n;
  for (int v = 0; v < n; v++)
    for (int64_t i = 0; i < Lu; i++) {
      float *r = rows + i * D + v * Dn, *p = parts + (v * Lu + i) * Dn;
      if (to_parts)
        memcpy(p, r, (size_t)Dn * sizeof(float));
      else
        memcpy(r, p, (size_t)Dn * sizeof(float));
    }
}

/* MODEL 4's self-attention over every token: q, k, v (Lu, D) of this
 * rank's rows into a (Lu, D). One rank: one call. Ulysses: an all-to-all
 * gives each rank every token's q, k, v of its n-th of the heads, the
 * attention runs there (each (row, head) the same sums as on one rank), an
 * all-to-all brings each rank its rows back. sq: seq_floats' region. */
static void self_attention(const wan_config *c, const float *q, const float *k, const float *v,
                           float *a, int64_t Lu, const rank_dit_seq *seq, float *sq) {
  const int64_t NH = c->heads, HD = wan_head_dim(c), D = c->dim;
  if (!seq) {
    kern_cpu_attention(q, k, v, a, Lu, Lu, NH, HD);
    return;
  }
  const int n = seq->n;
  const int64_t L = seq->tokens, Dn = D / n;
  float *full[4] = {sq, sq + L * Dn, sq + 2 * L * Dn, sq + 3 * L * Dn}; /* (L, Dn) q k v a */
  float *pack = sq + 4 * L * Dn;                                         /* (n, Lu, Dn) */
  int64_t part_off[RANK_SEQ_MAX], part_n[RANK_SEQ_MAX], row_off[RANK_SEQ_MAX],
      row_n[RANK_SEQ_MAX];
  plan_seq_head_exchange(Lu, L, D, n, part_off, part_n, row_off, row_n);
  const float *in[3] = {q, k, v};
  for (int t = 0; t < 3; t++) {
    seq_repack((float *)in[t], pack, Lu, D, n, 1);
    seq->exchange(seq->ctx, pack, part_off, part_n, full[t], row_off, row_n);
  }
  kern_cpu_attention(full[0], full[1], full[2], full[3], L, L, NH / n, HD);
  seq->exchange(seq->ctx, full[3], row_off, row_n, pack, part_off, part_n);
  seq_repack(a, pack, Lu, D, n, 0);
}

/* MODEL 4, cross-attention k and v: constant over steps. The steps of
 * wan_steps.h, WAN_STEP_CROSS_K and _V. */
void rank_dit_context_kv(const wan_config *c, const wan_block_f32 *w,
                         const wan_block_lora_f32 *lora, const float *ctx, float *k, float *v,
                         float *scratch) {
  const int64_t D = c->dim, T = c->text_len;
  /* fp8, int8: the context's quantised copy (text_len, D) first in the
   * scratch (rank_dit_scratch_floats has room for it and the bypass's
   * region); bypassed pairs read the same quantised copy, as in a block. */
  float *in = (float *)ctx;
  if (w->precision != WAN_PRECISION_BF16) {
    in = scratch;
    scratch += T * D;
    memcpy(in, ctx, (size_t)(T * D) * sizeof(float));
    quant_input(w, in, T, D);
  }
  wan_step_begin(WAN_STEP_CROSS_K);
  project_qk(c, in, QK(w, lora, cross_attn, k), NULL, 0, T, k, scratch);
  wan_step_begin(WAN_STEP_CROSS_V);
  block_linear(LIN(w, lora, cross_attn_v), in, v, T, D, D, scratch);
}

/* The block's modulation rows (MODEL 4): m (6, D) = modulation (1, 6, D) +
 * e0 (6, D), in fp32; chunks shift1, scale1, gate1, shift2, scale2, gate2. */
static void modulation(const float *mod, const float *e0, int64_t D, float *m) {
  for (int64_t i = 0; i < 6 * D; i++) m[i] = mod[i] + e0[i];
}

/* The modulation tables of a block's rows: m for every row, or, on a
 * TI2V micro-batch, mf for its first nf rows (the tokens of latent frame
 * 0: I2V.md "A timestep per token"). Each op below is row-wise, so it runs
 * on rows [0, nf) with mf's vectors and on the rest with m's: each row
 * gets exactly what it gets in a call of its own. */
typedef struct mod_rows {
  const float *m, *mf; /* (6, D) each; mf unused when nf is 0 */
  int64_t nf, D;
} mod_rows;

/* h (L, D) = h * (1 + scale) + shift, chunk k (shift) and k + 1 (scale). */
static void modulate_rows(const mod_rows *r, float *h, int64_t L, int k) {
  const int64_t D = r->D;
  if (r->nf > 0) kern_cpu_modulate(h, r->mf + k * D, r->mf + (k + 1) * D, h, r->nf, D);
  kern_cpu_modulate(h + r->nf * D, r->m + k * D, r->m + (k + 1) * D, h + r->nf * D, L - r->nf,
                    D);
}

/* x (L, D) += o * gate, the gate chunk k. */
static void gated_add_rows(const mod_rows *r, float *x, const float *o, int64_t L, int k) {
  const int64_t D = r->D;
  if (r->nf > 0) kern_cpu_gated_add(x, o, r->mf + k * D, r->nf, D);
  kern_cpu_gated_add(x + r->nf * D, o + r->nf * D, r->m + k * D, L - r->nf, D);
}

/* MODEL 4: self-attention, cross-attention, FFN, each a residual update:
 * the steps of wan_steps.h, in its order. */
/* Flat list: weights, LoRA pairs, x, e0, context k/v, RoPE, split, scratch: each its own thing. */
void rank_dit_block(const wan_config *c, const wan_block_f32 *w, const wan_block_lora_f32 *lora,
                    float *x, const rank_dit_time *tm, const float *ck, const float *cv,
                    const rank_rope *rope, const rank_dit_seq *seq, float *scratch) {
  const int64_t D = c->dim, HD = wan_head_dim(c);
  const int64_t NH = c->heads, T = c->text_len, FF = c->ffn_dim;
  const int64_t Lall = rank_grid_tokens(rope->grid);
  const int64_t L = rank_dit_seq_rows(seq, Lall), row0 = rank_dit_seq_row0(seq, Lall);
  const float eps = (float)c->eps;
  float *h = scratch;      /* (L, D) normed + modulated input of a sub-layer */
  float *q = h + L * D;    /* (L, D) */
  float *k = q + L * D;    /* (L, D) */
  float *v = k + L * D;    /* (L, D) */
  float *a = v + L * D;    /* (L, D) attention output */
  float *f = a + L * D;    /* (L, ffn_dim) */
  float *m = f + L * FF;   /* (6, D), and (6, D) of the frame-0 tokens' table */
  float *o = q;            /* (L, D) projection output, reuses q */
  float *sq = scratch + block_floats(c, L); /* the sequence-parallel region */
  float *lt = sq + seq_floats(c, Lall, L, seq ? seq->n : 1); /* the bypass's region */

  /* m = modulation + e0 per table (the second for the rows before
   * tm->first, as many of them as this rank holds). */
  wan_step_begin(WAN_STEP_MODULATION);
  const float *mod = use(w, w->modulation);
  const mod_rows mr = {.m = m, .mf = m + 6 * D, .nf = rank_dit_time_first_rows(tm, row0, L),
                       .D = D};
  modulation(mod, tm->e0, D, m);
  if (mr.nf > 0) modulation(mod, tm->e0_first, D, m + 6 * D);

  /* self-attention (k and v before q, as the CUDA block makes them) */
  wan_step_begin(WAN_STEP_NORM1);
  kern_cpu_layernorm(x, NULL, NULL, h, L, D, eps);
  modulate_rows(&mr, h, L, 0);
  quant_input(w, h, L, D);
  wan_step_begin(WAN_STEP_SELF_K);
  project_qk(c, h, QK(w, lora, self_attn, k), rope, row0, L, k, lt);
  wan_step_begin(WAN_STEP_SELF_V);
  block_linear(LIN(w, lora, self_attn_v), h, v, L, D, D, lt);
  wan_step_begin(WAN_STEP_SELF_Q);
  project_qk(c, h, QK(w, lora, self_attn, q), rope, row0, L, q, lt);
  wan_step_begin(WAN_STEP_SELF_ATTN);
  self_attention(c, q, k, v, a, L, seq, sq);
  wan_step_begin(WAN_STEP_SELF_O);
  quant_input(w, a, L, D);
  block_linear(LIN(w, lora, self_attn_o), a, o, L, D, D, lt);
  wan_step_begin(WAN_STEP_GATE1);
  gated_add_rows(&mr, x, o, L, 2);

  /* cross-attention: norm3 with affine, no modulation, no gate */
  wan_step_begin(WAN_STEP_NORM3);
  kern_cpu_layernorm(x, use(w, w->norm3_w), use(w, w->norm3_b), h, L, D, eps);
  quant_input(w, h, L, D);
  wan_step_begin(WAN_STEP_CROSS_Q);
  project_qk(c, h, QK(w, lora, cross_attn, q), NULL, 0, L, q, lt);
  wan_step_begin(WAN_STEP_CROSS_ATTN);
  kern_cpu_attention(q, ck, cv, a, L, T, NH, HD);
  wan_step_begin(WAN_STEP_CROSS_O);
  quant_input(w, a, L, D);
  block_linear(LIN(w, lora, cross_attn_o), a, o, L, D, D, lt);
  wan_step_begin(WAN_STEP_ADD2);
  kern_cpu_gated_add(x, o, NULL, L, D);

  /* FFN: the pair of ffn.0 is added before the GELU */
  wan_step_begin(WAN_STEP_NORM2);
  kern_cpu_layernorm(x, NULL, NULL, h, L, D, eps);
  modulate_rows(&mr, h, L, 3);
  quant_input(w, h, L, D);
  wan_step_begin(WAN_STEP_FFN_0);
  block_linear(LIN(w, lora, ffn_0), h, f, L, D, FF, lt);
  kern_cpu_gelu_tanh(f, L * FF);
  quant_input(w, f, L, FF);
  wan_step_begin(WAN_STEP_FFN_2);
  block_linear(LIN(w, lora, ffn_2), f, o, L, FF, D, lt);
  wan_step_begin(WAN_STEP_GATE2);
  gated_add_rows(&mr, x, o, L, 5);
}

/* MODEL 5 and 6: (shift, scale) = head.modulation + e (not e0), per time
 * table. With seq, each rank makes its rows of the patches and gathers the
 * others' (every row its own GEMM row) before the unpatchify. */
void rank_dit_head(const wan_config *c, const wan_head_f32 *w, const float *x,
                   const rank_dit_time *tm, const int64_t fhw[3], const rank_dit_seq *seq,
                   float *out, float *scratch) {
  const int64_t F = fhw[0], H = fhw[1], W = fhw[2];
  const int64_t D = c->dim, Lall = F * (H / 2) * (W / 2), P = wan_patch_out(c);
  const int64_t L = rank_dit_seq_rows(seq, Lall), row0 = rank_dit_seq_row0(seq, Lall);
  const int64_t nf = rank_dit_time_first_rows(tm, row0, L);
  float *h = scratch;      /* (L, D) */
  float *t = h + L * D;    /* (Lall, 64) */
  float *ms = t + Lall * P; /* (2, D): shift, scale; then the frame-0 tokens' (2, D) */
  const float *mod = w->head_modulation;
  for (int64_t i = 0; i < 2 * D; i++) ms[i] = mod[i] + tm->e[i % D];
  for (int64_t i = 0; nf > 0 && i < 2 * D; i++) ms[2 * D + i] = mod[i] + tm->e_first[i % D];
  kern_cpu_layernorm(x, NULL, NULL, h, L, D, (float)c->eps);
  if (nf > 0) kern_cpu_modulate(h, ms + 2 * D, ms + 3 * D, h, nf, D);
  kern_cpu_modulate(h + nf * D, ms, ms + D, h + nf * D, L - nf, D);
  kern_cpu_linear(h, w->head_head_w, w->head_head_b, t + row0 * P, L, D, P);
  if (seq) {
    int64_t soff[RANK_SEQ_MAX], sn[RANK_SEQ_MAX], roff[RANK_SEQ_MAX], rn[RANK_SEQ_MAX];
    for (int u = 0; u < seq->n; u++) {
      soff[u] = row0 * P;
      sn[u] = L * P;
      roff[u] = plan_seq_row0(Lall, seq->n, u) * P;
      rn[u] = plan_seq_rows(Lall, seq->n, u) * P;
    }
    seq->exchange(seq->ctx, t, soff, sn, t, roff, rn);
  }
  kern_cpu_unpatchify(t, out, c->out_dim, F, H, W);
}
