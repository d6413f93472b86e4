/* One pipeline stage: the weights of a contiguous range of blocks (stage 0
 * also the embeddings, the last stage also the head), the per-prompt
 * cross-attention k/v of those blocks, and the arena their forward uses.
 *
 * A micro-batch travels between stages as one activation message
 * (rank_act_floats): x (tokens, dim) fp32 | e (dim) | e0 (6, dim), and on
 * a TI2V model (wan_time_tables 2) e (dim) | e0 (6, dim) again, of the
 * timestep of the tokens of latent frame 0 (I2V.md "A timestep per
 * token"; the first grid.h x grid.w tokens), so the time embedding made
 * on stage 0 reaches every stage with the residual stream in a single
 * send. A TI2V micro-batch always carries both tables (the same values
 * when every token has the same timestep: each row's ops are then the one
 * table's, bit for bit). The stage owns act_buffers such messages in its
 * own memory (device memory on CUDA): the transport receives into them and
 * sends from them, and the step's work never copies them through the host.
 *
 * The per-step calls (embed, blocks, head) are asynchronous on the CUDA
 * backend: they queue work on the stage's stream (rank_stage_stream) and
 * return; rank_stage_sync waits for it. The CPU backend runs them at once. */
#ifndef RANK_STAGE_H
#define RANK_STAGE_H

#include <stdint.h>

#include "comm_group.h"
#include "dit.h"
#include "kern_attn_backend.h"
#include "model_file.h"
#include "net.h"
#include "plan.h"
#include "transport.h"

typedef struct rank_stage_cfg {
  int first_block, last_block; /* inclusive range of blocks this stage runs */
  int embed;                   /* holds the embeddings (stage 0) */
  int head;                    /* holds the head (last stage) */
  int prompts;                 /* prompt slots (1, or 2 with CFG) */
  int64_t lat_f, lat_h, lat_w; /* latent frames, height, width */
  /* The most tokens of any latent shape the stage is re-laid for
   * (rank_stage_relayout): the plan's. The CUDA arena is sized for it at
   * load. 0: the load's shape's. */
  int64_t max_tokens;
  rank_device device;          /* backend (default cpu) */
  int cuda_device;             /* CUDA device index when device is cuda */
  /* Hybrid residency (CUDA): streamed[i] = 1 keeps block first_block + i in
   * pinned host memory, copied one way into one of prefetch_depth device
   * slots each time it runs. NULL: every block resident. The CPU backend
   * holds every block in host memory anyway and ignores it. */
  const uint8_t *streamed;
  int prefetch_depth;
  /* CUDA, two experts (the plan's PLAN_EXPERTS_SWAP): one device copy of
   * the stage's blocks and both experts' copies in pinned host memory;
   * switching experts copies each block of the next expert over the last
   * one's right after its last use (planner/plan.h). 0: both experts'
   * blocks stay on the device. Nothing may be streamed with it. */
  int swap_experts;
  kern_attn_backend attn; /* CUDA attention backend (the CPU has one exact attention) */
  int profile;    /* CUDA: time every op of every block, report per call */
  int act_buffers;    /* activation messages the stage holds (>= 1; plan_act_buffers) */
  int64_t chunk_rows; /* CUDA: rows per chunk of the block transients (0: all tokens) */
  int mem_trace;      /* CUDA: per-block device memory table (synchronises per block) */
  double plan_peak_bytes; /* the planner's peak for this rank, for the memory table */
  /* CUDA: room for bypassed LoRAs (plan_workload's lora_block_elems and
   * lora_rank; 0: none), held from load so that jobs switch them in place */
  uint64_t lora_block_elems;
  int64_t lora_rank;
  /* Ulysses (DESIGN.md "Layouts"): the stage's sequence-parallel ranks,
   * this one among them, or NULL (one rank holds every token). With a
   * group the stage holds rows plan_seq_row0 .. of the tokens: its
   * activation messages carry those rows, embed makes them, blocks exchange
   * heads in the self-attention and head gathers the whole velocity on
   * every member. On the CUDA stage the all-to-alls move device buffers
   * through tp (comm_tp_alltoallv: NCCL, or MPI staged through host memory
   * for ranks sharing a GPU), among seq's ranks with seq's tag. */
  const comm_group *seq;
  comm_transport *tp; /* CUDA with seq: the transport of the all-to-alls; else unused */
  /* How the blocks' linear layers compute (wan_precision; MODEL.md "fp8
   * weights", "int8 weights"): FP8 or INT8, an fp8 or int8 file's weights
   * as they are, a bf16 or fp32 file's quantised at load (the quantiser of
   * convert --dtype fp8 or int8), the linear layers' inputs quantised per
   * token; BF16, every stored format dequantised (the CUDA stage's
   * weight-only path). rank_stage_precision_check says which a file
   * takes. */
  wan_precision precision;
  /* CUDA, W8A8 (precision FP8 or INT8): the products go through an fp32
   * scratch of (rows, N) before their scales, bias and activation (int8;
   * fp8 on a GPU without cuBLASLt's per-row scales, not sm_90): the plan's
   * plan.w8a8_epilogue, so the arena is the planner's layout. */
  int w8a8_epilogue;
  /* CUDA, precision FP8 on sm_90: the W8A8 GEMMs with cuBLASLt's fast
   * fp8 accumulation (--fp8-accum fast: no periodic promotion of the
   * tensor cores' products to full fp32; MODEL.md "fp8 weights"). 0: full
   * accumulation. Refused anywhere else (rank_stage_fp8_accum_check,
   * rank_stage_precision_check; sm_89 when the CUDA stage loads). */
  int fp8_fast_accum;
  /* Step caching (DESIGN.md "Step caching"): the last stage holds a
   * residual and stage 0 (when not also last) an input copy per prompt
   * slot (rank_stage_cache_*). 0: none. */
  int cache;
} rank_stage_cfg;

typedef struct rank_stage rank_stage;

/* What a stage of precision p (cfg.precision) can run of model mi: an
 * fp8 file in fp8 or bf16 (its weights dequantised), an int8 file in int8
 * or bf16, a quant file (GGUF's formats) in bf16 only, a bf16 or fp32 file
 * in any (fp8 and int8 quantise it at load); fast fp8 accumulation
 * (cfg.fp8_fast_accum) at precision fp8 only. SP_OK, or SP_ERR_INPUT
 * after one line naming the cause. rank_stage_load checks it too; the
 * CUDA stage refuses fp8 on a GPU without fp8 tensor cores, and fast
 * accumulation off sm_90, when it loads. */
int rank_stage_precision_check(const rank_model_info *mi, wan_precision p, int fp8_fast_accum);
/* Fast fp8 accumulation (cfg.fp8_fast_accum) on device dev: the CPU
 * backend refuses it (it accumulates in full fp32 only). SP_OK, or
 * SP_ERR_INPUT after one line naming --fp8-accum. */
int rank_stage_fp8_accum_check(rank_device dev, int fp8_fast_accum);

/* Host buffers the stage copies to and from (latents, head outputs):
 * pinned on the CUDA backend, so copies run at the link's rate and can be
 * asynchronous (rank_host_alloc of the stage's device). */
void *rank_stage_host_alloc(const rank_stage_cfg *cfg, size_t bytes);
void rank_stage_host_free(const rank_stage_cfg *cfg, void *p);
const rank_stage_cfg *rank_stage_get_cfg(const rank_stage *s);

/* Floats in one activation message for this workload: tokens x dim and
 * 7 dim per time table (wan_time_tables). */
int64_t rank_act_floats(const wan_config *c, int64_t tokens);

/* Reads the stage's weights, of every expert of the model, and places them
 * (CPU: widened to fp32; CUDA: bf16 in device memory, from one arena sized
 * up front, each expert's groups in buffers of their own, or with
 * swap_experts one device copy of the blocks). Adds the bytes read from the file
 * to *bytes_read. Returns SP_OK or the model reader's status (logged). */
int rank_stage_load(rank_model *m, const rank_stage_cfg *cfg, rank_stage **out,
                    uint64_t *bytes_read);
void rank_stage_free(rank_stage *s);
/* A new latent shape for the jobs that follow: the activation buffers, the
 * block transients, the RoPE tables and everything else sized by the
 * tokens are laid out again for (lat_f, lat_h, lat_w); the weights (device
 * groups, streamed blocks' pinned copies) and the LoRA pairs stay where
 * they are and nothing is read from the file. On CUDA the new layout is
 * carved from the arena loaded for cfg.max_tokens. The activation buffers'
 * contents and the prompts' k/v are not kept: rank_stage_set_prompt comes
 * next. Between jobs only (it waits for queued work). SP_OK, or logged
 * SP_ERR_RUNTIME (more tokens than max_tokens: the caller's bug) with the
 * stage as it was. */
int rank_stage_relayout(rank_stage *s, int64_t lat_f, int64_t lat_h, int64_t lat_w);
/* The tokens this stage holds: its rows of the sequence (all of them
 * without a sequence-parallel group). */
int64_t rank_stage_tokens(const rank_stage *s);
const wan_config *rank_stage_config(const rank_stage *s);

/* Stage 0: ctx (text_len, dim) from context (L, text_dim). */
void rank_stage_embed_text(rank_stage *s, const float *context, int64_t L, float *ctx);
/* Every stage: cross-attention k/v of its blocks for prompt slot from ctx. */
void rank_stage_set_prompt(rank_stage *s, int slot, const float *ctx);
/* Activation buffer buf (0 .. act_buffers-1): device memory on CUDA. */
void *rank_stage_act(rank_stage *s, int buf);
size_t rank_stage_act_bytes(const rank_stage *s);
/* The stream the per-step work runs on (a cudaStream_t; NULL on the CPU,
 * whose buffers are host memory): transfers of activation buffers are
 * ordered against it. */
void *rank_stage_stream(rank_stage *s);

/* Stage 0: activation message in buffer buf from the model's input
 * (in_dim, F, H, W) (host memory, pinned; it must not change until the
 * work is done: rank_stage_sync; for an I2V model the latent followed by
 * the conditioning y) and timestep t; t_first is the timestep of the
 * tokens of latent frame 0 on a TI2V model (0 when that frame is the
 * image), and must equal t on the others (the caller's bug otherwise). */
void rank_stage_embed(rank_stage *s, const float *latent, double t, double t_first, int buf);
/* Stage 0: the time embedding e (dim) of timestep t under the selected
 * expert, into host memory e, at once (before sampling: TeaCache's
 * criterion, ranks/sampling/step_cache.h). SP_OK, or SP_ERR_RUNTIME logged
 * on a stage without the embeddings (the caller's bug). */
int rank_stage_time_embed(rank_stage *s, double t, float *e);
/* Step caching (cfg.cache; on stage 0 and the last stage only):
 * cache buffer k (0 .. prompts-1), (tokens, dim) fp32 in the stage's
 * memory (device memory on CUDA), holds the transformer's input of a
 * micro-batch on its way to the last stage, or on the last stage its
 * residual (in the backend's own form). The calls queue on the stage's
 * stream like the others.
 *   TAKE: cache k = x of activation buffer buf (the transformer's input);
 *   KEEP: cache k holding the input, buf the blocks' output: cache k
 *         becomes the residual out - in;
 *   ADD:  x of buf (a skipped step's input) += the residual: the blocks'
 *         output the head takes, bit-identical on every backend that keeps
 *         x + (out - in) in fp32. */
typedef enum { RANK_CACHE_TAKE = 0, RANK_CACHE_KEEP = 1, RANK_CACHE_ADD = 2 } rank_cache_op;
void *rank_stage_cache_buf(rank_stage *s, int k);
/* Bytes of one cache buffer: the rank's rows of the activation x, fp32. */
size_t rank_stage_cache_bytes(const rank_stage *s);
void rank_stage_cache(rank_stage *s, rank_cache_op op, int buf, int k);
/* Every stage: its blocks on n micro-batches, buffer bufs[j] with prompt
 * slot slots[j], in place. n = 1 is micro-batch-major work; n > 1 is
 * block-major: each block runs every micro-batch while its weights are on
 * the device (a streamed block is copied once, not n times). Each
 * micro-batch's result is the same either way. */
void rank_stage_blocks(rank_stage *s, int n, const int *slots, const int *bufs);
/* Last stage: the predicted velocity (out_dim, F, H, W) from buffer buf
 * into out (host memory, pinned; valid after rank_stage_sync). */
void rank_stage_head(rank_stage *s, int buf, float *out);
/* Waits for every queued call of the stage. */
void rank_stage_sync(rank_stage *s);
/* A two-expert model (Wan 2.2 A14B): the stage holds both experts' groups
 * of its range (embeddings and head included where it has them) and each
 * expert's prompt k/v; set_expert selects the expert that the calls after
 * it use (embed_text, set_prompt, embed, blocks, head), expert 0 at load.
 * The switch moves no weight, except on a CUDA stage with swap_experts:
 * there it queues the copies of the new expert's blocks (a copy stream,
 * each after the block's last queued use) and returns; the first use of
 * each block waits for its copy. One-expert stages have expert 0 only. */
int rank_stage_experts(const rank_stage *s);
void rank_stage_set_expert(rank_stage *s, int e);

/* Bypassed LoRAs (MODEL.md "LoRA", bypass): the low-rank pairs added
 * after a block's linear layers, y += B (A x), as the caller read them
 * from the LoRA files (the pipeline, ranks/import/lora.h).
 *
 * One block's: its values (floats of them, fp32 host memory) and the pair
 * of each linear layer (WAN_BLOCK_LINEARS), views into the values (r = 0:
 * a layer without pairs; each pair's A (r, in) and B (out, r) lie within
 * the values). */
typedef struct rank_stage_lora_block {
  float *values;
  size_t floats;
  wan_block_lora_f32 pairs;
} rank_stage_lora_block;
/* A stage's: block[e][i] is block first_block + i of expert e, for each
 * of the stage's experts (rank_stage_experts); rank, the largest summed
 * rank R of any layer among them. */
typedef struct rank_stage_lora {
  rank_stage_lora_block *block[RANK_MODEL_MAX_EXPERTS];
  int64_t rank;
} rank_stage_lora;
/* Replaces the pairs added after the stage's blocks' linear layers by
 * copies of l's (the caller keeps l); l NULL drops them. The base weights
 * stay as loaded, so jobs switch LoRAs without reloading. On CUDA the
 * pairs go to the room held from load (cfg.lora_block_elems, lora_rank):
 * pairs that need more are the caller's bug (fatal). Between jobs only (it
 * waits for queued work and may allocate); a following
 * rank_stage_set_prompt sees the new pairs. */
void rank_stage_set_lora(rank_stage *s, const rank_stage_lora *l);

/* What a stage holds and moves, for the run's summary (--json). */
typedef struct rank_stage_stats {
  int streamed;           /* blocks kept in host memory, copied in each time they run */
  uint64_t h2d_bytes;     /* streamed weight bytes queued host to device so far */
  uint64_t arena_bytes;   /* the device arena (0 on the CPU) */
  double weights_s;       /* reading the weights until they are in place (the load rate's time) */
  /* Device memory in use once loaded and warmed up, and the most seen by
   * --mem-trace: cudaMemGetInfo, so every process on the GPU counts. */
  uint64_t device_in_use, device_peak;
} rank_stage_stats;
const rank_stage_stats *rank_stage_get_stats(const rank_stage *s);

#endif
