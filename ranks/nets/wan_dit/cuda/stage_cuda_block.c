/* One Wan block on the CUDA backend (stage_cuda_impl.h): MODEL 4, the steps
 * of wan_steps.h as rank_dit_block runs them, over chunks of c->rows rows
 * (each step named as it starts, wan_step_begin).
 *
 * Chunking bounds the transients when the planner asks for it (a tight
 * budget): every op but attention is row-wise, so a chunk of rows goes
 * through norm, projections, gates and the FFN on its own. Self-attention
 * needs the keys and values of every row, so its k and v are made first,
 * chunk by chunk, into full-length buffers; then each chunk of queries
 * attends to them and adds its output into its own rows of x (rows a later
 * chunk's queries still read are untouched: queries read x only through
 * their own rows). Unchunked (rows = L) the same code makes one pass.
 *
 * Ulysses (cfg.seq): L is the rank's slice of the tokens. Its k and v are
 * made as above, its queries chunk by chunk into the all-to-all's pack,
 * then the all-to-alls and the attention of its heads over every token run
 * (stage_cuda_seq.c), and each chunk's output comes back for the o
 * projection and the gated add; every other op is per token, on the
 * rank's rows.
 *
 * Each row's result does not depend on the chunking: the norms and
 * element-wise kernels work row by row, the attention kernels row by row
 * of queries, and while chunking the GEMMs keep the algorithm chosen for
 * all L rows (kern_cuda_gemm_pin_rows), so a row's dot products run in the
 * same order in any chunk.
 *
 * A residual add and the norm after it run as one pass over x
 * (kern_cuda_norm_quant, bit-identical to the two calls): add 2
 * with norm2 always; gated add 1 with norm3 when there is one chunk (while
 * chunking, norm3's output would be overwritten by the next query chunk's
 * norm1 in hb, and the FFN hidden shares its memory with the keys the later
 * query chunks still read, so the query loop and the cross/FFN loop stay
 * apart). At W8A8 precision each norm writes only the per-token codes of
 * its output (norm_chunk), which are what the linear layers after it read:
 * the bf16 output is neither written nor read back to be quantised.
 * CUDA builds only. */
#include "stage_cuda_impl.h"

/* The modulation of the rank's rows (I2V.md "A timestep per token"): on a
 * TI2V micro-batch the first nf rows (tokens of latent frame 0 the rank
 * holds) take the second table mf, the rest m; T2V and I2V: nf 0. Every
 * op that reads a table is row-wise, so a chunk that crosses nf runs as
 * two calls, each row exactly as in a call of its own. */
typedef struct cuda_mods {
  const float *m, *mf; /* (6, dim) each, device */
  int64_t nf;
} cuda_mods;

/* Of the chunk of n rows at r0, how many take mf. */
static int64_t first_rows(const cuda_mods *md, int64_t r0, int64_t n) {
  const int64_t k = md->nf - r0;
  return k <= 0 ? 0 : k >= n ? n : k;
}

/* A norm of the chunk of n rows at r0 (kern_cuda_norm_quant): x += y *
 * gate when y is given, then LayerNorm [* nw + nb] [* (1 + scale) +
 * shift], the add and the norm in one pass over x. Its output goes where
 * rank_cuda_norm_out says: c->hb at bf16 precision; at W8A8 only its
 * per-token codes, c->xq and c->xs, which every linear layer after a norm
 * of the block reads (the bypassed pairs read their dequantisation,
 * rank_cuda_quant_lora). */
typedef struct norm_op {
  float *xr;               /* (n, dim) fp32: the chunk's rows of x, written only with y */
  const uint16_t *y;       /* (n, dim) bf16, or NULL: no add */
  int kg;                  /* the gate's modulation chunk, or -1: gate 1 */
  const uint16_t *nw, *nb; /* (dim) bf16 affine, or both NULL */
  int km;                  /* modulation chunks km, km + 1: shift, scale; or -1: none */
} norm_op;

static void norm_chunk(const rank_stage *s, const cuda_stage *c, const cuda_mods *md,
                       const norm_op *o, int64_t r0, int64_t n) {
  const int64_t D = s->c->dim;
  /* the rows that take mf (none when no table is read: one call) */
  const int64_t na = o->kg < 0 && o->km < 0 ? 0 : first_rows(md, r0, n);
  for (int part = 0; part < 2; part++) {
    const float *t = part == 0 ? md->mf : md->m;
    const int64_t a = part == 0 ? 0 : na, rows = part == 0 ? na : n - na;
    if (rows <= 0) continue;
    kern_cuda_norm_quant_params p = {
        .x = o->xr + a * D, .y = o->y ? o->y + a * D : NULL, .y_dtype = KERN_DTYPE_BF16,
        .gate = o->kg >= 0 ? t + o->kg * D : NULL, .w = o->nw, .b = o->nb,
        .shift = o->km >= 0 ? t + o->km * D : NULL,
        .scale = o->km >= 0 ? t + (o->km + 1) * D : NULL, .rows = rows, .dim = D,
        .eps = (float)s->c->eps};
    rank_cuda_norm_out(s, c, c->hb, a, &p);
    kern_cuda_norm_quant(&p, c->stream);
  }
}

/* norm (no affine) and modulation (chunks k, k + 1: shift, scale) of the
 * chunk xr of n rows at r0 (norm_chunk; x only read). */
static void norm_mod(const rank_stage *s, const cuda_stage *c, const cuda_mods *md,
                     const float *xr, int64_t r0, int64_t n, int k) {
  norm_chunk(s, c, md, &(norm_op){(float *)xr, NULL, -1, NULL, NULL, k}, r0, n);
}

/* xr (n, dim) += y (n, dim, bf16) * gate (chunk k) of the chunk at r0. */
static void gate_add(const rank_stage *s, const cuda_stage *c, const cuda_mods *md, float *xr,
                     const uint16_t *y, int64_t r0, int64_t n, int k) {
  const int64_t D = s->c->dim, na = first_rows(md, r0, n);
  if (na > 0) kern_cuda_gated_add(xr, y, KERN_DTYPE_BF16, md->mf + k * D, na, D, c->stream);
  if (n > na)
    kern_cuda_gated_add(xr + na * D, y + na * D, KERN_DTYPE_BF16, md->m + k * D, n - na, D,
                        c->stream);
}

/* One linear layer of the block w (with its bypassed pair from lora):
 * weight field f, bias field bf, input x_ (n_, in_), output y_ (n_, out_)
 * of dtype yt (rank_cuda_linear; at W8A8 the input quantised by the
 * QUANT_INPUT or the norm before it). */
#define LINEAR(f, bf, x_, y_, yt, n_, in_, out_, act_)                                      \
  rank_cuda_linear(s, c, &(cuda_linear){(x_), RANK_CUDA_W(w, f), use(&w->w, w->w.bf),        \
                                        RANK_CUDA_PAIR(lora, f), (y_), (yt), (n_), (in_),    \
                                        (out_), (act_)})
/* The input x (n rows of cols) of the linear layers that follow, quantised
 * per token at W8A8 (one quantisation for q, k and v). */
#define QUANT_INPUT(x_, n_, cols_) rank_cuda_quant_input(s, c, (x_), (n_), (cols_), lora != NULL)
/* The same for an input a norm quantised (norm_chunk): the pairs' copy. */
#define QUANT_NORMED(n_, cols_) rank_cuda_quant_lora(s, c, (n_), (cols_), lora != NULL)

/* After an op of a profiled block (cuda_profile.h; off while chunking). */
#define PROF(name, flops, bytes, rate)                                                   \
  do {                                                                                   \
    if (c->prof) rank_prof_mark(c->prof, name, (double)(flops), (double)(bytes), rate); \
  } while (0)

/* Self-attention's o projection of the chunk of n rows at r0 (its
 * attention output in c->ab) and the gated add 1 into x; whole (one
 * chunk): with norm3 in the same pass over x (norm_chunk: into c->hb, at
 * W8A8 its codes). */
/* Flat list: one step of the block (wan_steps.h) on a chunk: the stage, weights, x, chunk. */
static void self_out(rank_stage *s, cuda_stage *c, const cuda_block *w,
                     const wan_block_lora_bf16 *lora, float *x, const cuda_mods *md, int64_t r0,
                     int64_t n, int whole) {
  const int64_t D = s->c->dim;
  const double LD = (double)s->tokens * (double)D;
  const double gemm_dd = 2.0 * s->tokens * D * D, wdd = 2.0 * D * D;
  wan_step_begin(WAN_STEP_SELF_O);
  QUANT_INPUT(c->ab, n, D);
  LINEAR(self_attn_o_w, self_attn_o_b, c->ab, c->pb, KERN_DTYPE_BF16, n, D, D, KERN_CUDA_ACT_NONE);
  PROF("o projection", gemm_dd, LD * 4 + wdd, RANK_CEIL_GEMM);
  wan_step_begin(WAN_STEP_GATE1);
  if (whole) { /* the gated add and norm3 in one pass over x */
    wan_step_begin(WAN_STEP_NORM3);
    norm_chunk(s, c, md,
               &(norm_op){x, c->pb, 2, use(&w->w, w->w.norm3_w), use(&w->w, w->w.norm3_b), -1},
               0, n);
    PROF("gated add 1+norm3", 0, LD * 12, RANK_CEIL_GEMM);
  } else {
    gate_add(s, c, md, x + r0 * D, c->pb, r0, n, 2);
    PROF("gated add 1", 0, LD * 10, RANK_CEIL_GEMM);
  }
}

/* Self-attention, k and v of every row, chunk by chunk, into c->kb and
 * c->vb. Projections write bf16, as the published model's linears do under
 * bf16 autocast: half the bytes, and the bias fuses into cuBLASLt's
 * epilogue. Norm statistics, the residual stream and the gates stay fp32. */
static void self_kv(rank_stage *s, cuda_stage *c, const cuda_block *w,
                    const wan_block_lora_bf16 *lora, const float *x, const cuda_mods *md) {
  const int64_t L = s->tokens, D = s->c->dim, NH = s->c->heads, HD = wan_head_dim(s->c);
  const int64_t R = c->rows, half = HD / 2;
  const float eps = (float)s->c->eps;
  const double LD = (double)L * (double)D, gemm_dd = 2.0 * L * D * D, wdd = 2.0 * D * D;
  for (int64_t r0 = 0; r0 < L; r0 += R) {
    const int64_t n = L - r0 < R ? L - r0 : R;
    wan_step_begin(WAN_STEP_NORM1);
    norm_mod(s, c, md, x + r0 * D, r0, n, 0);
    PROF("norm1+modulate", 0, LD * 6, RANK_CEIL_GEMM);
    wan_step_begin(WAN_STEP_SELF_K);
    QUANT_NORMED(n, D);
    LINEAR(self_attn_k_w, self_attn_k_b, c->hb, c->pb, KERN_DTYPE_BF16,
           n, D, D, KERN_CUDA_ACT_NONE);
    kern_cuda_rmsnorm_rope(c->pb, KERN_DTYPE_BF16, use(&w->w, w->w.self_attn_norm_k_w),
                           c->cos_t + r0 * half, c->sin_t + r0 * half, c->kb + r0 * D, n, NH, HD,
                           eps, c->stream);
    wan_step_begin(WAN_STEP_SELF_V);
    LINEAR(self_attn_v_w, self_attn_v_b, c->hb, c->vb + r0 * D, KERN_DTYPE_BF16,
           n, D, D, KERN_CUDA_ACT_NONE);
    PROF("k,v projections+norm", 2 * gemm_dd, 2 * (LD * 4 + wdd) + LD * 4, RANK_CEIL_GEMM);
  }
}

/* Cross-attention (norm3 with affine, no modulation, no gate), then the
 * FFN, for the chunk of n rows xr: both are row-wise but for the
 * attention's keys, the prompt's cached context k, v. whole: norm3's
 * output (or its codes) is made already (self_out). */
/* Flat list: steps of the block (wan_steps.h) on a chunk: stage, weights, context k/v, chunk. */
static void cross_ffn(rank_stage *s, cuda_stage *c, const cuda_block *w,
                      const wan_block_lora_bf16 *lora, const uint16_t *ck, const uint16_t *cv,
                      float *xr, int64_t r0, int64_t n, int whole, const cuda_mods *md) {
  const wan_config *cf = s->c;
  const int64_t L = s->tokens, D = cf->dim, NH = cf->heads, HD = wan_head_dim(cf);
  const int64_t T = cf->text_len, F = cf->ffn_dim;
  const float eps = (float)cf->eps;
  cudaStream_t stream = c->stream;
  /* Bytes of the tensors each op must move, for the profile's floors. */
  const double LD = (double)L * (double)D, LF = (double)L * (double)F, TD = (double)T * D;
  const double gemm_dd = 2.0 * L * D * D, wdd = 2.0 * D * D;
  if (!whole) { /* (hb holds a later chunk's norm1 until now) */
    wan_step_begin(WAN_STEP_NORM3);
    norm_chunk(s, c, md,
               &(norm_op){xr, NULL, -1, use(&w->w, w->w.norm3_w), use(&w->w, w->w.norm3_b), -1},
               r0, n);
    PROF("norm3", 0, LD * 6, RANK_CEIL_GEMM);
  }
  wan_step_begin(WAN_STEP_CROSS_Q);
  QUANT_NORMED(n, D);
  LINEAR(cross_attn_q_w, cross_attn_q_b, c->hb, c->pb, KERN_DTYPE_BF16,
         n, D, D, KERN_CUDA_ACT_NONE);
  kern_cuda_rmsnorm_rope(c->pb, KERN_DTYPE_BF16, use(&w->w, w->w.cross_attn_norm_q_w), NULL,
                         NULL, c->qb, n, NH, HD, eps, stream);
  PROF("cross q projection+norm", gemm_dd, LD * 4 + wdd + LD * 4, RANK_CEIL_GEMM);
  wan_step_begin(WAN_STEP_CROSS_ATTN);
  kern_attn_params cp = {c->qb, ck, cv, c->ab, n, T, NH, HD, 0.0f};
  kern_attn_run(c->attn, cp, c->attn_scratch, c->attn_scratch_bytes, stream);
  PROF("cross-attention", 4.0 * L * (double)T * D, LD * 4 + TD * 4, RANK_CEIL_ATTN);
  wan_step_begin(WAN_STEP_CROSS_O);
  QUANT_INPUT(c->ab, n, D);
  LINEAR(cross_attn_o_w, cross_attn_o_b, c->ab, c->pb, KERN_DTYPE_BF16,
         n, D, D, KERN_CUDA_ACT_NONE);
  PROF("cross o projection", gemm_dd, LD * 4 + wdd, RANK_CEIL_GEMM);
  wan_step_begin(WAN_STEP_ADD2); /* and norm2 in the same pass over x */
  wan_step_begin(WAN_STEP_NORM2);
  norm_chunk(s, c, md, &(norm_op){xr, c->pb, -1, NULL, NULL, 3}, r0, n);
  PROF("add 2+norm2+modulate", 0, LD * 12, RANK_CEIL_GEMM);
  wan_step_begin(WAN_STEP_FFN_0);
  QUANT_NORMED(n, D);
  LINEAR(ffn_0_w, ffn_0_b, c->hb, c->fb, KERN_DTYPE_BF16, n, D, F, KERN_CUDA_ACT_GELU_TANH);
  PROF("ffn.0 + gelu", 2.0 * L * D * F, LD * 2 + LF * 2 + 2.0 * D * F, RANK_CEIL_GEMM);
  wan_step_begin(WAN_STEP_FFN_2);
  QUANT_INPUT(c->fb, n, F);
  LINEAR(ffn_2_w, ffn_2_b, c->fb, c->pb, KERN_DTYPE_BF16, n, F, D, KERN_CUDA_ACT_NONE);
  PROF("ffn.2", 2.0 * L * D * F, LF * 2 + LD * 2 + 2.0 * D * F, RANK_CEIL_GEMM);
  wan_step_begin(WAN_STEP_GATE2);
  gate_add(s, c, md, xr, c->pb, r0, n, 5);
  PROF("gated add 3", 0, LD * 10, RANK_CEIL_GEMM);
}

void rank_cuda_block_forward(rank_stage *s, cuda_stage *c, const cuda_block *w,
                             const wan_block_lora_bf16 *lora, const uint16_t *ck,
                             const uint16_t *cv, float *act) {
  const wan_config *cf = s->c;
  const int64_t L = s->tokens, D = cf->dim, NH = cf->heads, HD = wan_head_dim(cf);
  const int64_t R = c->rows, half = HD / 2;
  const float eps = (float)cf->eps;
  const int whole = R >= L; /* one chunk: the normed input serves q, k and v */
  cudaStream_t stream = c->stream;
  float *x = act, *e0 = x + L * D + D;
  const double LD = (double)L * (double)D, gemm_dd = 2.0 * L * D * D, wdd = 2.0 * D * D;
  if (c->prof) rank_prof_block_begin(c->prof);
  wan_step_begin(WAN_STEP_MODULATION);
  /* m = modulation + e0 per table: the second (stage.h: e0 of latent
   * frame 0's tokens, 7 dim after the first) for the rank's rows before
   * s->first_tokens. */
  const uint16_t *mod = use(&w->w, w->w.modulation);
  const int64_t nf = s->first_tokens - rank_cuda_seq_row0(s);
  const cuda_mods md = {.m = c->m, .mf = c->m + 6 * D, .nf = nf <= 0 ? 0 : nf >= L ? L : nf};
  kern_cuda_modulation(mod, e0, c->m, 6 * D, stream);
  if (md.nf > 0) kern_cuda_modulation(mod, e0 + 7 * D, c->m + 6 * D, 6 * D, stream);
  PROF("modulation", 0, 6 * D * 10.0, RANK_CEIL_GEMM);
  self_kv(s, c, w, lora, x, &md);
  /* Each chunk of queries against every key; Ulysses: every chunk's
   * queries packed for the all-to-all first, then the attention of the
   * rank's heads over every token, then each chunk's output. */
  for (int64_t r0 = 0; r0 < L; r0 += R) {
    const int64_t n = L - r0 < R ? L - r0 : R;
    if (!whole) { /* (whole: self_kv's normed input, quantised, serves q too) */
      wan_step_begin(WAN_STEP_NORM1);
      norm_mod(s, c, &md, x + r0 * D, r0, n, 0);
      QUANT_NORMED(n, D);
    }
    wan_step_begin(WAN_STEP_SELF_Q);
    LINEAR(self_attn_q_w, self_attn_q_b, c->hb, c->pb, KERN_DTYPE_BF16,
           n, D, D, KERN_CUDA_ACT_NONE);
    kern_cuda_rmsnorm_rope(c->pb, KERN_DTYPE_BF16, use(&w->w, w->w.self_attn_norm_q_w),
                           c->cos_t + r0 * half, c->sin_t + r0 * half, c->qb, n, NH, HD, eps,
                           stream);
    PROF("q projection+norm", gemm_dd, LD * 4 + wdd + LD * 4, RANK_CEIL_GEMM);
    if (s->cfg.seq) {
      rank_cuda_seq_pack_q(s, c, r0, n);
      continue;
    }
    wan_step_begin(WAN_STEP_SELF_ATTN);
    kern_attn_params sp = {c->qb, c->kb, c->vb, c->ab, n, L, NH, HD, 0.0f};
    kern_attn_run(c->attn, sp, c->attn_scratch, c->attn_scratch_bytes, stream);
    PROF("self-attention", 4.0 * L * (double)L * D, LD * 8, RANK_CEIL_ATTN);
    self_out(s, c, w, lora, x, &md, r0, n, whole);
  }
  if (s->cfg.seq) {
    const double LA = (double)rank_cuda_seq_tokens(s), U = s->cfg.seq->n;
    wan_step_begin(WAN_STEP_SELF_ATTN);
    rank_cuda_seq_attention(s, c);
    PROF("all-to-alls+self-attn", 4.0 * LA * LA * D / U, LA * D / U * 8 + LD * 16,
         RANK_CEIL_ATTN);
    for (int64_t r0 = 0; r0 < L; r0 += R) {
      const int64_t n = L - r0 < R ? L - r0 : R;
      rank_cuda_seq_unpack(s, c, r0, n);
      self_out(s, c, w, lora, x, &md, r0, n, whole);
    }
  }
  for (int64_t r0 = 0; r0 < L; r0 += R) {
    const int64_t n = L - r0 < R ? L - r0 : R;
    cross_ffn(s, c, w, lora, ck, cv, x + r0 * D, r0, n, whole, &md);
  }
  if (c->prof) rank_prof_block_end(c->prof);
}
