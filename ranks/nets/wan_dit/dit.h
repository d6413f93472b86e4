/* The Wan 2.1 DiT forward on the CPU backend, in the pieces a pipeline
 * stage calls (MODEL.md "Forward, op by op"):
 *
 *   stage 0      rank_dit_embed_time / _text / _patch     (embed weights)
 *   every stage  rank_dit_context_kv  once per prompt, per own block
 *                rank_dit_block       per step, per own block
 *   last stage   rank_dit_head        (head weights) + unpatchify
 *
 * Weights are fp32 groups in the packed layout of wan_layout_make(..., F32)
 * (rank_dit_widen converts a group read in the file's dtype), seen through
 * the typed structs of wan_weights.h (wan_block_f32_bind, ...); a block
 * whose struct says fp8 runs its linear layers in fp8 (MODEL.md "fp8
 * weights": its weights dequantised e4m3, their inputs quantised per
 * token here). Residual stream x (L, dim) fp32. All scratch comes from one
 * arena the caller sizes with rank_dit_scratch_floats() up front; nothing
 * here allocates. */
#ifndef RANK_DIT_H
#define RANK_DIT_H

#include <stddef.h>
#include <stdint.h>

#include "grid.h"
#include "wan_config.h"
#include "wan_weights.h"

/* The token grid of a latent (F, H, W): (F, H/2, W/2) for patch (1,2,2). */
typedef struct rank_grid {
  int64_t f, h, w;
} rank_grid;

static inline int64_t rank_grid_tokens(rank_grid g) { return g.f * g.h * g.w; }

/* Per-workload tables shared by all blocks of a stage: the RoPE angles. */
typedef struct rank_rope {
  rank_grid grid;
  double *cos_t; /* (L, head_dim/2) */
  double *sin_t; /* (L, head_dim/2) */
} rank_rope;

int rank_rope_init(const wan_config *c, rank_grid grid, rank_rope *out);
void rank_rope_free(rank_rope *r);

/* Ulysses sequence parallelism (DESIGN.md "Layouts"): the L tokens split
 * over n ranks by plan_seq_row0 (planner/grid.h), contiguous slices. */

/* The exchange among the n ranks of a stage (an all-to-all): this rank
 * sends scount[v] floats from send + soff[v] to rank v and receives
 * rcount[v] floats from rank v at recv + roff[v], v = 0 .. n - 1 (itself
 * included: a copy). */
typedef void (*rank_seq_exchange_fn)(void *ctx, const float *send, const int64_t *soff,
                                     const int64_t *scount, float *recv, const int64_t *roff,
                                     const int64_t *rcount);

#define RANK_SEQ_MAX 64

/* The calls below take NULL for one rank holding every token. */
typedef struct rank_dit_seq {
  int n, me;                     /* ranks of the stage (2 .. RANK_SEQ_MAX, dividing the
                                    heads); this rank's index */
  int64_t tokens;                /* L, every rank's rows together */
  rank_seq_exchange_fn exchange; /* the all-to-all, with its ctx */
  void *ctx;
} rank_dit_seq;

/* This rank's first row and its rows of the token sequence (all of them
 * when seq is NULL). */
int64_t rank_dit_seq_row0(const rank_dit_seq *seq, int64_t L);
int64_t rank_dit_seq_rows(const rank_dit_seq *seq, int64_t L);

/* Converts a packed group from the file's dtype (src layout) into fp32
 * (dst layout of the same group made with KERN_DTYPE_F32). */
void rank_dit_widen(const wan_layout *src_l, const void *src, const wan_layout *dst_l,
                    float *dst);

/* Floats of scratch rank_dit_block / _context_kv / _head / _embed_patch
 * need for L tokens split over seq_n ranks (1: one rank holds them all),
 * with bypassed LoRA pairs of rank at most lora_rank (0: none). */
size_t rank_dit_scratch_floats(const wan_config *c, int64_t tokens, int seq_n,
                               int64_t lora_rank);

/* The time embedding of a micro-batch's tokens (MODEL.md step 2; I2V.md "A
 * timestep per token"): e (dim) and e0 (6, dim) of its timestep for every
 * token, or, on a TI2V model, a second pair for the `first` tokens of
 * latent frame 0 (their own timestep: 0 when that frame is the image).
 * first counts tokens of the whole sequence (their global index), so a
 * Ulysses rank or a chunk whose rows cross it splits there. first = 0 (and
 * the _first pointers NULL): one timestep for all, exactly MODEL.md's. */
typedef struct rank_dit_time {
  const float *e, *e0;             /* tokens first .. L - 1 */
  const float *e_first, *e0_first; /* tokens 0 .. first - 1 */
  int64_t first;
} rank_dit_time;

/* Of rows row0 .. row0 + n - 1 of the sequence, how many take the _first
 * pair (the rows before tm->first): 0..n. */
int64_t rank_dit_time_first_rows(const rank_dit_time *tm, int64_t row0, int64_t n);

/* e (dim) and e0 (6, dim) from the integer timestep t. */
void rank_dit_embed_time(const wan_config *c, const wan_embed_f32 *w, double t, float *e,
                         float *e0, float *scratch);
/* ctx (text_len, dim) from context (L, text_dim), rows L..text_len-1 zero. */
void rank_dit_embed_text(const wan_config *c, const wan_embed_f32 *w,
                         const float *context, int64_t L, float *ctx, float *scratch);
/* x (rows, dim) from latent (in_dim, F, H, W), fhw = {F, H, W}: this
 * rank's rows of the token sequence (seq), all of them when seq is NULL. */
void rank_dit_embed_patch(const wan_config *c, const wan_embed_f32 *w, const float *latent,
                          const int64_t fhw[3], const rank_dit_seq *seq, float *x,
                          float *scratch);

/* lora in the two calls below: the block's bypassed LoRA pairs (MODEL.md
 * "LoRA", bypass), each added after its linear layer as y += B (A x) in
 * fp32, their ranks within the lora_rank the scratch was sized for; NULL
 * for none (the forward is then exactly the one without LoRAs). */

/* Cross-attention k, v (text_len, dim) of one block from ctx. */
void rank_dit_context_kv(const wan_config *c, const wan_block_f32 *w,
                         const wan_block_lora_f32 *lora, const float *ctx, float *k, float *v,
                         float *scratch);

/* One transformer block on x (rows, dim) in place, the steps of
 * wan_steps.h in its order. tm: the tokens' e0 (the modulation of each
 * row is its table's); ck, cv from rank_dit_context_kv.
 * With seq, x holds this rank's rows of the sequence (their RoPE
 * positions are their global ones) and the self-attention exchanges heads
 * with the stage's other ranks (every one calls it); per row and head it
 * computes exactly what one rank holding every token does. */
void rank_dit_block(const wan_config *c, const wan_block_f32 *w, const wan_block_lora_f32 *lora,
                    float *x, const rank_dit_time *tm, const float *ck, const float *cv,
                    const rank_rope *rope, const rank_dit_seq *seq, float *scratch);

/* Head and unpatchify: out (out_dim, F, H, W), fhw = {F, H, W}, from x
 * (rows, dim) and the tokens' e (tm, each row its table's).
 * With seq, x holds this rank's rows and every rank of the stage gets the
 * whole out (the rows are gathered before the unpatchify). */
void rank_dit_head(const wan_config *c, const wan_head_f32 *w, const float *x,
                   const rank_dit_time *tm, const int64_t fhw[3], const rank_dit_seq *seq,
                   float *out, float *scratch);

#endif
