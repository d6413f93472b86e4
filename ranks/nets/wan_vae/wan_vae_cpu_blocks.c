/* The pieces the CPU decoder and encoder share (wan_vae_cpu_impl.h):
 * caches, the cached causal convolution, norm + SiLU, the residual and
 * attention blocks, as the published ResidualBlock, AttentionBlock and the
 * cache pattern of CausalConv3d compute them (VAE.md "The pieces", "The
 * cache rule"). */
#include <string.h>

#include "kern_cpu.h"
#include "kern_cpu_vae.h"
#include "kern_dtype.h"
#include "log.h"
#include "wan_vae_cpu_impl.h"

void vae_swap(float **p, float **q) {
  float *t = *p;
  *p = *q;
  *q = t;
}

void vae_round_bf16(int round_mask, int kind, float *x, int64_t n) {
  if (!(round_mask & kind)) return;
  for (int64_t i = 0; i < n; i++) x[i] = kern_bf16_to_f32(kern_f32_to_bf16(x[i]));
}

void vae_round_tf32(const vae_run *r, float *x, int64_t n) {
  if (r->tf32 == WAN_VAE_TF32_OFF) return;
  const int trunc = r->tf32 == WAN_VAE_TF32_TRUNCATE;
  for (int64_t i = 0; i < n; i++) x[i] = kern_f32_round_tf32(x[i], trunc);
}

const float *vae_tf32_input(const vae_run *r, const float *x, float *tmp, int64_t n) {
  if (r->tf32 == WAN_VAE_TF32_OFF) return x;
  memcpy(tmp, x, (size_t)n * sizeof *tmp);
  vae_round_tf32(r, tmp, n);
  return tmp;
}

/* ---------------------------------------------------------------- caches */

void vae_cache_push(wan_vae_cache *k, const float *x, int64_t T) {
  const int64_t hw = k->hw;
  for (int64_t ch = 0; ch < k->c; ch++) {
    float *f = k->frames + ch * WAN_VAE_CACHE_T * hw; /* (2, hw) */
    const float *xc = x + ch * T * hw;                /* (T, hw) */
    if (T >= 2) {
      memcpy(f, xc + (T - 2) * hw, (size_t)(2 * hw) * sizeof *f);
    } else {
      memmove(f, f + hw, (size_t)hw * sizeof *f);
      memcpy(f + hw, xc, (size_t)hw * sizeof *f);
    }
  }
  k->n = k->n + T < WAN_VAE_CACHE_T ? k->n + (int)T : WAN_VAE_CACHE_T;
}

void vae_cache_clear(wan_vae_cache *cache, int n) {
  for (int i = 0; i < n; i++) {
    cache[i].n = 0;
    cache[i].started = 0;
  }
}

wan_vae_cache *vae_next_cache(vae_run *r, int64_t c) {
  if (r->idx >= r->n_cache) sp_fatal("vae: more cached convs than planned");
  wan_vae_cache *k = &r->cache[r->idx++];
  if (k->c != c || k->hw != r->h * r->w)
    sp_fatal("vae: cache %d planned for %lld x %lld, used for %lld x %lld", r->idx - 1,
             (long long)k->c, (long long)k->hw, (long long)c, (long long)(r->h * r->w));
  return k;
}

void vae_cached_conv(vae_run *r, float *x, const float *wt, const float *b, float *y,
                     int64_t ci, int64_t co, int round_kind) {
  wan_vae_cache *k = vae_next_cache(r, ci);
  vae_round_tf32(r, x, ci * r->t * r->h * r->w);
  kern_cpu_causal_conv3d(x, k->frames, k->n, wt, b, y, ci, co, r->t, r->h, r->w, 3, 3, 3);
  vae_cache_push(k, x, r->t);
  vae_round_bf16(r->round_mask, round_kind, y, co * r->t * r->h * r->w);
}

/* ---------------------------------------------------------------- blocks */

void vae_norm_silu(const vae_run *r, const float *x, const float *gamma, float *y, int64_t c) {
  const int64_t n = r->t * r->h * r->w;
  kern_cpu_channel_rmsnorm(x, gamma, y, c, n);
  kern_cpu_silu(y, c * n);
  vae_round_bf16(r->round_mask, WAN_VAE_ROUND_ACT, y, c * n);
}

void vae_resblock(vae_run *r, const wan_vae_resblock *rb, vae_bufs *B) {
  const int64_t n = r->t * r->h * r->w;
  const float *h = B->x; /* the shortcut */
  if (rb->shortcut_w) {
    /* B->a is free until norm1 writes it */
    const float *sx = vae_tf32_input(r, B->x, B->a, rb->in_dim * n);
    kern_cpu_causal_conv3d(sx, NULL, 0, rb->shortcut_w, rb->shortcut_b, B->c, rb->in_dim,
                           rb->out_dim, r->t, r->h, r->w, 1, 1, 1);
    vae_round_bf16(r->round_mask, WAN_VAE_ROUND_CONV, B->c, rb->out_dim * n);
    h = B->c;
  }
  vae_norm_silu(r, B->x, rb->norm1_gamma, B->a, rb->in_dim);
  vae_cached_conv(r, B->a, rb->conv1_w, rb->conv1_b, B->b, rb->in_dim, rb->out_dim,
                  WAN_VAE_ROUND_CONV);
  vae_norm_silu(r, B->b, rb->norm2_gamma, B->b, rb->out_dim);
  /* Dropout(0) is the identity. */
  vae_cached_conv(r, B->b, rb->conv2_w, rb->conv2_b, B->a, rb->out_dim, rb->out_dim,
                  WAN_VAE_ROUND_CONV);
  kern_cpu_gated_add(B->a, h, NULL, rb->out_dim, n);
  vae_round_bf16(r->round_mask, WAN_VAE_ROUND_RES, B->a, rb->out_dim * n);
  vae_swap(&B->x, &B->a);
}

void vae_attnblock(vae_run *r, const wan_vae_attn *at, vae_bufs *B) {
  const int64_t hw = r->h * r->w, c = at->dim, n = c * r->t * hw;
  const int m = r->round_mask;
  kern_cpu_channel_rmsnorm(B->x, at->norm_gamma, B->a, c, r->t * hw);
  vae_round_bf16(m, WAN_VAE_ROUND_ACT, B->a, n);
  vae_round_tf32(r, B->a, n);
  kern_cpu_conv2d_frames(B->a, at->qkv_w, at->qkv_b, B->b, c, 3 * c, r->t, r->h, r->w, 1, 1);
  vae_round_bf16(m, WAN_VAE_ROUND_CONV, B->b, 3 * n);
  vae_round_tf32(r, B->b, 3 * n); /* q, k, v: the GEMMs' operands */
  kern_cpu_frame_attention(B->b, r->attn_scratch, B->c, c, r->t, hw);
  vae_round_bf16(m, WAN_VAE_ROUND_ATTN, B->c, n);
  vae_round_tf32(r, B->c, n);
  kern_cpu_conv2d_frames(B->c, at->proj_w, at->proj_b, B->a, c, c, r->t, r->h, r->w, 1, 1);
  vae_round_bf16(m, WAN_VAE_ROUND_CONV, B->a, n);
  kern_cpu_gated_add(B->a, B->x, NULL, c, r->t * hw);
  vae_round_bf16(m, WAN_VAE_ROUND_RES, B->a, n);
  vae_swap(&B->x, &B->a);
}
