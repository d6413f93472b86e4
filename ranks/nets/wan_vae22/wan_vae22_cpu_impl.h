/* What the CPU encoder and decoder of the Wan 2.2 VAE share
 * (wan_vae22_cpu.c: the state, the caches, the blocks; wan_vae22_cpu_dec.c
 * and wan_vae22_cpu_enc.c: the two parts' chunk loops). Included by those
 * three only.
 *
 * One walk serves two purposes: run with plan set, the code of a chunk
 * computes nothing and records what it would use (every cache in run
 * order, the largest activation, the attention's scratch), which sizes the
 * state; run on a state, it computes. The plan walks a later chunk (the
 * largest frame counts); the first chunk uses the same caches, fewer
 * frames. */
#ifndef WAN_VAE22_CPU_IMPL_H
#define WAN_VAE22_CPU_IMPL_H

#include <stdint.h>

#include "wan_vae22.h"

#define V22_BUFS 5 /* activation buffers: x, a, b, c and a level's kept input k */

/* A cached op's memory of its input: the last `keep` frames (2 for a causal
 * conv, 1 for a downsample3d), oldest first, right-aligned in frames
 * (c, keep, hw), n of them valid. started: an upsample3d or downsample3d
 * has seen its first chunk (the published "Rep" mark, or the first
 * chunk's frame kept). */
typedef struct v22_cache {
  float *frames;
  int64_t c, hw;
  int keep, n, started;
} v22_cache;

struct wan_vae22_state {
  wan_vae22_config cfg;
  int encoder;
  int64_t h, w; /* the decoder's latent size, or the encoder's patchified video (H/2, W/2) */
  int n_cache;
  v22_cache cache[WAN_VAE22_MAX_CACHES]; /* in the order the ops run */
  float *cache_mem;
  int64_t act;  /* floats of each activation buffer */
  float *buf[V22_BUFS];
  int64_t attn; /* floats of the middle attention's scratch */
  float *attn_scratch;
};

/* One chunk's running state: the cache cursor (the published feat_idx),
 * the frame count and spatial size of the current level. */
typedef struct v22_run {
  wan_vae22_state *s;
  int plan;  /* the sizing walk: nothing computed, sizes recorded in s */
  int first; /* the first chunk */
  int idx;
  int64_t t, h, w;
} v22_run;

/* The activation buffers of a chunk; x is the current activation, k a
 * level's input kept for its shortcut. */
typedef struct v22_bufs {
  float *x, *a, *b, *c, *k;
} v22_bufs;

void v22_swap(float **p, float **q);
/* An activation of floats floats is written (recorded when planning). */
void v22_need(v22_run *r, int64_t floats);
/* The next cache: when planning, a new one of c channels keeping `keep`
 * frames at the current size (NULL returned); else the state's, checked. */
v22_cache *v22_next_cache(v22_run *r, int64_t c, int keep);
/* Keeps the last k->keep frames of (cached frames, x), x (c, T, hw). */
void v22_cache_push(v22_cache *k, const float *x, int64_t T);
/* y = CausalConv3d 3x3x3 of x (ci, t, h, w) with the next cache, which then
 * takes x's last frames. */
void v22_cached_conv(v22_run *r, const float *x, const float *w, const float *b, float *y,
                     int64_t ci, int64_t co);
/* RMS norm over channels, then SiLU: y from x, both (c, t, h, w). */
void v22_norm_silu(v22_run *r, const float *x, const float *gamma, float *y, int64_t c);
/* The residual block and the middle attention, on B->x. */
void v22_resblock(v22_run *r, const wan_vae_resblock *rb, v22_bufs *B);
void v22_attnblock(v22_run *r, const wan_vae_attn *at, v22_bufs *B);
/* The state of a part for its size: the plan walk (plan_fn on a run with
 * plan set, given the part's structure: its weights struct with the table
 * made and nothing bound), then every cache and buffer it recorded. SP_OK
 * or SP_ERR_RUNTIME (out of memory, logged). */
typedef void (*v22_plan_fn)(v22_run *r, const wan_vae22_weights *w);
int v22_state_create(const wan_vae22_config *c, int encoder, int64_t h, int64_t w,
                     v22_plan_fn plan_fn, wan_vae22_state **out);
/* Caches emptied (WanVAE_.clear_cache) before a run. */
void v22_state_reset(wan_vae22_state *s);
/* The buffers of a chunk. */
v22_bufs v22_state_bufs(const wan_vae22_state *s);

#endif
