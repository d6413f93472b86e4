/* What the CUDA VAE decoder (wan_vae_gpu.c) and encoder (wan_vae_enc_gpu.c)
 * share (wan_vae_gpu_core.c): the one device allocation carved from a
 * planner layout (planner/vae_layout.h) into its roles and caches, the
 * stream and the kernel context, the per-op profile, the device form of
 * the weights, and the pieces both networks are made of (VAE.md "The
 * pieces") on channels-last activations: the cached causal convolution
 * (its cached frames copied in front of the chunk's in s), RMS norm with
 * SiLU, the residual block and the attention block, the residual stream x
 * in fp32. Convolutions write their raw output (no bias); the op that
 * reads it adds the bias. CUDA builds only. */
#ifndef WAN_VAE_GPU_CORE_H
#define WAN_VAE_GPU_CORE_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "kern_cuda_vae.h"
#include "vae_layout.h"
#include "wan_vae.h"
#include "wan_vae_gpu.h"

#define VAE_GPU_PROF_EVENTS 1024 /* event pairs, flushed when full and after each chunk */

typedef struct vae_gpu_core {
  wan_vae_gpu_precision p;
  kern_dtype dt;
  int64_t E;           /* bytes per activation element */
  plan_vae_layout *lay; /* owned */
  char *dev;           /* the one device allocation, lay->total bytes */
  float *x;            /* the residual stream, fp32 in both precisions */
  void *y, *s, *r, *scores;
  size_t scores_bytes;
  void *cache[PLAN_VAE_MAX_CACHES];
  cudaStream_t stream;
  kern_cuda_vae *k;
  /* profiling */
  int prof;
  cudaEvent_t ev[VAE_GPU_PROF_EVENTS];
  int ev_op[VAE_GPU_PROF_EVENTS / 2];
  int nev;
  double ms[WAN_VAE_GPU_OPS];
} vae_gpu_core;

/* Takes lay (malloc'd; owned from here on, freed by vae_gpu_core_close
 * also on failure), allocates lay->total device bytes (what names the
 * network in the message), points the roles and caches into it, makes the
 * stream and the kernel context. SP_OK or SP_ERR_RUNTIME (logged). */
int vae_gpu_core_open(vae_gpu_core *g, plan_vae_layout *lay, wan_vae_gpu_precision p,
                      const char *what);
void vae_gpu_core_close(vae_gpu_core *g);
/* The buffer of kind and index in the allocation (fatal when the layout
 * has none). */
void *vae_gpu_buf(const vae_gpu_core *g, plan_vae_buf kind, int index);
/* bytes of pinned host memory into *out for a coder's host side of its
 * frames or latents (what: "frames", "latents"), or SP_ERR_RUNTIME logged
 * with the size, *out NULL and the CUDA error cleared, so the caller
 * fails without a fatal exit. */
int vae_gpu_pinned(size_t bytes, const char *what, void **out);
/* Every cache zeroed (the causal zero padding): WanVAE_.clear_cache. */
void vae_gpu_clear_caches(vae_gpu_core *g);

/* The weights of table t (packed fp32, t's layout) converted to their
 * device form (wan_vae_gpu_layout.h) into the layout's weights buffer, one
 * copy up, and t's slots pointed at their device addresses. off (t->count)
 * is scratch. SP_OK or SP_ERR_RUNTIME (logged). */
int vae_gpu_upload(vae_gpu_core *g, const wan_vae_table *t, const float *packed);

/* Profiling (wan_vae_cuda.h): a pair of events around each op. */
int vae_gpu_prof_begin(vae_gpu_core *g);
void vae_gpu_prof_end(vae_gpu_core *g, int i, wan_vae_gpu_op op);
/* After a stream synchronisation: every recorded pair into the totals. */
void vae_gpu_prof_flush(vae_gpu_core *g);
void vae_gpu_profile(vae_gpu_core *g, int on);

/* ---- one chunk --------------------------------------------------------------- */

/* A chunk's running state: the cache cursor (the published feat_idx), the
 * frame count and spatial size of the current level. */
typedef struct vae_grun {
  vae_gpu_core *g;
  int idx;
  int64_t t, h, w;
} vae_grun;

/* p advanced by elems activation elements. */
void *vae_gpu_at(const vae_grun *r, void *p, int64_t elems);
/* The next cache, checked against the layout's plan of it (c channels at
 * r's size). */
int vae_gpu_next_cache(vae_grun *r, int64_t c);
/* s's first frames (the cache's count of them) from cache k (c channels). */
void vae_gpu_cache_in(vae_grun *r, int k, int64_t c);
/* Cache k (2 frames) from the last 2 of s's 2 + t frames. */
void vae_gpu_cache_out(vae_grun *r, int k, int64_t c);
/* s behind its 2 cached frames: where a cached conv's producer writes. */
void *vae_gpu_s_frames(const vae_grun *r, int64_t c);

/* kern_cuda_vae_conv at r's size, timed as op. */
void vae_gpu_conv(vae_grun *r, const void *x, int64_t T, int64_t ci, const float *w, int64_t co,
                  int kt, int kh, int kw, void *y, wan_vae_gpu_op op);
/* RMS norm (+ SiLU) of the residual stream x (fp32) into y. */
void vae_gpu_norm_x(vae_grun *r, const float *gamma, void *y, int64_t c, int silu);
/* RMS norm (+ SiLU) of a conv's raw output x (dt) plus its bias. */
void vae_gpu_norm(vae_grun *r, const void *x, const float *bias, const float *gamma, void *y,
                  int64_t c, int silu);
/* out = y + by (+ res + br); res_f32 and out_f32 when they are x. */
void vae_gpu_add(vae_grun *r, const void *y, const float *by, const void *res, int res_f32,
                 const float *br, void *out, int out_f32, int64_t c);
/* Causal 3x3x3 conv of s (2 cached + t frames, ci channels) into y; cache
 * k then takes s's last 2 frames. */
void vae_gpu_cached_conv3(vae_grun *r, int k, const float *w, int64_t ci, int64_t co);
/* ResidualBlock and AttentionBlock on x, in place. */
void vae_gpu_resblock(vae_grun *r, const wan_vae_resblock *rb);
void vae_gpu_attnblock(vae_grun *r, const wan_vae_attn *at);

#endif
