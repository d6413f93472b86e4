/* One pipeline stage: the weights of a contiguous range of blocks (stage 0
 * also the embeddings, the last stage also the head), the per-prompt
 * cross-attention k/v of those blocks, and the arena their forward uses.
 *
 * A micro-batch travels between stages as one activation message
 * (rank_act_floats): x (tokens, dim) fp32 | e (dim) | e0 (6, dim), so the
 * time embedding made on stage 0 reaches every stage with the residual
 * stream in a single send. */
#ifndef RANK_STAGE_H
#define RANK_STAGE_H

#include <stdint.h>

#include "dit.h"
#include "model_file.h"
#include "plan.h"

typedef enum { RANK_DEVICE_CPU = 0, RANK_DEVICE_CUDA = 1 } rank_device;

/* --attn: the CUDA attention backend (values as kern_attn_backend). */
typedef enum { RANK_ATTN_AUTO = 0, RANK_ATTN_CUDNN = 1, RANK_ATTN_FLASH = 2, RANK_ATTN_SIMPLE = 3 } rank_attn;
/* "auto" | "cudnn" | "flash" | "simple"; logs --attn and returns SP_ERR_INPUT otherwise. */
int rank_attn_parse(const char *s, rank_attn *out);

typedef struct rank_stage_cfg {
  int first_block, last_block; /* inclusive range of blocks this stage runs */
  int embed;                   /* holds the embeddings (stage 0) */
  int head;                    /* holds the head (last stage) */
  int prompts;                 /* prompt slots (1, or 2 with CFG) */
  int64_t lat_f, lat_h, lat_w; /* latent frames, height, width */
  rank_device device;          /* backend (default cpu) */
  int cuda_device;             /* CUDA device index when device is cuda */
  /* Hybrid residency (CUDA): streamed[i] = 1 keeps block first_block + i in
   * pinned host memory, copied one way into one of prefetch_depth device
   * slots each time it runs. NULL: every block resident. The CPU backend
   * holds every block in host memory anyway and ignores it. */
  const uint8_t *streamed;
  int prefetch_depth;
  rank_attn attn; /* CUDA attention backend (the CPU has one exact attention) */
  int profile;    /* CUDA: time every op of every block, report per call */
} rank_stage_cfg;

/* 1 when this build has the CUDA backend and a GPU is visible. */
int rank_cuda_available(void);
/* Parses "cpu" / "cuda" / "auto" (cuda when available); logs --device. */
int rank_device_parse(const char *s, rank_device *out);

typedef struct rank_stage rank_stage;

/* Host buffers the stage copies to and from (activation messages,
 * latents): pinned on the CUDA backend, so copies run at the link's rate. */
void *rank_stage_host_alloc(const rank_stage_cfg *cfg, size_t bytes);
void rank_stage_host_free(const rank_stage_cfg *cfg, void *p);
const rank_stage_cfg *rank_stage_get_cfg(const rank_stage *s);

/* CUDA devices this process sees (0 without the CUDA backend or a GPU). */
int rank_cuda_device_count(void);
/* The inventory entry of CUDA device idx for the planner (name, memory
 * total and free, SMs, compute capability, PCI bus id). SP_OK or logged
 * SP_ERR_RUNTIME. */
int rank_cuda_describe(int idx, plan_device *out);

/* Floats in one activation message for this workload. */
int64_t rank_act_floats(const wan_config *c, int64_t tokens);

/* Reads the stage's weights and places them (CPU: widened to fp32; CUDA:
 * bf16 in device memory, from one arena sized up front). Adds the bytes read from the file
 * to *bytes_read. Returns SP_OK or the model reader's status (logged). */
int rank_stage_load(rank_model *m, const rank_stage_cfg *cfg, rank_stage **out,
                    uint64_t *bytes_read);
void rank_stage_free(rank_stage *s);
int64_t rank_stage_tokens(const rank_stage *s);
const wan_config *rank_stage_config(const rank_stage *s);

/* Stage 0: ctx (text_len, dim) from context (L, text_dim). */
void rank_stage_embed_text(rank_stage *s, const float *context, int64_t L, float *ctx);
/* Every stage: cross-attention k/v of its blocks for prompt slot from ctx. */
void rank_stage_set_prompt(rank_stage *s, int slot, const float *ctx);
/* Stage 0: activation message act from the latent and timestep t. */
void rank_stage_embed(rank_stage *s, const float *latent, double t, float *act);
/* Every stage: its blocks on act (in place) for prompt slot. */
void rank_stage_blocks(rank_stage *s, int slot, float *act);
/* Last stage: the predicted velocity out (out_dim, F, H, W) from act. */
void rank_stage_head(rank_stage *s, const float *act, float *out);

#endif
