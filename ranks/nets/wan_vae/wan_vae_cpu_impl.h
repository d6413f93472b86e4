/* What the CPU decoder (wan_vae_cpu.c) and the CPU encoder
 * (wan_vae_enc_cpu.c) share (wan_vae_cpu_blocks.c): the running state of
 * one chunk over the causal caches, and the pieces both networks are made
 * of (VAE.md "The pieces"): the cached causal convolution, RMS norm with
 * SiLU, the residual block and the attention block. Activations (C, T, H,
 * W) channel-first, fp32; stores of the kinds in round_mask rounded to bf16
 * (WAN_VAE_ROUND_*, the emulation of the CUDA form's bf16 stores), and in
 * the tf32 emulation (WAN_VAE_TF32_*) the inputs of the convolutions and
 * of the attention's products rounded to TF32. Included by those files
 * only. */
#ifndef WAN_VAE_CPU_IMPL_H
#define WAN_VAE_CPU_IMPL_H

#include <stdint.h>

#include "wan_vae.h"
#include "wan_vae_backend.h"

/* One chunk through a network: its caches in the order the convolutions
 * run (the cursor idx is the published feat_idx), the scratch of the
 * middle attention, the frame count and spatial size of the current level. */
typedef struct vae_run {
  wan_vae_cache *cache;
  int n_cache;
  int idx;
  int round_mask;
  int tf32; /* WAN_VAE_TF32_*: how conv and attention inputs are rounded */
  float *attn_scratch;
  int64_t t, h, w;
} vae_run;

/* The four activation buffers; x is the current activation. */
typedef struct vae_bufs {
  float *x, *a, *b, *c;
} vae_bufs;

void vae_swap(float **p, float **q);

/* x (n) rounded to bf16 in place when round_mask has kind. */
void vae_round_bf16(int round_mask, int kind, float *x, int64_t n);

/* x (n) rounded to TF32 in place when r emulates the tf32 mode. */
void vae_round_tf32(const vae_run *r, float *x, int64_t n);
/* A convolution's input that must itself stay fp32 (the residual stream):
 * x, or in the tf32 emulation its rounding into tmp (n floats). */
const float *vae_tf32_input(const vae_run *r, const float *x, float *tmp, int64_t n);

/* Keeps the last WAN_VAE_CACHE_T frames of (cached frames, x), x (c, T, hw):
 * the published cache_x, which takes the previous chunk's last frame in
 * front when a chunk has a single frame. */
void vae_cache_push(wan_vae_cache *k, const float *x, int64_t T);
/* Every cache emptied: WanVAE_.clear_cache. */
void vae_cache_clear(wan_vae_cache *cache, int n);

/* The next cache of r, checked against c channels at r's current size
 * (fatal when the walk and the plan disagree). */
wan_vae_cache *vae_next_cache(vae_run *r, int64_t c);

/* y = CausalConv3d 3x3x3 (padding 1) of x (ci, t, h, w) with the next
 * cache, which then takes x's last frames; y rounded when round_kind. x is
 * read by this conv only: the tf32 emulation rounds it in place. */
void vae_cached_conv(vae_run *r, float *x, const float *wt, const float *b, float *y,
                     int64_t ci, int64_t co, int round_kind);

/* RMS_norm over channels then SiLU: y from x, both (c, t, h, w). */
void vae_norm_silu(const vae_run *r, const float *x, const float *gamma, float *y, int64_t c);

/* ResidualBlock on B->x (in_dim channels), its output in B->x. */
void vae_resblock(vae_run *r, const wan_vae_resblock *rb, vae_bufs *B);
/* AttentionBlock on B->x, its output in B->x. */
void vae_attnblock(vae_run *r, const wan_vae_attn *at, vae_bufs *B);

/* The CPU backend's encoder (wan_vae_enc_cpu.c), in the backend table of
 * wan_vae_cpu.c (wan_vae_backend.h). */
int wan_vae_cpu_enc_create(const wan_vae_enc_make *a, void **out);
void wan_vae_cpu_enc_destroy(void *e);
int wan_vae_cpu_encode(void *e, const float *video, int64_t T, wan_vae_latents_fn fn, void *user);
int64_t wan_vae_cpu_enc_host_bytes(const void *e);

#endif
