/* The Wan 2.1 VAE decoder on the CPU, fp32 (wan_vae.h, VAE.md).
 *
 * WanVAE.decode as published: un-normalise, conv2 (1x1x1), then Decoder3d
 * once per latent frame ("chunk") with a feature cache per causal conv, and
 * the chunks' frames concatenated and clamped to [-1, 1]. Chunk 0 yields one
 * frame; every later chunk 2^(temporal resamples) frames.
 *
 * Activations (C, T, H, W) live in four buffers of one size, computed up
 * front by plan_make from the config and the latent size; the stages swap
 * them by pointer. */
#include <stdlib.h>
#include <string.h>

#include "kern_cpu.h"
#include "kern_dtype.h"
#include "kern_cpu_vae.h"
#include "log.h"
#include "wan_vae.h"
#include "wan_vae_backend.h"
#include "wan_vae_cpu_impl.h"

/* ---------------------------------------------------------------- sizes */

/* Every cache in run order and the largest activation of a chunk. */
typedef struct vae_plan {
  int n_cache;
  int64_t cache_c[WAN_VAE_MAX_CACHES], cache_hw[WAN_VAE_MAX_CACHES];
  int64_t act;  /* floats of the largest activation */
  int64_t attn; /* kern_cpu_frame_attention scratch of the middle */
} vae_plan;

static void plan_cache(vae_plan *p, int64_t c, int64_t hw) {
  p->cache_c[p->n_cache] = c;
  p->cache_hw[p->n_cache] = hw;
  p->n_cache++;
}

static void plan_act(vae_plan *p, int64_t floats) {
  if (floats > p->act) p->act = floats;
}

/* Walks the decoder as wan_vae_decode runs it, with a chunk's largest frame
 * count at each level (a later chunk's: chunk 0 has one frame everywhere). */
static void plan_make(const wan_vae_config *c, int64_t h, int64_t w, vae_plan *p) {
  memset(p, 0, sizeof *p);
  const int64_t d0 = wan_vae_level_dim(c, -1);
  int64_t hw = h * w, t = 1;
  plan_act(p, c->z_dim * hw);
  plan_cache(p, c->z_dim, hw); /* conv1 */
  for (int k = 0; k < 4; k++) plan_cache(p, d0, hw); /* middle.0, middle.2: two convs each */
  plan_act(p, 3 * d0 * hw);                          /* to_qkv */
  p->attn = kern_cpu_frame_attention_scratch(d0, 1, hw);
  for (int i = 0; i < c->n_mult; i++) {
    int64_t in_dim = wan_vae_level_dim(c, i - 1) / (i >= 1 ? 2 : 1);
    int64_t out_dim = wan_vae_level_dim(c, i);
    for (int r = 0; r <= c->num_res_blocks; r++) {
      plan_cache(p, in_dim, hw);
      plan_cache(p, out_dim, hw);
      plan_act(p, (in_dim > out_dim ? in_dim : out_dim) * t * hw);
      in_dim = out_dim;
    }
    if (i == c->n_mult - 1) break;
    if (c->temporal_up[i]) {
      plan_cache(p, out_dim, hw);
      plan_act(p, 2 * out_dim * t * hw); /* time_conv output */
      t *= 2;
    }
    hw *= 4;
    plan_act(p, out_dim * t * hw); /* upsampled */
  }
  plan_cache(p, wan_vae_level_dim(c, c->n_mult - 1), hw); /* head */
  plan_act(p, 3 * t * hw);
}

int64_t wan_vae_decoder_floats(const wan_vae_config *c, int64_t h, int64_t w) {
  vae_plan p;
  plan_make(c, h, w, &p);
  int64_t n = 4 * p.act + p.attn;
  for (int i = 0; i < p.n_cache; i++) n += p.cache_c[i] * WAN_VAE_CACHE_T * p.cache_hw[i];
  return n;
}

int wan_vae_decoder_create(const wan_vae_config *c, int64_t h, int64_t w, wan_vae_decoder **out) {
  char err[160];
  if (wan_vae_config_check(c, err, sizeof err) != 0) {
    sp_log_error("%s", err);
    return SP_ERR_INPUT;
  }
  if (h < 1 || w < 1 || h > WAN_VAE_MAX_SIDE || w > WAN_VAE_MAX_SIDE) {
    sp_log_error("vae latent size %lldx%lld is outside 1..%d per side", (long long)h,
                 (long long)w, WAN_VAE_MAX_SIDE);
    return SP_ERR_INPUT;
  }
  vae_plan p;
  plan_make(c, h, w, &p);
  int64_t cache_floats = 0;
  for (int i = 0; i < p.n_cache; i++)
    cache_floats += p.cache_c[i] * WAN_VAE_CACHE_T * p.cache_hw[i];

  wan_vae_decoder *d = calloc(1, sizeof *d);
  if (!d) goto err_oom;
  d->cfg = *c;
  d->h = h;
  d->w = w;
  d->buf_floats = p.act;
  d->cache_mem = malloc((size_t)cache_floats * sizeof(float));
  d->attn_scratch = malloc((size_t)p.attn * sizeof(float));
  if (!d->cache_mem || !d->attn_scratch) goto err_free;
  for (int i = 0; i < 4; i++) {
    d->buf[i] = malloc((size_t)p.act * sizeof(float));
    if (!d->buf[i]) goto err_free;
  }
  float *m = d->cache_mem;
  d->n_cache = p.n_cache;
  for (int i = 0; i < p.n_cache; i++) {
    d->cache[i].frames = m;
    d->cache[i].c = p.cache_c[i];
    d->cache[i].hw = p.cache_hw[i];
    m += p.cache_c[i] * WAN_VAE_CACHE_T * p.cache_hw[i];
  }
  *out = d;
  return SP_OK;

err_free:
  wan_vae_decoder_free(d);
err_oom:
  sp_log_error("out of memory for the vae decoder at latent %lldx%lld (%.1f GiB)", (long long)h,
               (long long)w, (double)wan_vae_decoder_floats(c, h, w) * 4.0 / (1 << 30));
  return SP_ERR_RUNTIME;
}

void wan_vae_decoder_free(wan_vae_decoder *d) {
  if (!d) return;
  for (int i = 0; i < 4; i++) free(d->buf[i]);
  free(d->attn_scratch);
  free(d->cache_mem);
  free(d);
}

void wan_vae_decoder_round(wan_vae_decoder *d, int mask) { d->round_mask = mask; }

/* x (n) rounded to bf16 in place when the decoder rounds stores of kind. */
static void round_bf16(const wan_vae_decoder *d, int kind, float *x, int64_t n) {
  vae_round_bf16(d->round_mask, kind, x, n);
}

void wan_vae_decoder_tf32(wan_vae_decoder *d, int mode) { d->tf32 = mode; }

/* The decoder's state for one chunk: its caches, rounding and scratch. */
static vae_run run_of(wan_vae_decoder *d) {
  return (vae_run){.cache = d->cache,
                   .n_cache = d->n_cache,
                   .idx = 0,
                   .round_mask = d->round_mask,
                   .tf32 = d->tf32,
                   .attn_scratch = d->attn_scratch,
                   .t = 1,
                   .h = d->h,
                   .w = d->w};
}

/* Resample: upsample3d's time conv (skipped in the first chunk, as the
 * published "Rep" mark does), 2x nearest in h and w, 3x3 conv to dim / 2. */
static void resample(vae_run *r, const wan_vae_resample *u, vae_bufs *B) {
  const int64_t c = u->dim, hw = r->h * r->w;
  const float *src = B->x;
  if (u->temporal) {
    wan_vae_cache *k = vae_next_cache(r, c);
    if (k->started) {
      /* B->c is free until the upsampling writes it */
      const float *tx = vae_tf32_input(r, B->x, B->c, c * r->t * hw);
      kern_cpu_causal_conv3d(tx, k->frames, k->n, u->time_w, u->time_b, B->a, c, 2 * c, r->t,
                             r->h, r->w, 3, 1, 1);
      vae_round_bf16(r->round_mask, WAN_VAE_ROUND_CONV, B->a, 2 * c * r->t * hw);
      vae_cache_push(k, tx, r->t);
      kern_cpu_time_unfold2(B->a, B->b, c, r->t, hw);
      r->t *= 2;
      src = B->b;
    }
    k->started = 1;
  }
  kern_cpu_upsample2x_nearest(src, B->c, c * r->t, r->h, r->w);
  r->h *= 2;
  r->w *= 2;
  vae_round_tf32(r, B->c, c * r->t * r->h * r->w);
  kern_cpu_conv2d_frames(B->c, u->conv_w, u->conv_b, B->a, c, c / 2, r->t, r->h, r->w, 3, 3);
  /* the resample conv's output is the residual stream of the next level */
  vae_round_bf16(r->round_mask, WAN_VAE_ROUND_CONV | WAN_VAE_ROUND_RES, B->a,
                 c / 2 * r->t * r->h * r->w);
  vae_swap(&B->x, &B->a);
}

/* Decoder3d on one chunk: B->x holds conv2's output for latent frame (z,
 * 1, h, w); the chunk's video frames (3, r->t, H, W) end in B->x. */
static void decoder_chunk(vae_run *r, const wan_vae_weights *wt, vae_bufs *B) {
  vae_cached_conv(r, B->x, wt->conv1_w, wt->conv1_b, B->a, wt->z_dim, wt->mid_dim,
                  WAN_VAE_ROUND_CONV | WAN_VAE_ROUND_RES);
  vae_swap(&B->x, &B->a);
  vae_resblock(r, &wt->mid0, B);
  vae_attnblock(r, &wt->mid_attn, B);
  vae_resblock(r, &wt->mid2, B);
  for (int i = 0; i < wt->n_levels; i++) {
    const wan_vae_level *l = &wt->level[i];
    for (int k = 0; k < l->n_res; k++) vae_resblock(r, &l->res[k], B);
    if (l->has_up) resample(r, &l->up, B);
  }
  vae_norm_silu(r, B->x, wt->head_gamma, B->a, wt->head_dim);
  vae_cached_conv(r, B->a, wt->head_w, wt->head_b, B->b, wt->head_dim, 3, WAN_VAE_ROUND_HEAD);
  vae_swap(&B->x, &B->b);
}

int wan_vae_decode_stream(wan_vae_decoder *d, const wan_vae_weights *wt, const float *latents,
                          int64_t F, wan_vae_frames_fn fn, void *user) {
  const wan_vae_config *c = &d->cfg;
  const int64_t z = c->z_dim, hw = d->h * d->w;
  const int64_t s = wan_vae_out_scale(c), T_out = wan_vae_out_frames(c, F);
  const int64_t ohw = hw * s * s;
  if (wt->z_dim != z || wt->n_levels != c->n_mult)
    sp_fatal("vae: weights bound for another config");
  /* WanVAE_.clear_cache: every chunk sequence starts with empty caches. */
  vae_cache_clear(d->cache, d->n_cache);
  int64_t frame0 = 0; /* first video frame of the chunk */
  for (int64_t f = 0; f < F; f++) {
    vae_bufs B = {d->buf[0], d->buf[1], d->buf[2], d->buf[3]};
    vae_run r = run_of(d);
    /* z / (1 / std) + mean, rounded as the published fp32 tensors are. */
    for (int64_t ch = 0; ch < z; ch++) {
      const float inv_std = 1.0f / wan_vae_latent_std[ch], mean = wan_vae_latent_mean[ch];
      const float *src = latents + (ch * F + f) * hw;
      float *dst = B.a + ch * hw;
      for (int64_t p = 0; p < hw; p++) dst[p] = src[p] / inv_std + mean;
    }
    kern_cpu_causal_conv3d(B.a, NULL, 0, wt->conv2_w, wt->conv2_b, B.x, z, z, 1, d->h, d->w, 1,
                           1, 1);
    round_bf16(d, WAN_VAE_ROUND_ACT, B.x, z * hw);
    decoder_chunk(&r, wt, &B);
    if (r.h * r.w != ohw || frame0 + r.t > T_out)
      sp_fatal("vae: chunk %lld gave %lld frames of %lldx%lld", (long long)f, (long long)r.t,
               (long long)r.h, (long long)r.w);
    kern_cpu_clamp(B.x, 3 * r.t * ohw, -1.0f, 1.0f);
    int rc = fn(user, B.x, frame0, r.t);
    if (rc != 0) return rc;
    frame0 += r.t;
  }
  if (frame0 != T_out) sp_fatal("vae: decoded %lld frames, expected %lld", (long long)frame0,
                                (long long)T_out);
  return 0;
}

/* wan_vae_decode's sink: a chunk's (3, n, H, W) into the whole video. */
typedef struct whole_video {
  float *video;
  int64_t T, ohw;
} whole_video;

static int whole_video_put(void *user, const float *frames, int64_t t0, int64_t n) {
  const whole_video *v = user;
  for (int64_t ch = 0; ch < 3; ch++)
    memcpy(v->video + (ch * v->T + t0) * v->ohw, frames + ch * n * v->ohw,
           (size_t)(n * v->ohw) * sizeof *v->video);
  return 0;
}

void wan_vae_decode(wan_vae_decoder *d, const wan_vae_weights *wt, const float *latents,
                    int64_t F, float *video) {
  const int64_t s = wan_vae_out_scale(&d->cfg);
  whole_video v = {video, wan_vae_out_frames(&d->cfg, F), d->h * d->w * s * s};
  (void)wan_vae_decode_stream(d, wt, latents, F, whole_video_put, &v);
}

/* ---------------------------------------------------------------- backend */

/* The CPU backend (wan_vae_backend.h): the fp32 decoder and its weights;
 * the fp32 encoder is wan_vae_enc_cpu.c's. */
typedef struct cpu_decoder {
  wan_vae_decoder *d;
  const wan_vae_weights *wt;
} cpu_decoder;

static int cpu_create(const wan_vae_make *a, void **out) {
  cpu_decoder *c = calloc(1, sizeof *c);
  if (!c) {
    sp_log_error("vae: out of host memory for the decoder");
    return SP_ERR_RUNTIME;
  }
  const int rc = wan_vae_decoder_create(a->config, a->h, a->w, &c->d);
  if (rc != SP_OK) {
    free(c);
    return rc;
  }
  c->wt = a->weights;
  *out = c;
  return SP_OK;
}

static void cpu_destroy(void *p) {
  cpu_decoder *c = p;
  if (!c) return;
  wan_vae_decoder_free(c->d);
  free(c);
}

static int cpu_decode(void *p, const float *latents, int64_t F, wan_vae_frames_fn fn,
                      void *user) {
  cpu_decoder *c = p;
  return wan_vae_decode_stream(c->d, c->wt, latents, F, fn, user);
}

static int64_t cpu_host_bytes(const void *p) {
  const wan_vae_decoder *d = ((const cpu_decoder *)p)->d;
  return wan_vae_decoder_floats(&d->cfg, d->h, d->w) * (int64_t)sizeof(float);
}

static int64_t cpu_device_bytes(const void *p) { return 0; }

static const wan_vae_backend cpu_ops = {.create = cpu_create,
                                        .destroy = cpu_destroy,
                                        .decode = cpu_decode,
                                        .host_bytes = cpu_host_bytes,
                                        .device_bytes = cpu_device_bytes,
                                        .enc_create = wan_vae_cpu_enc_create,
                                        .enc_destroy = wan_vae_cpu_enc_destroy,
                                        .encode = wan_vae_cpu_encode,
                                        .enc_host_bytes = wan_vae_cpu_enc_host_bytes,
                                        .enc_device_bytes = cpu_device_bytes};

const net_backend wan_vae_cpu = {wan_vae_net, RANK_DEVICE_CPU, &cpu_ops};
