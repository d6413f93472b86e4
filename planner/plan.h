/* The planner: budget strings, the memory and time model of a rank, the
 * optimal split of the transformer blocks over the pipeline ranks, and the
 * plan's text, JSON and binary forms.
 *
 * Pure C11 (libm only): no CUDA, no HDF5, no MPI, no comm/. It takes plain
 * structs of sizes, so `staticpipe plan` can plan for hardware that is not
 * there. Functions that can fail return 0 or a nonzero PLAN_E* status and
 * write one user-actionable line into the caller's buffer (err, errlen),
 * quoting the bad token; outputs are set only on success. */
#ifndef PLAN_H
#define PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "grid.h"

#define PLAN_MAX_RANKS 64
#define PLAN_TOKENS_MAX (INT64_C(1) << 31) /* tokens of a workload: 1..this */
#define PLAN_SPEED_MAX 1000.0             /* a device's relative speed: (0, this] */
#define PLAN_MAX_BLOCKS 512
#define PLAN_NAME_LEN 64

/* Status values. */
enum {
  PLAN_OK = 0,
  PLAN_EINVAL = 1,     /* malformed input (budget string, sizes, workload) */
  PLAN_EINFEASIBLE = 2, /* well formed, but no plan fits the budgets */
  PLAN_ENOSPACE = 3,   /* caller buffer too small */
};

/* ---- inputs ------------------------------------------------------------ */

/* Sizes of the model; no weights. */
typedef struct plan_model {
  int num_blocks;
  const uint64_t *block_bytes; /* (num_blocks) bytes of each block's weights */
  uint64_t embed_bytes;        /* embeddings (patch, time, text): stage 0 */
  uint64_t head_bytes;         /* head: last stage */
  int64_t dim, ffn_dim, heads, head_dim;
  int64_t text_len, text_dim;
  int64_t freq_dim;        /* sinusoid width of the time embedding */
  int64_t in_dim, out_dim; /* latent channels; a token has in_dim*4 inputs (patch 1x2x2) */
  int weight_dtype_bytes;  /* 2 bf16, 4 fp32: also the width of bf16/fp32 activations */
  /* Bypassed LoRAs (MODEL.md "LoRA", bypass; 0: none): elements of one
   * block's pairs and their largest summed rank, the most any job's LoRAs
   * need in any block. A CUDA stage holds every block's pairs and an
   * (rows, rank) temporary (layout.h). */
  uint64_t lora_block_elems;
  int64_t lora_rank;
  /* Experts (MODEL.md "Wan 2.2 A14B"): 0 or 1 for one; 2 for a high- and
   * a low-noise expert. block_bytes, embed_bytes and head_bytes then count
   * both experts' copies, in equal halves (plan_expert_bytes): a CUDA
   * stage holds each expert's groups as separate buffers (layout.h). */
  int experts;
  /* Step caching (run --cache; 0: none): the last stage keeps a residual
   * per micro-batch of a step, the first a copy of each one's input
   * (layout.h, plan_layout_cache_bytes). */
  int cache;
  /* Time tables a micro-batch carries (0 or 1: one; 2: a TI2V model, whose
   * tokens of latent frame 0 have their own e and e0 in every activation
   * message, and every stage a second modulation: layout.h). */
  int time_tables;
  /* Quantized weights on a CUDA stage (MODEL.md "Quantized weights on the
   * GPU"; 0: none). dequant_bytes: the weight-only path's one bf16 buffer
   * that a block's weights are dequantised into right before each GEMM
   * (its largest such weight). w8a8: the linear layers run W8A8
   * (PLAN_W8A8_FP8 or _INT8): each input quantised per token into a
   * (rows, in) code buffer with (rows) scales, with bypassed LoRAs also
   * its dequantised bf16 copy (rows, in). w8a8_epilogue: the products go
   * through an fp32 (rows, out) scratch before their scales (int8; fp8 on
   * a GPU other than sm_90). Block bytes then count the stored formats
   * (block_bytes). */
  uint64_t dequant_bytes;
  int w8a8;
  int w8a8_epilogue;
} plan_model;

/* plan_model.w8a8. */
enum { PLAN_W8A8_NONE = 0, PLAN_W8A8_FP8 = 1, PLAN_W8A8_INT8 = 2 };

/* One expert's share of bytes counted for every expert of m. */
static inline uint64_t plan_expert_bytes(const plan_model *m, uint64_t bytes) {
  return m->experts > 1 ? bytes / (uint64_t)m->experts : bytes;
}

/* One pipeline rank's device. */
typedef struct plan_device {
  char name[PLAN_NAME_LEN];
  uint64_t total_bytes;
  uint64_t free_bytes;
  int sm_count, cc_major, cc_minor;
  char pci_bus_id[32];
  uint64_t host_bytes; /* host memory of its node; 0 = unknown */
  double speed;        /* relative speed, 1.0 = the reference rate */
} plan_device;

typedef struct plan_workload {
  int64_t frames, height, width; /* pixels: frames 4k+1, height and width multiples of 16 */
  int micro_batches;             /* CFG branches x batch items per step */
  int64_t context_len;           /* context rows (zero-padded to text_len: 512) */
  int seq;                       /* Ulysses ranks sharing the tokens of a stage (DESIGN.md
                                    "Layouts"); 0 or 1: one rank holds them all */
  int64_t vae_stride;            /* the VAE's spatial factor: 8 (Wan 2.1's; 0 means 8) or 16
                                    (the Wan 2.2 VAE of TI2V-5B; wan_vae_stride) */
} plan_workload;

/* The latent grid of a workload, in the one place the VAE's compression is
 * written: the first frame alone and 4 more per latent frame in time, the
 * workload's vae_stride (8 or 16) in space: fhw = ((frames-1)/4+1,
 * height/s, width/s). */
void plan_latent_grid(const plan_workload *w, int64_t fhw[3]);
/* Tokens of a latent sequence: the latent grid through the 1x2x2 patch,
 * ((frames-1)/4+1) * (height/2s) * (width/2s); 480x832x81 -> 32,760 (s 8),
 * TI2V-5B's 704x1280x121 -> 27,280 (s 16). */
int64_t plan_tokens(const plan_workload *w);
/* The tokens a rank of the workload holds: with w->seq = U > 1 the largest
 * of Ulysses' slices (plan_seq_rows of rank 0: ceil(L / U)), else L. Every
 * per-rank term of the memory and time model counts these. */
int64_t plan_rank_tokens(const plan_workload *w);

/* Order of work at a stage.
 * MICRO (micro-batch-major): the stage runs all its blocks on one
 *   micro-batch, then the next; a streamed block is copied once per
 *   micro-batch; stages overlap as a pipeline.
 * BLOCK (block-major): each block runs all M micro-batches while it is on
 *   the GPU, so a streamed block is copied once per step; every micro-batch
 *   of the step is resident at once and the stage sends them all at the
 *   end, so stages do not overlap within a step.
 * AUTO (options only): the planner picks, per plan, the order with the
 *   smaller predicted step time (micro on a tie). Every rank of a plan has
 *   the same order. */
enum {
  PLAN_ORDER_AUTO = 0,
  PLAN_ORDER_MICRO = 1,
  PLAN_ORDER_BLOCK = 2,
};

/* "micro", "block" (and "auto" for PLAN_ORDER_AUTO); NULL for other values. */
const char *plan_order_name(int order);
/* Parses "auto", "micro" or "block" (the --order flag of plan and run). */
int plan_parse_order(const char *s, int *out, char *err, size_t errlen);

/* Knobs of the model, with defaults from plan_options_default(). */
typedef struct plan_options {
  double gpu_tflops;        /* reference dense bf16 rate, TFLOP/s (600), times device speed */
  double fp8_linear_ratio;  /* fp8 W8A8 (plan_model.w8a8 PLAN_W8A8_FP8): a block's linear
                               layers take this fraction of their bf16 time, quantisation of
                               their inputs included (0.77: 14B at 32,760 tokens on an H100,
                               17.9 ms of fp8 GEMMs plus 1.3 ms of quantisers against 25.0 ms
                               of bf16 GEMMs, launch/bench/RESULTS.md); 1 for other weights */
  double fp8_fast_linear_ratio; /* the same under fp8_fast_accum (cuBLASLt's fast fp8
                               accumulation, --fp8-accum fast): 0.56, 13.5 ms of fast fp8
                               GEMMs plus 0.5 ms of the quantisers the norms do not fuse
                               against the same 25.0 ms (H100, RESULTS.md; the whole block
                               measured 0.837x bf16 with it) */
  int fp8_fast_accum;       /* fp8 W8A8 runs with fast accumulation (--fp8-accum fast) */
  double host_link_gbs;     /* pinned host -> device, GB/s (25: PCIe 4.0 x16 measured) */
  double peer_link_gbs;     /* rank -> rank activations, GB/s (25) */
  double seq_link_gbs;      /* among a stage's Ulysses ranks (workload seq > 1): the
                               all-to-alls, GB/s per direction (25) */
  int prefetch_depth;       /* streaming slots per rank (2: one in use, one filling) */
  uint64_t reserve_bytes;   /* CUDA context, cuBLASLt/cuDNN workspaces, NCCL (1 GiB) */
  double auto_margin;       /* auto budget = free - max(margin * total, 256 MiB) (0.05) */
  int order;                /* PLAN_ORDER_AUTO (default), _MICRO or _BLOCK */
  double stream_frac;       /* -1 (default): the budget decides what streams; 0..1: every
                               rank streams at least ceil(frac x its blocks), largest first */
  int64_t max_rows;         /* 0 (default): chunk rows from the budget; N > 0: at most N
                               (for tests and sweeps that force chunking) */
  int simple_attn;          /* 0 (default); 1: the stages run the simple attention backend,
                               whose scores scratch every rank counts (layout.h) */
  uint64_t decoder_bytes;   /* device bytes the last rank keeps for the VAE decoder of
                               `run --video` (its weights and workspace), outside the
                               stage's arena; 0 (default) without a decoder */
} plan_options;

void plan_options_default(plan_options *o);

/* ---- budget strings ----------------------------------------------------
 * Grammar (the syntax of ComfyUI-MultiGPU's expert allocation strings):
 *   auto                         default: free memory minus a safety margin
 *   0.8                          fraction of each GPU's memory, in (0, 1]
 *   cuda:0,2.5gb;cuda:1,3g;cpu,*  bytes: the GPU memory a rank may use in all
 *                                (weights, activations, workspaces); cpu,*
 *                                lets what does not fit be streamed from
 *                                pinned host memory; cpu,16gb caps that memory
 *   cuda:0,0.2;cpu,0.5           fractions per device: 20% of rank 0's GPU
 *                                memory; streamed bytes capped at half the
 *                                host's memory (when known); may be mixed
 *                                with sizes
 *   cpu,5gb*                     a size with `*`: the same as the size here
 *                                (the wildcard `*` marks the device that takes
 *                                what is left of the model in MultiGPU; here a
 *                                budget is already a cap)
 *   cuda:0,40%;cuda:1,60%        ratio: shares of the model's block bytes;
 *                                cpu,25% streams that share; `*` entries
 *                                share the rest of 100% equally; without one,
 *                                shares are parts of their sum
 *                                (8%;8%;4% = 40%, 40%, 20%)
 * Units b, k/kb, m/mb, g/gb, t/tb in any case, decimals allowed, powers of
 * 1024. cuda:K is the GPU of pipeline rank K; a rank not named gets auto
 * (bytes mode; ratio mode must name every rank). The one difference of
 * meaning from MultiGPU: a size or fraction here is the whole memory a rank
 * may use (weights, activations, workspaces), where MultiGPU's is the bytes
 * of the model placed on that device; and without a cpu entry nothing is
 * streamed. */
typedef enum {
  PLAN_BUDGET_AUTO = 0,
  PLAN_BUDGET_FRACTION = 1,
  PLAN_BUDGET_BYTES = 2,
  PLAN_BUDGET_RATIO = 3,
} plan_budget_mode;

typedef struct plan_budget {
  plan_budget_mode mode;
  int nranks;
  double fraction;                 /* FRACTION */
  uint8_t named[PLAN_MAX_RANKS];   /* the string names cuda:K */
  uint64_t bytes[PLAN_MAX_RANKS];  /* BYTES: cap per rank; 0 = frac, or auto */
  double frac[PLAN_MAX_RANKS];     /* BYTES: cap as a fraction of the rank's GPU; 0 = auto */
  double share[PLAN_MAX_RANKS];    /* RATIO: share of block bytes resident on rank K, 0..1 */
  int allow_stream;                /* a cpu entry is present */
  uint64_t cpu_bytes;              /* BYTES: cap on streamed bytes (pinned host); 0 = no cap */
  double cpu_frac;                 /* BYTES: that cap as a fraction of host memory; 0 = none */
  double cpu_share;                /* RATIO: share of block bytes streamed */
} plan_budget;

/* Parses s for a pipeline of nranks. NULL means "auto". */
int plan_budget_parse(const char *s, int nranks, plan_budget *out, char *err, size_t errlen);

/* Parses one size ("2.5gb", "512MiB" is refused, "3g", "100b"): powers of
 * 1024; a unit is required. */
int plan_parse_bytes(const char *s, uint64_t *out, char *err, size_t errlen);

/* ---- the plan ---------------------------------------------------------- */

typedef struct plan_rank {
  int rank;
  char device[PLAN_NAME_LEN];
  int first_block, last_block; /* inclusive range */
  int num_resident, num_streamed;
  int has_embed, has_head;
  int order;                    /* PLAN_ORDER_MICRO or PLAN_ORDER_BLOCK */
  int64_t chunk_rows;           /* rows per chunk of the block transients (= tokens: not
                                   chunked); the FFN hidden, projections and attention
                                   queries all use it */
  int prefetch_depth;           /* streaming slots (0 when nothing is streamed) */
  uint64_t weight_bytes;        /* resident weights on the GPU, embed/head included (each
                                   group rounded up to PLAN_LAYOUT_ALIGN, as the arena holds it) */
  uint64_t stream_slot_bytes;   /* prefetch_depth x largest streamed block (aligned) */
  uint64_t streamed_bytes;      /* in pinned host memory */
  uint64_t act_bytes;           /* the rest of the arena: plan_act_bytes */
  uint64_t reserve_bytes;       /* outside the arena: CUDA context, workspaces, NCCL */
  uint64_t decoder_bytes;       /* outside the arena: the VAE decoder (last rank only) */
  uint64_t peak_bytes;          /* weights + slots + activations (= the stage's arena, its
                                   layout's total) + reserve + decoder */
  uint64_t budget_bytes;
  double predicted_step_ms;     /* this stage's busy time per sampling step (all M
                                   micro-batches, in its order) */
  /* ---- two-expert models (plan_model.experts 2) ---- */
  int experts_mode;             /* PLAN_EXPERTS_*: how the rank holds the two experts' blocks */
  double predicted_switch_ms;   /* SWAP: the switch's predicted extra time (ms, >= 0): the
                                   swap's copy minus its overlap with the last high-noise
                                   step; 0 otherwise */
} plan_rank;

/* How a rank of a two-expert model holds its blocks (plan_rank.experts_mode).
 * ONE: a one-expert model. RESIDENT: both experts' blocks in device memory;
 * the switch moves nothing. SWAP: one device copy of the rank's blocks and
 * both experts' in pinned host memory; at the switch each block of the next
 * expert is copied over the block of the last one right after that block's
 * last use (a copy stream, overlapping the rest of the last step). STREAM:
 * the flagged blocks (plan.streamed) flow through the prefetch slots, the
 * current expert's copy each time. The planner picks RESIDENT when both
 * shares fit, else SWAP when one does (and the budget has a cpu entry),
 * else STREAM. */
enum {
  PLAN_EXPERTS_ONE = 0,
  PLAN_EXPERTS_RESIDENT = 1,
  PLAN_EXPERTS_SWAP = 2,
  PLAN_EXPERTS_STREAM = 3,
};
/* "one", "resident", "swap", "stream"; NULL for other values. */
const char *plan_experts_mode_name(int mode);

typedef struct plan {
  int nranks, num_blocks;          /* nranks: the pipeline's stages (S of the grid) */
  /* The run's grid (grid.h): r[] describes the S stages of one replica;
   * every replica's stage s and each of its U sequence-parallel ranks take
   * r[s]. All zero (plan_make leaves it so) reads as the pipeline
   * 1 x nranks x 1: plan_get_grid. */
  plan_grid grid;
  int64_t tokens;                  /* the sequence's (every Ulysses rank's rows together) */
  int micro_batches;
  int chunked;                     /* some rank chunks its activations */
  plan_rank r[PLAN_MAX_RANKS];
  uint8_t streamed[PLAN_MAX_BLOCKS]; /* 1 = block is streamed from host */
  double predicted_step_ms;        /* whole pipeline, one step (all micro-batches) */
  int w8a8_epilogue;               /* the model's (plan_model.w8a8_epilogue): every CUDA
                                      stage lays its arena out with it */
} plan;

/* What a plan is made for: the model m, nranks pipeline ranks over devs
 * (one each, in stage order), their budget b, the workload w and the
 * planner's options o. */
typedef struct plan_inputs {
  const plan_model *m;
  const plan_device *devs;
  int nranks;
  const plan_budget *b;
  const plan_workload *w;
  const plan_options *o;
} plan_inputs;

/* Computes the optimal plan for in. Fails with PLAN_EINVAL for bad inputs
 * and PLAN_EINFEASIBLE with per-rank needed vs available bytes and the
 * smallest budget that would work (the message may span several lines). */
int plan_make(const plan_inputs *in, plan *out, char *err, size_t errlen);

/* ---- the model of one rank (exposed for tests and for `bench`) ---------- */

/* FLOPs of one block for one micro-batch (MODEL.md "Cost"). */
double plan_block_flops(const plan_model *m, int64_t tokens, int64_t context_len);

/* Milliseconds of the all-to-alls of one block on one micro-batch at a
 * Ulysses rank (w->seq = U > 1; 0 otherwise) over o->seq_link_gbs: four
 * (q, k, v out, the attention output back), each sending (U-1)/U of the
 * largest rank's t x D operands (m->weight_dtype_bytes each). */
double plan_seq_a2a_ms(const plan_model *m, const plan_workload *w, const plan_options *o);

/* Activation buffers ([L, D] fp32 residual stream plus e and e0) a stage
 * holds in the given order: micro-batch-major 1 + has_prev + has_next (the
 * one computing, the next arriving, the previous leaving); block-major
 * max(M, 1) + has_prev (the whole step resident, plus one receiving the
 * next step's first micro-batch). An order not yet chosen (AUTO) gives the
 * larger of the two, a bound either way. The CUDA stage allocates this
 * many. */
int plan_act_buffers(int order, int micro_batches, int has_prev, int has_next);

/* A stage as the cost formulas count it: its blocks first_block..
 * last_block, whether a previous and a next stage exist, whether it embeds
 * (stage 0) and runs the head (the last stage), its order (PLAN_ORDER_*);
 * for its memory the chunk rows of the block transients and whether the
 * simple attention backend's scratch is counted; for its time the device's
 * relative speed, which blocks are streamed (streamed[i] for block
 * first_block + i; NULL: none) and the streaming slots (depth). */
typedef struct plan_stage_desc {
  int order;
  int first_block, last_block;
  int has_prev, has_next, has_embed, has_head;
  int64_t chunk_rows;      /* plan_act_bytes */
  int simple_attn;         /* plan_act_bytes */
  double speed;            /* plan_stage_ms */
  const uint8_t *streamed; /* plan_stage_ms */
  int depth;               /* plan_stage_ms */
} plan_stage_desc;

/* Device bytes of stage d besides its weights, streaming slots and reserve:
 * the total of its CUDA layout (layout.h) with no weights: activation
 * buffers, a block's transient at d->chunk_rows, the context k/v of its
 * blocks for every micro-batch, context scratch, RoPE tables, small
 * vectors, the first/last stage's latent buffers, and with d->simple_attn
 * the simple attention backend's scratch. The stage's arena is this plus
 * the weights and slots, each rounded up to PLAN_LAYOUT_ALIGN; UINT64_MAX
 * for a shape no stage has. */
uint64_t plan_act_bytes(const plan_model *m, const plan_workload *w, const plan_stage_desc *d);

/* Busy time of stage d per sampling step in ms (all M micro-batches), in
 * its order (MICRO or BLOCK), given which of its blocks are streamed: a
 * timeline of one copy engine and the compute stream with d->depth slots. */
double plan_stage_ms(const plan_model *m, const plan_workload *w, const plan_options *o,
                     const plan_stage_desc *d);

/* The predicted extra time in ms (>= 0) of the switch between experts on a
 * rank that swaps blocks first..last (PLAN_EXPERTS_SWAP): the copies of one
 * expert's blocks over host_link_gbs, one after another, starting when the
 * first block's last high-noise use is done, minus what they overlap: the
 * rest of that last high-noise pass and each low-noise block's compute
 * before the next block's copy is needed. */
double plan_switch_ms(const plan_model *m, const plan_workload *w, const plan_options *o,
                      int order, double speed, int first, int last);

/* Step time of a pipeline of nranks stages with per-step times stage_ms[]:
 * micro-batch-major sum/M + (M-1)/M x max (the first micro-batch crosses
 * every stage, each further one leaves a slowest stage later); block-major
 * the plain sum (each stage passes the whole step on when done). */
double plan_pipeline_ms(int order, int micro_batches, int nranks, const double *stage_ms);

/* ---- output ------------------------------------------------------------ */

/* Each writes into buf (always NUL-terminated when cap > 0) and returns the
 * length the full text needs (like snprintf): call again with more room
 * when the result is >= cap. */
size_t plan_format_table(const plan *p, char *buf, size_t cap);
size_t plan_format_json(const plan *p, char *buf, size_t cap);

/* p->grid, or the pipeline 1 x nranks x 1 when it is unset (all zero). */
plan_grid plan_get_grid(const plan *p);

/* Compact binary form for the broadcast (little-endian, versioned). */
#define PLAN_WIRE_MAX (64 + PLAN_MAX_RANKS * 192 + PLAN_MAX_BLOCKS)
int plan_encode(const plan *p, uint8_t *buf, size_t cap, size_t *len, char *err, size_t errlen);
/* Validates everything it reads: bad bytes give PLAN_EINVAL, never a crash. */
int plan_decode(const uint8_t *buf, size_t len, plan *out, char *err, size_t errlen);
/* Checks a plan's invariants (ranges cover every block once, in order;
 * counts agree; peak <= budget). Used by the decoder and the tests. */
int plan_validate(const plan *p, char *err, size_t errlen);

#endif
