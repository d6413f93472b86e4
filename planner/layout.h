/* The device layout of a CUDA pipeline stage: every buffer of its one
 * device arena, with what it holds, its offset and its bytes, in the order
 * the stage carves them. The planner's memory model of a rank is this
 * layout's total (plan_act_bytes, plan_make's peak), and the CUDA stage
 * (ranks/nets/wan_dit/cuda/stage_cuda.c) places its pointers at these offsets: one
 * layout, two users, so a plan that fits is an arena that fits.
 *
 * Pure C11 like the rest of planner/: plain sizes in, offsets out. The
 * simple attention backend's scratch formula lives here too
 * (plan_attn_scratch_bytes), and kernels/cuda_attention.cu calls it. */
#ifndef PLAN_LAYOUT_H
#define PLAN_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every buffer starts at a multiple of this many bytes from the arena's
 * start (cudaMalloc's own alignment is larger): the GEMM and attention
 * kernels want 16-byte operands, the attention scratch 256. */
#define PLAN_LAYOUT_ALIGN 256
/* Limits of one layout: prefetch slots (plan_options.prefetch_depth) and
 * activation buffers (block-major: the planner's 1024 micro-batches and a
 * receive buffer). */
#define PLAN_LAYOUT_MAX_SLOTS 16
#define PLAN_LAYOUT_MAX_ACT 1025
/* Experts one layout holds at most (Wan 2.2 A14B: two). */
#define PLAN_LAYOUT_MAX_EXPERTS 2
/* Buffers of one layout at most: every block (each expert's weights and
 * LoRA pairs), slot and activation buffer, each expert's embedding, head
 * and cross-attention k, v, and the 24 others (32: room to spare). */
#define PLAN_LAYOUT_MAX                                                                        \
  (2 * PLAN_LAYOUT_MAX_EXPERTS * PLAN_MAX_BLOCKS + PLAN_LAYOUT_MAX_SLOTS +                     \
   PLAN_LAYOUT_MAX_ACT + 4 * PLAN_LAYOUT_MAX_EXPERTS + 32)
/* Scores the simple attention backend may hold at once: as many query rows
 * per chunk as this many bytes of scratch hold (at least one). */
#define PLAN_ATTN_SCRATCH_CAP ((uint64_t)1 << 30)

/* What a buffer holds; the stage's field names in brackets. In carve
 * order. */
typedef enum plan_buf {
  PLAN_BUF_EMBED_W = 0, /* [ex[e].embed_w] packed embedding weights of expert e (first stage) */
  PLAN_BUF_HEAD_W,      /* [ex[e].head_w] packed head weights of expert e (last stage) */
  PLAN_BUF_BLOCK_W,     /* [ex[e].block_w[i]] packed weights of resident block i of the stage,
                           index e x nblocks + i (swap: expert 0's only, the one device copy) */
  PLAN_BUF_SLOT_W,      /* [slot_w[k]] prefetch slot k for streamed blocks */
  PLAN_BUF_CTX_K,       /* [ex[e].ck] (prompts, nblocks, text_len, dim) cross-attention k, index e */
  PLAN_BUF_CTX_V,       /* [ex[e].cv] (prompts, nblocks, text_len, dim) cross-attention v, index e */
  PLAN_BUF_ACT,         /* [act[i]] activation message i: x (L, dim) | (e (dim) | e0 (6, dim)) per
                           time table, fp32 */
  PLAN_BUF_KV,          /* [kb, vb, fb] k and v (L, dim) each, or the FFN hidden (rows, ffn_dim): a union */
  PLAN_BUF_HB,          /* [hb] (rows, dim) normed input of a sub-layer */
  PLAN_BUF_PB,          /* [pb] (rows, dim) a projection's output */
  PLAN_BUF_QB,          /* [qb] (rows, dim) q after norm and RoPE */
  PLAN_BUF_AB,          /* [ab] (rows, dim) attention output */
  PLAN_BUF_CTXB,        /* [ctxb] (text_len, max(text_dim, dim)) context GEMM operand */
  PLAN_BUF_CTXF,        /* [ctxf] (text_len, dim) fp32 embedded context */
  PLAN_BUF_CTXH,        /* [ctxh] (text_len, dim) text-embedding hidden (first stage) */
  PLAN_BUF_COS,         /* [cos_t] (L, head_dim / 2) fp32 RoPE table */
  PLAN_BUF_SIN,         /* [sin_t] (L, head_dim / 2) fp32 RoPE table */
  PLAN_BUF_MOD,         /* [m] (6, dim) fp32 modulation of the current block, per time table */
  PLAN_BUF_E2,          /* [e2] (2, dim) fp32 e repeated for the head's modulation, per time
                           table */
  PLAN_BUF_TVEC,        /* [tvec] (freq_dim + 2 dim) fp32 time-embedding temporaries */
  PLAN_BUF_TOK,         /* [tok] (L, max patch in/out) fp32 patch tokens (end stages) */
  PLAN_BUF_LAT,         /* [lat] (max channels, latent voxels) fp32 latent (end stages) */
  PLAN_BUF_ATTN_SCRATCH, /* [attn_scratch] scores of the simple attention backend */
  PLAN_BUF_LORA_W,      /* [lora_w[i]] bypassed LoRA pairs of block i of the stage (every block),
                           index e x nblocks + i for expert e */
  PLAN_BUF_LORA_T,      /* [lora_t] (max(rows, text_len), lora rank) a LoRA's A x (W8A8) */
  PLAN_BUF_SEQ_HEADS,   /* Ulysses: q, k, v and the attention output of the rank's heads for
                           every token, 4 x (all tokens, dim / seq) */
  PLAN_BUF_SEQ_PACK,    /* Ulysses: (L, dim) the rank's rows packed peer by peer for the
                           all-to-all */
  PLAN_BUF_CACHE_RES,   /* [res] (prompts, L, dim) fp32 step cache: the residual of the whole
                           transformer per micro-batch (last stage) */
  PLAN_BUF_CACHE_IN,    /* [in] (prompts, L, dim) fp32 step cache: each micro-batch's input on
                           its way to the last stage (first stage, when not also last) */
  PLAN_BUF_CACHE_NEG,   /* [cache_neg] (dim) fp32 of -1: the gate that makes the gated add
                           subtract (the residual, last stage) */
  PLAN_BUF_DEQUANT,     /* [wdq] bf16: a block's weight dequantised right before its GEMM (the
                           weight-only path: plan_model.dequant_bytes), then, with bypassed
                           LoRA pairs at bf16 precision, from plan_layout_align(dequant_bytes)
                           on, dim x max(dim, ffn_dim) for a weight merged with its pairs */
  PLAN_BUF_XQ,          /* [xq] (max(rows, text_len), max(dim, ffn_dim)) e4m3 or int8: a linear
                           layer's input quantised per token (W8A8) */
  PLAN_BUF_XS,          /* [xs] (max(rows, text_len)) fp32: its tokens' scales */
  PLAN_BUF_XHAT,        /* [xhat] (max(rows, text_len), max(dim, ffn_dim)) bf16: the quantised
                           input dequantised, the bypassed LoRA pairs' input (W8A8 with LoRAs) */
  PLAN_BUF_W8A8_ACC,    /* [wacc] fp32 (max(rows x ffn_dim, text_len x dim)): the W8A8
                           products before their scales (w8a8_epilogue) */
  PLAN_BUF_KINDS
} plan_buf;

/* Everything the layout depends on. The planner fills it from its model,
 * workload and rank (plan_stage_shape_of); the CUDA stage from its config
 * and its packed bf16 layouts. */
typedef struct plan_stage_shape {
  /* the model */
  int64_t dim, ffn_dim, heads, head_dim, text_len, text_dim, freq_dim;
  int64_t in_dim, out_dim, patch; /* latent channels in and out; patch volume (1x2x2: 4) */
  int operand_bytes;              /* width of a GEMM operand: 2 (bf16) on the CUDA stage */
  uint64_t embed_bytes, head_bytes, block_bytes; /* one group's weights of one expert (0: count
                                                    no weights) */
  int experts;    /* experts held (0 or 1: one; 2: Wan 2.2 A14B), each with its own weights
                     and cross-attention k, v */
  int swap;       /* two experts, blocks swapped at the switch (PLAN_EXPERTS_SWAP): one
                     device copy of each block, the other expert's in host memory */
  /* the workload */
  int64_t tokens;        /* L: the rank's rows of the sequence (Ulysses: its slice) */
  int64_t seq_tokens;    /* Ulysses: every rank's rows together (0: tokens) */
  int seq;               /* Ulysses ranks sharing the sequence (0 or 1: none) */
  int64_t latent_voxels; /* latent frames x height x width */
  int prompts;           /* prompt slots: micro-batches of a step */
  /* the rank */
  int nblocks;
  const uint8_t *streamed; /* (nblocks) 1 = in pinned host memory; NULL: all resident */
  int prefetch_depth;      /* slots asked for (0: 2), at most the streamed count */
  int has_embed, has_head;
  int act_buffers;         /* plan_act_buffers */
  int64_t chunk_rows;      /* rows of the block transients; 0 or >= L: L */
  int simple_attn;         /* the stage runs the simple attention backend */
  /* bypassed LoRAs (plan_model's lora_block_elems, lora_rank; 0: none) */
  uint64_t lora_elems;
  int64_t lora_rank;
  int cache; /* step caching (plan_model.cache) */
  int time_tables; /* 0 or 1: one; 2: TI2V's second e, e0 per message (plan_model) */
  /* quantized weights (plan_model's dequant_bytes, w8a8, w8a8_epilogue) */
  uint64_t dequant_bytes;
  int w8a8, w8a8_epilogue;
} plan_stage_shape;

typedef struct plan_buffer {
  plan_buf kind;
  int index;       /* block (0-based in the stage; + e x nblocks for expert e), slot,
                      activation buffer or expert (weights and k, v of the end groups); else 0 */
  uint64_t offset; /* from the arena's start, a multiple of PLAN_LAYOUT_ALIGN */
  uint64_t bytes;
} plan_buffer;

typedef struct plan_layout {
  int count;
  int nstreamed;   /* streamed blocks */
  int slots;       /* prefetch slots carved (0 when nothing is streamed) */
  int64_t rows;    /* chunk rows of the block transients (1..L) */
  uint64_t total;  /* arena bytes: the end of the last buffer */
  plan_buffer b[PLAN_LAYOUT_MAX];
} plan_layout;

/* bytes rounded up to PLAN_LAYOUT_ALIGN. */
uint64_t plan_layout_align(uint64_t bytes);

/* Bytes of a step cache buffer (PLAN_BUF_CACHE_RES or _CACHE_IN): one
 * (tokens, dim) fp32 activation per micro-batch of a step; UINT64_MAX on
 * overflow. */
uint64_t plan_layout_cache_bytes(int prompts, int64_t tokens, int64_t dim);

/* What kind k holds, in a few words ("cross-attention k", ...). */
const char *plan_buf_name(plan_buf k);

/* Lays a stage out. PLAN_EINVAL (message in err) for a shape no stage has:
 * sizes below 1, more than PLAN_LAYOUT_MAX_ACT buffers, a total that
 * overflows. The layout is built in place (it is large, and the planner's
 * model makes many): on failure *out is partial and must not be used. */
int plan_layout_make(const plan_stage_shape *s, plan_layout *out, char *err, size_t errlen);

/* Arena bytes of a group counted as `bytes` for every expert of m (block,
 * embedding or head) when `copies` of its one-expert share are held:
 * each an aligned buffer of its own. */
static inline uint64_t plan_layout_group_bytes(const plan_model *m, uint64_t bytes, int copies) {
  return (uint64_t)copies * plan_layout_align(plan_expert_bytes(m, bytes));
}
/* Copies of each group a rank of m holds on the device: every expert's. */
static inline int plan_layout_copies(const plan_model *m) {
  return m->experts > 1 ? m->experts : 1;
}

/* The buffer of kind k and index i, NULL when the layout has none. */
const plan_buffer *plan_layout_find(const plan_layout *l, plan_buf kind, int index);

/* The shape of rank q of a plan for model m and workload w, as the CUDA
 * stage would see it: streamed flags of q's blocks (NULL: none), bf16
 * operands when the model's weight width is 2, simple_attn as the plan
 * options say; one expert's group bytes, m's experts, swap when q's
 * experts_mode is PLAN_EXPERTS_SWAP; with w->seq > 1 the rows of Ulysses'
 * largest slice (plan_rank_tokens) and the all-to-all's buffers. */
void plan_stage_shape_of(const plan_model *m, const plan_workload *w, const plan_rank *q,
                         const uint8_t *streamed, int simple_attn, plan_stage_shape *out);

/* Scratch of the simple attention backend processing `chunk` queries at a
 * time against Lk keys: fp32 scores and bf16 probabilities of every head,
 * rows padded to 8 elements, each part 256-byte aligned. 0 for sizes below
 * 1; SIZE_MAX when it cannot exist. kern_cuda_attention_scratch_bytes
 * returns this. */
size_t plan_attn_scratch_bytes(int64_t chunk, int64_t Lk, int64_t heads);

/* The scratch a stage gives the simple backend: Lk = max(L, text_len) (self
 * and cross attention share it), as many query rows as
 * PLAN_ATTN_SCRATCH_CAP holds, at least one, at most L. */
uint64_t plan_attn_stage_scratch_bytes(int64_t tokens, int64_t text_len, int64_t heads);

#ifdef __cplusplus
}
#endif

#endif
