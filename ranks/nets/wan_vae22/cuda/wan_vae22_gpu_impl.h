/* What the CUDA encoder and decoder of the Wan 2.2 VAE share
 * (wan_vae22_gpu.c: the coder, its allocation, the cache rule and the
 * blocks; wan_vae22_gpu_dec.c and wan_vae22_gpu_enc.c: the two parts'
 * chunks). Included by those three only.
 *
 * A causal conv's input is built in the role s: the cache (its last
 * frames, zeros at the start of a run: the causal zero padding) copied
 * into s's first frames, the producer writing the chunk's t frames right
 * behind them, the conv running on the whole without time padding, and
 * the last frames going back into the cache: the published cache rule.
 * Convolutions write their raw output (no bias) into y; the op that reads
 * it adds the bias. Every use of a role is checked against the planner's
 * size of it (fatal when larger): the layout is the arena. */
#ifndef WAN_VAE22_GPU_IMPL_H
#define WAN_VAE22_GPU_IMPL_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "kern_cuda_vae.h"
#include "kern_cuda_vae22.h"
#include "kern_dtype.h"
#include "vae22_layout.h"
#include "wan_vae22.h"
#include "wan_vae22_cuda.h"
#include "wan_vae22_gpu.h"

#define V22_PROF_EVENTS 1024 /* event pairs, flushed when full and after each chunk */

struct wan_vae22_gpu {
  wan_vae22_config cfg;
  wan_vae22_part part;
  int64_t h, w; /* the decoder's latent, or the encoder's patchified video (H/2, W/2) */
  wan_vae_gpu_precision p;
  kern_dtype dt;
  int64_t E; /* bytes per activation element */
  plan_vae22_layout *lay;
  char *dev; /* the one device allocation, lay->total bytes */
  wan_vae22_weights wt; /* the part's, device addresses */
  float *x, *k, *io, *frames; /* fp32 roles */
  void *y, *s, *r, *scores;   /* roles in the precision */
  size_t scores_bytes;
  void *cache[PLAN_VAE22_MAX_CACHES];
  int started[PLAN_VAE22_MAX_CACHES]; /* a resample's first chunk has run */
  float *host_frames; /* the decoder's pinned (3, t, H, W) of a chunk */
  cudaStream_t stream;
  kern_cuda_vae *k1;   /* the Wan 2.1 decoder's ops */
  kern_cuda_vae22 *k2; /* the Wan 2.2 VAE's own */
  int prof, nev;
  cudaEvent_t ev[V22_PROF_EVENTS];
  int ev_op[V22_PROF_EVENTS / 2];
  double ms[WAN_VAE22_GPU_OPS];
};

/* One chunk's running state: the cache cursor (the published feat_idx),
 * the first chunk, the frame count and spatial size of the current level. */
typedef struct g22_run {
  wan_vae22_gpu *g;
  int idx, first;
  int64_t t, h, w;
} g22_run;

/* Profiling: an event pair around an op of kind op. */
int g22_prof_begin(wan_vae22_gpu *g);
void g22_prof_end(wan_vae22_gpu *g, int i, wan_vae22_gpu_op op);
void g22_prof_flush(wan_vae22_gpu *g);

/* Role kind's use of elems elements: fatal when the layout laid it out
 * smaller. */
void g22_fits(const wan_vae22_gpu *g, plan_vae22_buf kind, uint64_t elems);
/* p + elems elements of the precision. */
void *g22_at(const wan_vae22_gpu *g, void *p, int64_t elems);
/* The next cache: c channels, keep frames at the current size, checked
 * against the layout's. */
int g22_next_cache(g22_run *r, int64_t c, int keep);
/* s's first keep frames from cache k; cache k from the last keep of s's
 * keep + t frames. */
void g22_cache_in(g22_run *r, int k, int64_t c, int keep);
void g22_cache_out(g22_run *r, int k, int64_t c, int keep);
/* s behind its keep cached frames, where a cached op's producer writes. */
void *g22_s_frames(const g22_run *r, int64_t c, int keep);
/* A copy on the stream, timed as a copy. */
void g22_copy(wan_vae22_gpu *g, void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind);
/* Stride-1 conv of x (T frames of the current size, ci channels) into y
 * (eleven parameters: kern_cuda_vae_conv's operands and sizes, and the op
 * kind it is timed as). */
void g22_conv(g22_run *r, const void *x, int64_t T, int64_t ci, const float *w, int64_t co,
              int kt, int kh, int kw, void *y, wan_vae22_gpu_op op);
/* out = y + by (+ res + br), kern_cuda_vae_add over the current t h w
 * (nine parameters: its operands). */
void g22_add(g22_run *r, const void *y, const float *by, const void *res, int res_f32,
             const float *br, void *out, int out_f32, int64_t c);
/* RMS norm (+ SiLU) of the residual stream x into y. */
void g22_norm_x(g22_run *r, const float *gamma, void *y, int64_t c, int silu);
/* Causal 3x3x3 conv of s (2 cached + t frames) into y, then cache k. */
void g22_cached_conv3(g22_run *r, int k, const float *w, int64_t ci, int64_t co);
/* The residual block and the middle attention on x. */
void g22_resblock(g22_run *r, const wan_vae_resblock *rb);
void g22_attnblock(g22_run *r, const wan_vae_attn *at);
/* The caches zeroed (WanVAE_.clear_cache) and the resamples' marks
 * cleared, before a run. */
void g22_reset(wan_vae22_gpu *g);

#endif
