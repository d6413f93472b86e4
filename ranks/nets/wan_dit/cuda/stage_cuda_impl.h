/* The CUDA stage's state, shared by its files: stage_cuda.c (arena, load,
 * the per-step calls, streamed blocks), stage_cuda_block.c (one block's
 * forward over row chunks) and stage_cuda_quant.c (a block's linear layers
 * on weights as they are stored: bf16, dequantised right before the GEMM,
 * or W8A8). CUDA builds only. */
#ifndef RANK_STAGE_CUDA_IMPL_H
#define RANK_STAGE_CUDA_IMPL_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "cuda_profile.h"
#include "kern_attn.h"
#include "kern_cuda.h"
#include "kern_cuda_quant.h"
#include "layout.h"
#include "stage_impl.h"
#include "wan_steps.h"

/* Host buffers of the time sinusoid in flight: embed writes one on the host
 * while earlier ones may still be on their way to the device. */
#define CUDA_STAGE_SINUS_RING 8

/* A block's weights on the device (MODEL.md "Quantized weights on the
 * GPU"), laid out as rank_model_device_layout: w, every tensor's address
 * (the bf16 tensors' values; a quantized linear weight's codes), and the
 * ten linear weights as stored (format, codes, row scales), in
 * WAN_BLOCK_LINEARS order. */
typedef struct cuda_block {
  wan_block_bf16 w;
  kern_qtensor lin[WAN_BLOCK_LINEAR_COUNT];
} cuda_block;

/* One expert's device groups and per-prompt cross-attention k/v. */
typedef struct cuda_expert {
  uint16_t *embed_w, *head_w, **block_w; /* device: packed bf16 end groups, the blocks in
                                            their device layouts (NULL: streamed); swapping,
                                            every expert's block_w[b] is the one device
                                            copy */
  uint16_t **host_w;  /* [nblocks] pinned host copy of a streamed block, else NULL */
  uint16_t **swap_w;  /* [nblocks] swapping: pinned host copy of every block, else NULL */
  /* Typed views of the device groups (wan_weights.h), bound once after
   * the arena is placed; a streamed block's view is made at use, on the
   * slot it was copied into (rank_cuda_block_view: its own layout). */
  wan_embed_bf16 embed;   /* of embed_w, when the stage embeds */
  wan_head_bf16 head;     /* of head_w, when the stage has the head */
  cuda_block *blocks;     /* [nblocks] of block_w[b]; zeroed for a streamed block */
  uint16_t *ck, *cv;  /* (prompts, nblocks, text_len, dim) bf16 */
  /* Bypassed LoRAs (rank_stage_set_lora): this expert's pairs per block,
   * views of lora_w[e x nblocks + b], or NULL: no pairs set. */
  wan_block_lora_bf16 *lora;
} cuda_expert;

typedef struct cuda_stage {
  int device;
  cudaStream_t stream;
  kern_cuda_gemm_ctx *gemm;
  kern_attn_ctx *attn;
  char *arena;        /* the one device allocation */
  size_t arena_bytes;
  wan_layout l16[3];  /* bf16 packed layouts */
  cuda_expert ex[RANK_MODEL_MAX_EXPERTS]; /* [s->experts] */
  cuda_expert *x;     /* the expert the calls use (rank_stage_set_expert) */
  /* The blocks' device layouts (rank_model_device_layout at cfg.precision),
   * [experts x nblocks], host memory; each fits block_bytes, the bytes of
   * every device block buffer, slot and pinned copy. */
  wan_layout *blay;
  size_t block_bytes;
  int sm;             /* the GPU's compute capability, major x 10 + minor */
  /* Swapping experts (cfg.swap_experts): the expert whose blocks the
   * device copy holds (or is being copied to hold), per block the event of
   * its last queued use and of its swap copy, and whether the next use
   * must wait for that copy. */
  int on_device;
  int swap_unissued;  /* set_expert asked for a swap whose copies are not queued yet */
  cudaEvent_t *last_use, *swapped; /* [nblocks] */
  uint8_t *swap_pending;           /* [nblocks] */
  int nstreamed, depth;
  int *stream_order;  /* [nstreamed] block index (0-based in the stage) of each streamed block */
  uint16_t **slot_w;  /* [depth] device slots for streamed blocks */
  cudaStream_t copy;  /* host -> device copies of streamed blocks and swaps */
  cudaEvent_t *copied, *freed; /* [depth] slot filled / slot no longer read */
  float *cos_t, *sin_t; /* (L, hd/2) RoPE tables, fp32 */
  int64_t rows;       /* rows per chunk of the block transients (<= L) */
  float *m;           /* (6, dim) modulation of the current block */
  float *e2;          /* (2, dim) e repeated for the head's modulation */
  float *cache_neg;   /* (dim) -1: the step cache's subtracting gate (last stage, cfg.cache) */
  /* Block transients. kb, vb: bf16 k and v of all L rows; fb, the FFN hidden
   * of a chunk, reuses their memory (self-attention is over by then). The
   * rest hold one chunk of rows, bf16: */
  uint16_t *kb, *vb, *fb;
  uint16_t *hb;       /* (rows, dim) normed input of a sub-layer */
  uint16_t *pb;       /* (rows, dim) a projection's output before its norm, or o / ffn.2 */
  uint16_t *qb, *ab;  /* (rows, dim) q after norm and RoPE; attention output */
  float *tok;         /* (L, 64) fp32 patch tokens / head output (stage 0 and last) */
  float *lat;         /* (in_dim, F, H, W) fp32 latent in / prediction out (stage 0 and last) */
  uint16_t *ctxb;     /* (text_len, text_dim) bf16 padded context / (text_len, dim) */
  float *ctxf;        /* (text_len, dim) fp32 */
  uint16_t *ctxh;     /* (text_len, dim) bf16 text-embedding hidden (stage 0) */
  float *tvec;        /* (freq_dim + 2 dim) fp32 time embedding temporaries */
  float *sinus[CUDA_STAGE_SINUS_RING]; /* host, pinned (freq_dim): the time sinusoid */
  cudaEvent_t sinus_used[CUDA_STAGE_SINUS_RING];
  int sinus_next;
  void *attn_scratch;
  size_t attn_scratch_bytes;
  /* Ulysses (cfg.seq; NULL without): the rank holds rows row0 .. row0 + L
   * of the LA tokens (plan_seq_row0); the all-to-all's buffers, bf16: */
  uint16_t *sq;       /* (4, LA, dim / U) q, k, v, attention output of the rank's heads */
  uint16_t *spack;    /* (U, L, dim / U) the rank's rows packed peer by peer */
  /* Bypassed LoRAs (rank_stage_set_lora): every expert's pairs of every
   * block, bf16, as the values of rank_stage_lora_block hold them (the views are
   * ex[e].lora), and at W8A8 the (rows, rank) A x (at bf16 precision the
   * pairs are merged into wdq's copy of their weight instead). */
  uint16_t **lora_w;  /* [experts x nblocks] device, cfg.lora_block_elems each (NULL: no room) */
  uint16_t *lora_t;
  /* Quantized weights (stage_cuda_quant.c): the weight-only path's bf16
   * scratch (a weight dequantised right before its GEMM: its first
   * dequant_bytes, the model's need; then, with bypassed pairs at bf16
   * precision, the copy a weight is merged with them into; wdq_bytes in
   * all, what the layout gave);
   * W8A8's per-token codes (rows, in) e4m3 or int8, their scales (rows),
   * with LoRAs the codes dequantised (rows, in) bf16, and the products'
   * fp32 scratch of the epilogue path (wacc_bytes). NULL when unused. */
  uint16_t *wdq;
  size_t dequant_bytes, wdq_bytes;
  void *xq;
  float *xs;
  uint16_t *xhat;
  void *wacc;
  size_t wacc_bytes;
  rank_prof *prof;    /* NULL unless profiling */
  int mem_traced;     /* the memory table was printed */
} cuda_stage;

/* stage_cuda_load.c: the streamed blocks' pinned copies (every expert's),
 * their order, the copy stream and slot events (lay->slots slots), with
 * swap_experts every block's pinned copy per expert and the swap events,
 * and the per-block weight structs; before the arena is carved. */
void rank_cuda_setup_streaming(rank_stage *s, cuda_stage *c, const plan_layout *lay);
/* Reads every expert's groups of the stage and places them (the arena, or
 * the pinned copies); stats.weights_s is the time it took. SP_OK or the
 * reader's status. */
int rank_cuda_place_weights(rank_model *m, rank_stage *s, cuda_stage *c, uint64_t *bytes_read);

/* stage_cuda_layout.c: the stage's layout for a latent of `tokens` tokens
 * (every rank's rows together), this rank holding `rows` of them (Ulysses:
 * a slice; else rows = tokens), and `voxels` voxels (SP_OK or logged
 * SP_ERR_INPUT); its
 * carving for s->tokens with the chunk rows, the profile and the RoPE
 * tables (keep: a re-layout, the weights, slots and prompt k, v stay);
 * the attention's plans for s->tokens built ahead of the first step; the
 * stage's relayout op (stage_impl.h). */
int rank_cuda_stage_layout(const rank_stage *s, const cuda_stage *c, int64_t tokens,
                           int64_t rows, int64_t voxels, plan_layout *out);
/* Voxels of the stage's current latent (frames x height x width). */
static inline int64_t rank_cuda_voxels(const rank_stage *s) {
  return s->cfg.lat_f * s->cfg.lat_h * s->cfg.lat_w;
}
void rank_cuda_lay_out(rank_stage *s, cuda_stage *c, const plan_layout *lay, int keep);
void rank_cuda_warm_attention(rank_stage *s, cuda_stage *c);
int rank_cuda_relayout(rank_stage *s);

/* Ulysses (DESIGN.md "Layouts"; NULL seq: one rank holds every token). */
/* Every rank's tokens together, and this rank's first row. */
static inline int64_t rank_cuda_seq_tokens(const rank_stage *s) {
  return rank_grid_tokens(s->grid);
}
static inline int64_t rank_cuda_seq_row0(const rank_stage *s) {
  return s->cfg.seq ? plan_seq_row0(rank_grid_tokens(s->grid), s->cfg.seq->n, s->cfg.seq->me)
                    : 0;
}
/* The rows a GEMM's algorithm is chosen for while the stage's rows run
 * (kern_cuda_gemm_pin_rows): chunks keep the all-rows algorithm, and a
 * Ulysses rank the algorithm of every token's rows, so each row's dot
 * products run as on one rank holding them all; 0: no pin. */
static inline int64_t rank_cuda_pin_rows(const rank_stage *s, const cuda_stage *c) {
  if (s->cfg.seq) return rank_cuda_seq_tokens(s);
  return c->rows < s->tokens ? s->tokens : 0;
}

/* stage_cuda_seq.c. q of the chunk of n rows at row r0 of the rank's
 * (in c->qb) into their places of c->spack. */
void rank_cuda_seq_pack_q(rank_stage *s, cuda_stage *c, int64_t r0, int64_t n);
/* Self-attention of the rank's heads over every token, as rank_dit_block's
 * self_attention (dit_cpu.c): q (packed, rank_cuda_seq_pack_q), k, v (kb,
 * vb) each sent to the ranks in turn by an all-to-all, the attention over
 * every token for dim / U of the width, its output sent back into spack.
 * Waits on the host for each all-to-all. */
void rank_cuda_seq_attention(rank_stage *s, cuda_stage *c);
/* The attention output of the chunk of n rows at row r0 from c->spack
 * into c->ab. */
void rank_cuda_seq_unpack(rank_stage *s, cuda_stage *c, int64_t r0, int64_t n);
/* The head's output tok (LA, cols) fp32, of which the rank made its rows,
 * completed with every other rank's rows. */
void rank_cuda_seq_gather(rank_stage *s, cuda_stage *c, float *tok, int64_t cols);

/* Block weight p of w, noted in the step log when a test attaches one
 * (wan_steps.h). */
static inline const uint16_t *use(const wan_block_bf16 *w, const uint16_t *p) {
  if (wan_step_logging()) wan_step_weight(wan_block_bf16_index(w, p));
  return p;
}
/* Linear weight i (a block tensor index) of view w at p, noted as use does. */
static inline const kern_qtensor *rank_cuda_use_linear(const cuda_block *w, const uint16_t *p,
                                                       int i) {
  use(&w->w, p);
  return &w->lin[wan_block_linear_of(i)];
}

/* MODEL 4 on the GPU on the activation message act (in place), weights w
 * (device), the prompt's cross-attention k, v: the steps of wan_steps.h,
 * as rank_dit_block runs them, over row chunks of c->rows. Queued on
 * c->stream. */
void rank_cuda_block_forward(rank_stage *s, cuda_stage *c, const cuda_block *w,
                             const wan_block_lora_bf16 *lora, const uint16_t *ck,
                             const uint16_t *cv, float *act);

/* stage_cuda_quant.c. The view of a block whose device layout is l at
 * base (device memory): its tensors' addresses and linear weights. */
void rank_cuda_block_view(const wan_layout *l, const void *base, cuda_block *out);
/* The view of block b (0-based in the stage) of expert e copied to base. */
static inline void rank_cuda_block_view_of(const rank_stage *s, const cuda_stage *c, int e,
                                           int b, const void *base, cuda_block *out) {
  rank_cuda_block_view(&c->blay[e * s->nblocks + b], base, out);
}
/* The input x (rows, cols) bf16 of the linear layers that follow (one
 * input, several layers: q, k and v), at W8A8 precision quantised per
 * token into c->xq and c->xs (and, with lora set, dequantised into
 * c->xhat for the pairs); nothing at bf16 precision. Queued on c->stream. */
void rank_cuda_quant_input(const rank_stage *s, cuda_stage *c, const uint16_t *x, int64_t rows,
                           int64_t cols, int lora);
/* With lora set at W8A8 precision, the codes c->xq, c->xs of an input
 * (rows, cols) dequantised into c->xhat for the pairs; nothing else. The
 * end of rank_cuda_quant_input, for codes a norm wrote (rank_cuda_norm_out). */
void rank_cuda_quant_lora(const rank_stage *s, cuda_stage *c, int64_t rows, int64_t cols,
                          int lora);
/* Where the norm p (p->dim set) of the rows from row0 of a chunk writes:
 * into h (chunk rows, dim) bf16 at bf16 precision; at W8A8 precision only
 * its per-token codes, into c->xq and c->xs at row0 (kern_cuda_norm_quant:
 * the bytes rank_cuda_quant_input would make of h, which the W8A8 layers
 * after the norm read instead of h). Sets p->h, p->qfmt, p->q, p->qscale. */
void rank_cuda_norm_out(const rank_stage *s, const cuda_stage *c, uint16_t *h, int64_t row0,
                        kern_cuda_norm_quant_params *p);
/* One linear layer of a block: y (rows, out) = act(x W^T + b) [+ the
 * bypassed pair], x (rows, in) bf16, W as the device holds it: bf16 as
 * is; at bf16 precision another format dequantised into c->wdq first (the
 * weight-only path), and a bypassed pair merged with the weight into a
 * copy after it in c->wdq (kern_cuda_lora_merge); at
 * W8A8 precision the GEMM of c->xq (the caller's rank_cuda_quant_input of
 * x) and W's codes with both scales, the pair on the dequantised input
 * c->xhat. Queued on c->stream. */
typedef struct cuda_linear {
  const uint16_t *x;        /* (rows, in) bf16 */
  const kern_qtensor *w;    /* (out, in) as stored on the device */
  const uint16_t *b;        /* (out) bf16 or NULL */
  const wan_lora_bf16 *lora; /* its bypassed pair, or NULL */
  void *y;                  /* (rows, out) */
  kern_dtype y_dtype;
  int64_t rows, in, out;
  kern_cuda_act act;
} cuda_linear;
void rank_cuda_linear(const rank_stage *s, cuda_stage *c, const cuda_linear *l);
/* The linear weight of field f of block view w (WAN_BLOCK_LINEARS), noted
 * in the step log (use, below). */
#define RANK_CUDA_W(w, f) rank_cuda_use_linear(w, (w)->w.f, WAN_BLOCK_T_##f)
/* The stage can run at its precision on this GPU (W8A8 fp8 needs sm_89 or
 * sm_90, --fp8-accum fast sm_90; the epilogue path's scratch where it is
 * taken): SP_OK, or
 * SP_ERR_INPUT after one line naming the GPU and the remedy. */
int rank_cuda_precision_check(const rank_stage *s, const cuda_stage *c);

/* lora's pair for a field, or NULL when there is no bypassed LoRA. */
#define RANK_CUDA_PAIR(lora, field) ((lora) ? &(lora)->field : NULL)

#endif
