/* The steps of one Wan transformer block (MODEL.md "Forward, op by op",
 * step 4), in the order both backends run them, and the block weights each
 * step reads: the one description the CPU block (dit_cpu.c) and the CUDA
 * block (cuda/stage_cuda_block.c) follow.
 *
 * A step is one sub-layer's op as MODEL.md writes it; a backend may run it
 * as several kernels (the CPU's layernorm then modulate) or fuse it with
 * the next step (the CUDA gated add with the norm after it). Unchunked,
 * both backends run exactly this sequence. The CUDA block may also run
 * rows in chunks: then each step runs once per chunk (norm1 twice: before
 * k and v, again before the queries), the steps first run in this order.
 * Always, each step reads these weights and no others.
 *
 * Both backends name each step as they start it (wan_step_begin) and each
 * block weight as they pass it to a kernel (wan_step_weight). That costs a
 * branch while no log is attached (the default); a test attaches a
 * wan_step_log, runs a block on either backend, and compares the log with
 * wan_steps[]. */
#ifndef WAN_STEPS_H
#define WAN_STEPS_H

#include "wan_weights.h"

typedef enum {
  /* Per prompt (cross-attention k, v of the context; rank_dit_context_kv). */
  WAN_STEP_CROSS_K,    /* k = RMSNorm(Wk ctx + bk) * norm_k */
  WAN_STEP_CROSS_V,    /* v = Wv ctx + bv */
  /* Per step, per block (rank_dit_block). */
  WAN_STEP_MODULATION, /* m = modulation + e0: shift1, scale1, gate1, shift2, scale2, gate2 */
  WAN_STEP_NORM1,      /* h = LayerNorm(x) * (1 + scale1) + shift1 */
  WAN_STEP_SELF_K,     /* k = RoPE(RMSNorm(Wk h + bk) * norm_k) */
  WAN_STEP_SELF_V,     /* v = Wv h + bv */
  WAN_STEP_SELF_Q,     /* q = RoPE(RMSNorm(Wq h + bq) * norm_q) */
  WAN_STEP_SELF_ATTN,  /* a = attention(q, k, v) over every token */
  WAN_STEP_SELF_O,     /* o = Wo a + bo */
  WAN_STEP_GATE1,      /* x += o * gate1 */
  WAN_STEP_NORM3,      /* h = LayerNorm(x) * norm3.w + norm3.b */
  WAN_STEP_CROSS_Q,    /* q = RMSNorm(Wq h + bq) * norm_q */
  WAN_STEP_CROSS_ATTN, /* a = attention(q, context k, context v) */
  WAN_STEP_CROSS_O,    /* o = Wo a + bo */
  WAN_STEP_ADD2,       /* x += o */
  WAN_STEP_NORM2,      /* h = LayerNorm(x) * (1 + scale2) + shift2 */
  WAN_STEP_FFN_0,      /* f = GELU_tanh(W1 h + b1) */
  WAN_STEP_FFN_2,      /* o = W2 f + b2 */
  WAN_STEP_GATE2,      /* x += o * gate2 */
  WAN_STEP_COUNT
} wan_step;

#define WAN_STEP_FIRST_CONTEXT WAN_STEP_CROSS_K
#define WAN_STEP_FIRST_BLOCK WAN_STEP_MODULATION
#define WAN_STEP_MAX_WEIGHTS 3

typedef struct wan_step_desc {
  const char *name;                    /* "self_k" */
  int nweights;
  wan_block_tensor w[WAN_STEP_MAX_WEIGHTS]; /* the block tensors it reads */
} wan_step_desc;

/* The description, indexed by wan_step. */
extern const wan_step_desc wan_steps[WAN_STEP_COUNT];

/* What a backend ran: one entry per wan_step_begin, with the block tensors
 * (layout indices, wan_block_tensor) passed to kernels until the next. */
#define WAN_STEP_LOG_MAX 1024
typedef struct wan_step_entry {
  wan_step step;
  int nweights;
  int w[WAN_STEP_MAX_WEIGHTS + 1]; /* one spare: a step that reads too many shows it */
} wan_step_entry;

typedef struct wan_step_log {
  int n;        /* entries recorded (those past WAN_STEP_LOG_MAX are counted, not kept) */
  int stray;    /* a weight passed before any step, or more than an entry holds */
  wan_step_entry e[WAN_STEP_LOG_MAX];
} wan_step_log;

/* Starts (log) or stops (NULL) recording; the process has one log at a
 * time. The caller zeroes the log. */
void wan_step_log_attach(wan_step_log *log);
/* 1 while a log is attached. */
int wan_step_logging(void);
/* A backend starts step s. */
void wan_step_begin(wan_step s);
/* A backend passes block tensor t (a wan_block_tensor, or -1 when the
 * pointer is none of the block's) to a kernel in the current step. */
void wan_step_weight(int t);

#endif
