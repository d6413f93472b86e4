/* The DiT's backend table (net.h): the backend side of a stage (see
 * stage.h). Each backend fills a wan_dit_backend and its private state
 * (the CPU's in stage_cpu.c, wan_dit_cpu; the CUDA one's in cuda/,
 * wan_dit_cuda); stage.c finds the table of the stage's device through
 * net_backend_ops and dispatches. */
#ifndef RANK_STAGE_IMPL_H
#define RANK_STAGE_IMPL_H

#include "stage.h"
#include "wan_dit.h"

typedef struct wan_dit_backend {
  /* Reads s's weights (s->cfg, the grid, the tokens and the buffers'
   * arrays already set), sets s->ops, s->impl and the activation buffers.
   * Adds the bytes read to *bytes_read. SP_OK or the reader's status
   * (logged), having freed what it took. */
  int (*load)(rank_model *m, rank_stage *s, uint64_t *bytes_read);
  void (*destroy)(rank_stage *s);
  void (*embed_text)(rank_stage *s, const float *context, int64_t L, float *ctx);
  void (*set_prompt)(rank_stage *s, int slot, const float *ctx);
  void (*embed)(rank_stage *s, const float *latent, double t, double t_first, int buf);
  void (*blocks)(rank_stage *s, int n, const int *slots, const int *bufs);
  void (*head)(rank_stage *s, int buf, float *out);
  void (*sync)(rank_stage *s);
  void (*set_lora)(rank_stage *s, const rank_stage_lora *l);
  /* Selects expert e (0 .. experts - 1) for the calls that follow (a
   * one-expert stage is never asked). */
  void (*set_expert)(rank_stage *s, int e);
  /* Lays the shape-sized state out again for s->cfg.lat_*, s->grid and
   * s->tokens, already set (rank_stage_relayout); the queue is drained.
   * SP_OK, or logged SP_ERR_RUNTIME having changed nothing. */
  int (*relayout)(rank_stage *s);
  /* e (dim) of timestep t into host memory, at once (rank_stage_time_embed);
   * NULL: the backend has none. */
  void (*time_embed)(rank_stage *s, double t, float *e);
  /* rank_stage_cache on buffer buf and cache buffer k (s->cache[k]). */
  void (*cache)(rank_stage *s, rank_cache_op op, int buf, int k);
} wan_dit_backend;

struct rank_stage {
  const wan_dit_backend *ops;
  const wan_config *c;
  rank_stage_cfg cfg;
  rank_grid grid;
  int64_t tokens;
  int64_t first_tokens; /* TI2V: the tokens of latent frame 0 (grid.h x grid.w) the second
                           time table is for (stage.h); 0 on the other models */
  int nblocks;
  int experts;  /* the model's experts, each held whole for the stage's range */
  int expert;   /* the one the calls use */
  float **act;  /* [cfg.act_buffers] activation buffers (the backend's memory) */
  float **cache; /* [cfg.prompts] step cache buffers (rank_stage_cache_buf), or NULL */
  void *stream; /* the backend's stream (NULL on the CPU) */
  rank_stage_stats stats; /* the backend keeps it */
  void *impl;   /* the backend's state */
};

#endif
