/* The Wan 2.1 VAE encoder on the CPU, fp32 (wan_vae_enc.h, VAE.md "The
 * encoder").
 *
 * WanVAE_.encode as published: the caches cleared, Encoder3d on frame 0
 * alone and then on chunks of WAN_VAE_ENC_CHUNK frames, each causal conv
 * with the decoder's cache (its last 2 input frames), each downsample3d
 * keeping the last frame of its spatial output for the next chunk's time
 * conv; conv1 (1x1x1) over each chunk's output (it is pointwise, so per
 * chunk is the published all-at-once), mu its first z_dim channels,
 * normalised (mu - mean) * (1 / std) as Wan2_1_VAE.encode does.
 *
 * Activations (C, T, H, W) live in four buffers of one size, computed up
 * front by enc_plan from the config and the video size; the stages swap
 * them by pointer. The pieces shared with the decoder are
 * wan_vae_cpu_blocks.c's. */
#include <stdlib.h>
#include <string.h>

#include "kern_cpu.h"
#include "kern_cpu_vae.h"
#include "kern_cpu_vae_enc.h"
#include "log.h"
#include "wan_vae_backend.h"
#include "wan_vae_cpu_impl.h"
#include "wan_vae_enc.h"

/* ---------------------------------------------------------------- sizes */

/* Every cache in run order (frames it keeps: 2 for a causal conv, 1 for a
 * downsample3d) and the largest activation of a chunk. */
typedef struct enc_plan {
  int n_cache;
  int64_t cache_c[WAN_VAE_MAX_CACHES], cache_hw[WAN_VAE_MAX_CACHES];
  int cache_t[WAN_VAE_MAX_CACHES];
  int64_t act;  /* floats of the largest activation */
  int64_t attn; /* kern_cpu_frame_attention scratch of the middle */
} enc_plan;

static void plan_cache(enc_plan *p, int64_t c, int64_t hw, int t) {
  p->cache_c[p->n_cache] = c;
  p->cache_hw[p->n_cache] = hw;
  p->cache_t[p->n_cache] = t;
  p->n_cache++;
}

static void plan_act(enc_plan *p, int64_t floats) {
  if (floats > p->act) p->act = floats;
}

/* Walks the encoder as wan_vae_encode_stream runs it, with a later
 * chunk's frame count at each level (chunk 0 has one frame everywhere). */
static void enc_plan_make(const wan_vae_config *c, int64_t H, int64_t W, enc_plan *p) {
  memset(p, 0, sizeof *p);
  int64_t h = H, w = W, t = WAN_VAE_ENC_CHUNK;
  int64_t in = wan_vae_enc_level_dim(c, -1);
  plan_act(p, WAN_VAE_ENC_IN_CH * t * h * w); /* the chunk's frames */
  plan_cache(p, WAN_VAE_ENC_IN_CH, h * w, WAN_VAE_CACHE_T); /* conv1 */
  plan_act(p, in * t * h * w);
  for (int i = 0; i < c->n_mult; i++) {
    const int64_t out = wan_vae_enc_level_dim(c, i);
    for (int r = 0; r < c->num_res_blocks; r++) {
      plan_cache(p, in, h * w, WAN_VAE_CACHE_T);
      plan_cache(p, out, h * w, WAN_VAE_CACHE_T);
      plan_act(p, (in > out ? in : out) * t * h * w);
      in = out;
    }
    if (i == c->n_mult - 1) break;
    h /= 2;
    w /= 2;
    plan_act(p, out * t * h * w); /* the spatial step's output */
    if (wan_vae_enc_temporal(c, i)) {
      plan_cache(p, out, h * w, 1);
      t /= 2;
    }
  }
  for (int k = 0; k < 4; k++) plan_cache(p, in, h * w, WAN_VAE_CACHE_T); /* middle.0, .2 */
  plan_act(p, 3 * in * t * h * w);                                       /* to_qkv */
  p->attn = kern_cpu_frame_attention_scratch(in, t, h * w);
  plan_cache(p, in, h * w, WAN_VAE_CACHE_T); /* head */
  plan_act(p, 2 * c->z_dim * t * h * w);
}

static int64_t cache_floats(const enc_plan *p) {
  int64_t n = 0;
  for (int i = 0; i < p->n_cache; i++) n += p->cache_c[i] * p->cache_t[i] * p->cache_hw[i];
  return n;
}

int64_t wan_vae_encoder_floats(const wan_vae_config *c, int64_t H, int64_t W) {
  enc_plan p;
  enc_plan_make(c, H, W, &p);
  return 4 * p.act + p.attn + cache_floats(&p);
}

int wan_vae_encoder_create(const wan_vae_config *c, int64_t H, int64_t W, wan_vae_encoder **out) {
  char err[200];
  if (wan_vae_config_check(c, err, sizeof err) != 0 ||
      wan_vae_enc_config_check(c, err, sizeof err) != 0 ||
      wan_vae_enc_size_check(c, 1, H, W, err, sizeof err) != 0) {
    sp_log_error("vae encoder: %s", err);
    return SP_ERR_INPUT;
  }
  enc_plan p;
  enc_plan_make(c, H, W, &p);
  wan_vae_encoder *e = calloc(1, sizeof *e);
  if (!e) goto err_oom;
  e->cfg = *c;
  e->H = H;
  e->W = W;
  e->h = wan_vae_enc_latent_side(c, H);
  e->w = wan_vae_enc_latent_side(c, W);
  e->buf_floats = p.act;
  e->cache_mem = malloc((size_t)cache_floats(&p) * sizeof(float));
  e->attn_scratch = malloc((size_t)p.attn * sizeof(float));
  if (!e->cache_mem || !e->attn_scratch) goto err_free;
  for (int i = 0; i < 4; i++)
    if (!(e->buf[i] = malloc((size_t)p.act * sizeof(float)))) goto err_free;
  float *m = e->cache_mem;
  e->n_cache = p.n_cache;
  for (int i = 0; i < p.n_cache; i++) {
    e->cache[i] = (wan_vae_cache){.frames = m, .c = p.cache_c[i], .hw = p.cache_hw[i]};
    m += p.cache_c[i] * p.cache_t[i] * p.cache_hw[i];
  }
  *out = e;
  return SP_OK;

err_free:
  wan_vae_encoder_free(e);
err_oom:
  sp_log_error("out of memory for the vae encoder at %lldx%lld (%.1f GiB)", (long long)H,
               (long long)W, (double)wan_vae_encoder_floats(c, H, W) * 4.0 / (1 << 30));
  return SP_ERR_RUNTIME;
}

void wan_vae_encoder_free(wan_vae_encoder *e) {
  if (!e) return;
  for (int i = 0; i < 4; i++) free(e->buf[i]);
  free(e->attn_scratch);
  free(e->cache_mem);
  free(e);
}

void wan_vae_encoder_round(wan_vae_encoder *e, int mask) { e->round_mask = mask; }

void wan_vae_encoder_tf32(wan_vae_encoder *e, int mode) { e->tf32 = mode; }

/* ---------------------------------------------------------------- the pieces */

/* A downsample3d's memory: the last frame of x (c, T, hw), (c, hw). */
static void down_keep(wan_vae_cache *k, const float *x, int64_t T) {
  for (int64_t ch = 0; ch < k->c; ch++)
    memcpy(k->frames + ch * k->hw, x + (ch * T + T - 1) * k->hw, (size_t)k->hw * sizeof(float));
  k->n = 1;
}

/* Resample downsample2d / downsample3d on B->x: the stride-2 spatial conv
 * on every frame; then downsample3d's time conv over (the previous chunk's
 * last frame, this chunk's frames), except in the first chunk, whose frame
 * passes (and is kept). */
static void downsample(vae_run *r, const wan_vae_down *d, vae_bufs *B) {
  const int64_t c = d->dim;
  /* the conv's input (the residual stream, not used after this) */
  vae_round_bf16(r->round_mask, WAN_VAE_ROUND_ACT, B->x, c * r->t * r->h * r->w);
  vae_round_tf32(r, B->x, c * r->t * r->h * r->w);
  kern_cpu_conv2d_s2_frames(B->x, d->conv_w, d->conv_b, B->a, c, c, r->t, r->h, r->w);
  r->h /= 2;
  r->w /= 2;
  vae_round_bf16(r->round_mask, WAN_VAE_ROUND_CONV, B->a, c * r->t * r->h * r->w);
  if (d->temporal) {
    wan_vae_cache *k = vae_next_cache(r, c);
    if (k->started) {
      /* the time conv's input, the kept frame and the chunk's (read by it
       * and kept, not the residual stream) */
      vae_round_tf32(r, k->frames, c * r->h * r->w);
      vae_round_tf32(r, B->a, c * r->t * r->h * r->w);
      const int64_t n = kern_cpu_time_conv_s2(B->a, k->frames, d->time_w, d->time_b, B->b, c, c,
                                              r->t, r->h * r->w);
      vae_round_bf16(r->round_mask, WAN_VAE_ROUND_CONV, B->b, c * n * r->h * r->w);
      down_keep(k, B->a, r->t);
      r->t = n;
      vae_swap(&B->x, &B->b);
      return;
    }
    down_keep(k, B->a, r->t);
    k->started = 1;
  }
  vae_swap(&B->x, &B->a);
}

/* Encoder3d and conv1 on one chunk: B->x holds its frames (3, t, H, W);
 * mu (z_dim, r->t, h, w) ends at the start of B->x. */
static void encoder_chunk(vae_run *r, const wan_vae_enc_weights *wt, vae_bufs *B) {
  const int m = r->round_mask;
  vae_round_bf16(m, WAN_VAE_ROUND_ACT, B->x, WAN_VAE_ENC_IN_CH * r->t * r->h * r->w);
  vae_cached_conv(r, B->x, wt->conv1_w, wt->conv1_b, B->a, WAN_VAE_ENC_IN_CH, wt->in_dim,
                  WAN_VAE_ROUND_CONV | WAN_VAE_ROUND_RES);
  vae_swap(&B->x, &B->a);
  for (int i = 0; i < wt->n_levels; i++) {
    const wan_vae_enc_level *l = &wt->level[i];
    for (int k = 0; k < l->n_res; k++) vae_resblock(r, &l->res[k], B);
    if (l->has_down) downsample(r, &l->down, B);
  }
  vae_resblock(r, &wt->mid0, B);
  vae_attnblock(r, &wt->mid_attn, B);
  vae_resblock(r, &wt->mid2, B);
  vae_norm_silu(r, B->x, wt->head_gamma, B->a, wt->head_dim);
  vae_cached_conv(r, B->a, wt->head_w, wt->head_b, B->b, wt->head_dim, 2 * wt->z_dim,
                  WAN_VAE_ROUND_HEAD);
  /* conv1 over the 2 z_dim channels; mu is its first z_dim (the rest, the
   * log-variance, is not used) */
  kern_cpu_causal_conv3d(B->b, NULL, 0, wt->quant_w, wt->quant_b, B->x, 2 * wt->z_dim,
                         2 * wt->z_dim, r->t, r->h, r->w, 1, 1, 1);
}

/* mu (z, n) in place -> (mu - mean) * (1 / std), per channel, with the
 * float32 mean and 1 / std Wan2_1_VAE holds. */
static void normalize(float *mu, int64_t z, int64_t n) {
  for (int64_t ch = 0; ch < z; ch++) {
    const float mean = wan_vae_latent_mean[ch], inv_std = 1.0f / wan_vae_latent_std[ch];
    float *m = mu + ch * n;
    for (int64_t i = 0; i < n; i++) m[i] = (m[i] - mean) * inv_std;
  }
}

int wan_vae_encode_stream(wan_vae_encoder *e, const wan_vae_enc_weights *wt, const float *video,
                          int64_t T, wan_vae_latents_fn fn, void *user) {
  const wan_vae_config *c = &e->cfg;
  const int64_t HW = e->H * e->W, z = c->z_dim;
  const int64_t F = wan_vae_enc_latent_frames(c, T);
  char err[200];
  if (wt->z_dim != z || wt->n_levels != c->n_mult)
    sp_fatal("vae encoder: weights bound for another config");
  if (wan_vae_enc_size_check(c, T, e->H, e->W, err, sizeof err) != 0)
    sp_fatal("vae encoder: %s", err);
  /* WanVAE_.clear_cache: every encode starts with empty caches. */
  vae_cache_clear(e->cache, e->n_cache);
  int64_t f0 = 0; /* first latent frame of the chunk */
  for (int64_t first = 0; first < T;) {
    const int64_t t = first == 0 ? 1 : WAN_VAE_ENC_CHUNK;
    vae_bufs B = {e->buf[0], e->buf[1], e->buf[2], e->buf[3]};
    for (int64_t ch = 0; ch < WAN_VAE_ENC_IN_CH; ch++)
      memcpy(B.x + ch * t * HW, video + (ch * T + first) * HW, (size_t)(t * HW) * sizeof(float));
    vae_run r = {.cache = e->cache, .n_cache = e->n_cache, .round_mask = e->round_mask,
                 .tf32 = e->tf32, .attn_scratch = e->attn_scratch, .t = t, .h = e->H, .w = e->W};
    encoder_chunk(&r, wt, &B);
    if (r.h != e->h || r.w != e->w || r.idx != e->n_cache || f0 + r.t > F)
      sp_fatal("vae encoder: frames %lld.. gave %lld latent frames of %lldx%lld after %d of %d "
               "caches", (long long)first, (long long)r.t, (long long)r.h, (long long)r.w, r.idx,
               e->n_cache);
    normalize(B.x, z, r.t * r.h * r.w);
    const int rc = fn(user, B.x, f0, r.t);
    if (rc != 0) return rc;
    f0 += r.t;
    first += t;
  }
  if (f0 != F) sp_fatal("vae encoder: %lld latent frames, expected %lld", (long long)f0,
                        (long long)F);
  return 0;
}

/* wan_vae_encode's sink: a chunk's (z, n, h, w) into the whole latent. */
typedef struct whole_latent {
  float *latents;
  int64_t z, F, hw;
} whole_latent;

static int whole_latent_put(void *user, const float *lat, int64_t f0, int64_t n) {
  const whole_latent *v = user;
  for (int64_t ch = 0; ch < v->z; ch++)
    memcpy(v->latents + (ch * v->F + f0) * v->hw, lat + ch * n * v->hw,
           (size_t)(n * v->hw) * sizeof(float));
  return 0;
}

void wan_vae_encode(wan_vae_encoder *e, const wan_vae_enc_weights *wt, const float *video,
                    int64_t T, float *latents) {
  whole_latent v = {latents, e->cfg.z_dim, wan_vae_enc_latent_frames(&e->cfg, T), e->h * e->w};
  (void)wan_vae_encode_stream(e, wt, video, T, whole_latent_put, &v);
}

/* ---------------------------------------------------------------- backend */

/* The CPU backend's encoder (wan_vae_backend.h): the fp32 encoder and its
 * weights. */
typedef struct cpu_encoder {
  wan_vae_encoder *e;
  const wan_vae_enc_weights *wt;
} cpu_encoder;

int wan_vae_cpu_enc_create(const wan_vae_enc_make *a, void **out) {
  cpu_encoder *c = calloc(1, sizeof *c);
  if (!c) {
    sp_log_error("vae: out of host memory for the encoder");
    return SP_ERR_RUNTIME;
  }
  const int rc = wan_vae_encoder_create(a->config, a->H, a->W, &c->e);
  if (rc != SP_OK) {
    free(c);
    return rc;
  }
  c->wt = a->weights;
  *out = c;
  return SP_OK;
}

void wan_vae_cpu_enc_destroy(void *p) {
  cpu_encoder *c = p;
  if (!c) return;
  wan_vae_encoder_free(c->e);
  free(c);
}

int wan_vae_cpu_encode(void *p, const float *video, int64_t T, wan_vae_latents_fn fn,
                       void *user) {
  cpu_encoder *c = p;
  return wan_vae_encode_stream(c->e, c->wt, video, T, fn, user);
}

int64_t wan_vae_cpu_enc_host_bytes(const void *p) {
  const wan_vae_encoder *e = ((const cpu_encoder *)p)->e;
  return wan_vae_encoder_floats(&e->cfg, e->H, e->W) * (int64_t)sizeof(float);
}
