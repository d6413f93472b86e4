/* The Wan 2.2 VAE encoder on the CPU, fp32 (wan_vae22.h, VAE22.md
 * "Encoder"): WanVAE_.encode as published: patchify, then Encoder3d on
 * frame 0 alone and on each following group of 4 frames with the causal
 * caches, conv1 (1x1x1) on the chunks' outputs, mu (the first z_dim
 * channels) normalised with the 48-channel statistics. */
#include <stdlib.h>
#include <string.h>

#include "kern_cpu.h"
#include "kern_cpu_vae.h"
#include "kern_cpu_vae22.h"
#include "kern_cpu_vae_enc.h"
#include "log.h"
#include "wan_vae22.h"
#include "wan_vae22_cpu_impl.h"

/* Resample downsample2d / downsample3d: the padded stride-2 3x3 conv on
 * every frame; downsample3d then, except in the first chunk (whose frame
 * passes and is kept), the stride-2 time conv over the kept previous frame
 * and the chunk's frames, keeping the chunk's last frame. */
static void downsample(v22_run *r, const wan_vae22_down *d, v22_bufs *B) {
  const int64_t c = d->dim;
  v22_need(r, c * r->t * (r->h / 2) * (r->w / 2));
  if (!r->plan)
    kern_cpu_conv2d_s2_frames(B->x, d->conv_w, d->conv_b, B->a, c, c, r->t, r->h, r->w);
  r->h /= 2;
  r->w /= 2;
  v22_swap(&B->x, &B->a);
  if (!d->temporal) return;
  const int64_t hw = r->h * r->w;
  v22_cache *k = v22_next_cache(r, c, 1);
  if (r->plan) {
    r->t /= 2;
    return;
  }
  if (!k->started) { /* the first chunk: its frame passes through and is kept */
    v22_cache_push(k, B->x, r->t);
    k->started = 1;
    return;
  }
  /* T even: T / 2 frames out of [kept; chunk] */
  kern_cpu_time_conv_s2(B->x, k->frames, d->time_w, d->time_b, B->a, c, c, r->t, hw);
  v22_cache_push(k, B->x, r->t);
  r->t /= 2;
  v22_swap(&B->x, &B->a);
}

/* Down_ResidualBlock: the residual blocks, the downsample, plus AvgDown3D
 * of the level's input. */
static void down_level(v22_run *r, const wan_vae22_down *l, v22_bufs *B) {
  const int64_t t0 = r->t, h0 = r->h, w0 = r->w, in_n = l->in_dim * t0 * h0 * w0;
  v22_need(r, in_n);
  if (!r->plan) memcpy(B->k, B->x, (size_t)in_n * sizeof *B->k);
  for (int i = 0; i < l->n_res; i++) v22_resblock(r, &l->res[i], B);
  if (l->has_down) downsample(r, l, B);
  if (r->plan) return;
  if (r->t != (t0 + (l->ft - t0 % l->ft) % l->ft) / l->ft || r->h != h0 / l->fs)
    sp_fatal("vae: encoder level gave %lld frames of %lld rows from %lld of %lld",
             (long long)r->t, (long long)r->h, (long long)t0, (long long)h0);
  const kern_vae22_shortcut sc = {t0, h0, w0, l->in_dim, l->out_dim, l->ft, l->fs, 0};
  kern_cpu_vae22_avg_down_add(B->k, B->x, &sc);
}

/* Encoder3d on one chunk: B->x holds the patchified frames (12, t, h, w);
 * the head's output (2 z_dim, t', h', w') ends in B->x. */
static void encoder_chunk(v22_run *r, const wan_vae22_enc_weights *wt, v22_bufs *B) {
  v22_cached_conv(r, B->x, wt->conv1_w, wt->conv1_b, B->a, wt->in_ch, wt->dim0);
  v22_swap(&B->x, &B->a);
  for (int i = 0; i < wt->n_levels; i++) down_level(r, &wt->level[i], B);
  v22_resblock(r, &wt->mid0, B);
  v22_attnblock(r, &wt->mid_attn, B);
  v22_resblock(r, &wt->mid2, B);
  v22_norm_silu(r, B->x, wt->head_gamma, B->a, wt->head_dim);
  v22_cached_conv(r, B->a, wt->head_w, wt->head_b, B->b, wt->head_dim, wt->z2);
  v22_swap(&B->x, &B->b);
}

static void plan_encoder(v22_run *r, const wan_vae22_weights *w) {
  v22_bufs B = {0};
  r->t = WAN_VAE22_CHUNK;
  v22_need(r, w->enc.in_ch * r->t * r->h * r->w);
  encoder_chunk(r, &w->enc, &B);
}

int wan_vae22_encoder_create(const wan_vae22_config *c, int64_t H, int64_t W,
                             wan_vae22_state **out) {
  char err[200];
  if (wan_vae22_config_check(c, err, sizeof err) != 0) {
    sp_log_error("%s", err);
    return SP_ERR_INPUT;
  }
  const int64_t f = wan_vae22_space_factor(c);
  if (H < f || W < f || H % f || W % f || H / f > WAN_VAE22_MAX_SIDE ||
      W / f > WAN_VAE22_MAX_SIDE) {
    sp_log_error("vae encoder: video size %lldx%lld: height and width must be multiples of "
                 "%lld (patchify and every downsample halve exactly), at most %lld",
                 (long long)H, (long long)W, (long long)f, (long long)(f * WAN_VAE22_MAX_SIDE));
    return SP_ERR_INPUT;
  }
  return v22_state_create(c, 1, H / WAN_VAE22_PATCH, W / WAN_VAE22_PATCH, plan_encoder, out);
}

/* mu of one chunk's head output x (2 z_dim, t, hw): conv1's first z_dim
 * output channels (conv1 is pointwise, so chunk by chunk is the published
 * conv over the concatenation; frames of 1 x hw), normalised into latents
 * (z_dim, F, hw) from frame f0: (mu - mean) * (1 / std) with the float32
 * tables. */
static void chunk_latents(const wan_vae22_enc_weights *wt, const float *x, float *mu, int64_t t,
                          int64_t hw, float *latents, int64_t F, int64_t f0) {
  const int64_t z = wt->z_dim;
  kern_cpu_causal_conv3d(x, NULL, 0, wt->out_w, wt->out_b, mu, wt->z2, z, t, 1, hw, 1, 1, 1);
  for (int64_t ch = 0; ch < z; ch++) {
    const float mean = wan_vae22_latent_mean[ch], inv_std = 1.0f / wan_vae22_latent_std[ch];
    for (int64_t j = 0; j < t; j++) {
      const float *src = mu + (ch * t + j) * hw;
      float *dst = latents + (ch * F + f0 + j) * hw;
      for (int64_t p = 0; p < hw; p++) dst[p] = (src[p] - mean) * inv_std;
    }
  }
}

int wan_vae22_encode(wan_vae22_state *e, const wan_vae22_enc_weights *wt, const float *video,
                     int64_t T, float *latents) {
  const wan_vae22_config *c = &e->cfg;
  const int64_t H = e->h * WAN_VAE22_PATCH, W = e->w * WAN_VAE22_PATCH;
  if (!e->encoder || wt->z_dim != c->z_dim || wt->n_levels != c->n_mult)
    sp_fatal("vae: an encode with a decoder's state or weights of another config");
  if (T < 1 || (T - 1) % WAN_VAE22_CHUNK != 0) {
    sp_log_error("vae encoder: %lld frames: the encoder takes 1 + 4k frames (the published "
                 "chunks: the first frame, then groups of %d)", (long long)T, WAN_VAE22_CHUNK);
    return SP_ERR_INPUT;
  }
  const int64_t F = wan_vae22_latent_frames(c, T);
  v22_state_reset(e); /* WanVAE_.clear_cache */
  int64_t f0 = 0;     /* first latent frame of the chunk */
  for (int64_t i = 0; i < 1 + (T - 1) / WAN_VAE22_CHUNK; i++) {
    const int64_t v0 = i == 0 ? 0 : 1 + WAN_VAE22_CHUNK * (i - 1);
    const int64_t t = i == 0 ? 1 : WAN_VAE22_CHUNK;
    v22_bufs B = v22_state_bufs(e);
    v22_run r = {.s = e, .plan = 0, .first = i == 0, .idx = 0, .t = t, .h = e->h, .w = e->w};
    /* patchify each RGB channel's frames v0 .. v0 + t into its 4 channels */
    for (int64_t ch = 0; ch < 3; ch++)
      kern_cpu_vae22_patchify(video + (ch * T + v0) * H * W, B.x + ch * 4 * t * e->h * e->w, 1,
                              t, H, W);
    encoder_chunk(&r, wt, &B);
    if (r.idx != e->n_cache || f0 + r.t > F)
      sp_fatal("vae: chunk %lld gave %lld latent frames after %d of %d caches", (long long)i,
               (long long)r.t, r.idx, e->n_cache);
    chunk_latents(wt, B.x, B.a, r.t, r.h * r.w, latents, F, f0);
    f0 += r.t;
  }
  if (f0 != F) sp_fatal("vae: encoded %lld latent frames, expected %lld", (long long)f0,
                        (long long)F);
  return SP_OK;
}
