/* The Wan 2.2 VAE decoder on the CPU, fp32 (wan_vae22.h, VAE22.md
 * "Decoder"): WanVAE_.decode as published: un-normalise, conv2 (1x1x1),
 * then Decoder3d once per latent frame with first_chunk on the first, the
 * chunks' patchified frames unpatchified and clamped to [-1, 1]
 * (Wan2_2_VAE.decode's clamp). Chunk 0 yields one frame, every later chunk
 * time_factor frames. */
#include <stdlib.h>
#include <string.h>

#include "kern_cpu.h"
#include "kern_cpu_vae.h"
#include "kern_cpu_vae22.h"
#include "log.h"
#include "wan_vae22.h"
#include "wan_vae22_cpu_impl.h"

/* Resample upsample3d / upsample2d: upsample3d's time conv (skipped in the
 * first chunk, the published "Rep" mark), 2x nearest in h and w, the 3x3
 * conv keeping the width. */
static void upsample(v22_run *r, const wan_vae22_up *u, v22_bufs *B) {
  const int64_t c = u->dim, hw = r->h * r->w;
  const float *src = B->x;
  if (u->temporal) {
    v22_cache *k = v22_next_cache(r, c, WAN_VAE22_CACHE_T);
    if (r->plan || k->started) {
      v22_need(r, 2 * c * r->t * hw);
      if (!r->plan) {
        kern_cpu_causal_conv3d(B->x, k->frames, k->n, u->time_w, u->time_b, B->a, c, 2 * c,
                               r->t, r->h, r->w, 3, 1, 1);
        v22_cache_push(k, B->x, r->t);
        kern_cpu_time_unfold2(B->a, B->b, c, r->t, hw);
      }
      r->t *= 2;
      src = B->b;
    }
    if (!r->plan) k->started = 1;
  }
  v22_need(r, c * r->t * hw * 4);
  if (!r->plan) kern_cpu_upsample2x_nearest(src, B->c, c * r->t, r->h, r->w);
  r->h *= 2;
  r->w *= 2;
  if (!r->plan)
    kern_cpu_conv2d_frames(B->c, u->conv_w, u->conv_b, B->a, c, c, r->t, r->h, r->w, 3, 3);
  v22_swap(&B->x, &B->a);
}

/* Up_ResidualBlock: the residual blocks, the upsample, plus DupUp3D of the
 * level's input (its first ft - 1 frames dropped in the first chunk). */
static void up_level(v22_run *r, const wan_vae22_up *l, v22_bufs *B) {
  const int64_t t0 = r->t, h0 = r->h, w0 = r->w, in_n = l->in_dim * t0 * h0 * w0;
  if (l->has_up) {
    v22_need(r, in_n);
    if (!r->plan) memcpy(B->k, B->x, (size_t)in_n * sizeof *B->k);
  }
  for (int i = 0; i < l->n_res; i++) v22_resblock(r, &l->res[i], B);
  if (!l->has_up) return;
  upsample(r, l, B);
  const int drop = r->first ? l->ft - 1 : 0;
  if (!r->plan && (r->t != t0 * l->ft - drop || r->h != h0 * l->fs))
    sp_fatal("vae: decoder level gave %lld frames of %lld rows from %lld of %lld",
             (long long)r->t, (long long)r->h, (long long)t0, (long long)h0);
  const kern_vae22_shortcut sc = {t0, h0, w0, l->in_dim, l->out_dim, l->ft, l->fs, drop};
  if (!r->plan) kern_cpu_vae22_dup_up_add(B->k, B->x, &sc);
}

/* Decoder3d on one chunk: B->x holds conv2's output for latent frame (z,
 * 1, h, w); the chunk's patchified frames (12, r->t, h', w') end in B->x. */
static void decoder_chunk(v22_run *r, const wan_vae22_dec_weights *wt, v22_bufs *B) {
  v22_cached_conv(r, B->x, wt->conv1_w, wt->conv1_b, B->a, wt->z_dim, wt->mid_dim);
  v22_swap(&B->x, &B->a);
  v22_resblock(r, &wt->mid0, B);
  v22_attnblock(r, &wt->mid_attn, B);
  v22_resblock(r, &wt->mid2, B);
  for (int i = 0; i < wt->n_levels; i++) up_level(r, &wt->level[i], B);
  v22_norm_silu(r, B->x, wt->head_gamma, B->a, wt->head_dim);
  v22_cached_conv(r, B->a, wt->head_w, wt->head_b, B->b, wt->head_dim, wt->out_ch);
  v22_swap(&B->x, &B->b);
}

static void plan_decoder(v22_run *r, const wan_vae22_weights *w) {
  v22_bufs B = {0};
  v22_need(r, w->dec.z_dim * r->h * r->w);
  decoder_chunk(r, &w->dec, &B);
}

int wan_vae22_decoder_create(const wan_vae22_config *c, int64_t h, int64_t w,
                             wan_vae22_state **out) {
  char err[200];
  if (wan_vae22_config_check(c, err, sizeof err) != 0) {
    sp_log_error("%s", err);
    return SP_ERR_INPUT;
  }
  if (h < 1 || w < 1 || h > WAN_VAE22_MAX_SIDE || w > WAN_VAE22_MAX_SIDE) {
    sp_log_error("vae latent size %lldx%lld is outside 1..%d per side", (long long)h,
                 (long long)w, WAN_VAE22_MAX_SIDE);
    return SP_ERR_INPUT;
  }
  return v22_state_create(c, 0, h, w, plan_decoder, out);
}

int wan_vae22_decode_stream(wan_vae22_state *d, const wan_vae22_dec_weights *wt,
                            const float *latents, int64_t F, wan_vae_frames_fn fn, void *user) {
  const wan_vae22_config *c = &d->cfg;
  const int64_t z = c->z_dim, hw = d->h * d->w, s = wan_vae22_space_factor(c);
  const int64_t T_out = wan_vae22_out_frames(c, F), ohw = hw * s * s;
  if (d->encoder || wt->z_dim != z || wt->n_levels != c->n_mult)
    sp_fatal("vae: a decode with an encoder's state or weights of another config");
  v22_state_reset(d); /* WanVAE_.clear_cache */
  int64_t frame0 = 0; /* first video frame of the chunk */
  for (int64_t f = 0; f < F; f++) {
    v22_bufs B = v22_state_bufs(d);
    v22_run r = {.s = d, .plan = 0, .first = f == 0, .idx = 0, .t = 1, .h = d->h, .w = d->w};
    /* z / (1 / std) + mean, with the published float32 tables. */
    for (int64_t ch = 0; ch < z; ch++) {
      const float inv_std = 1.0f / wan_vae22_latent_std[ch], mean = wan_vae22_latent_mean[ch];
      const float *src = latents + (ch * F + f) * hw;
      float *dst = B.a + ch * hw;
      for (int64_t p = 0; p < hw; p++) dst[p] = src[p] / inv_std + mean;
    }
    kern_cpu_causal_conv3d(B.a, NULL, 0, wt->conv2_w, wt->conv2_b, B.x, z, z, 1, d->h, d->w, 1,
                           1, 1);
    decoder_chunk(&r, wt, &B);
    if (r.idx != d->n_cache || 4 * r.h * r.w != ohw || frame0 + r.t > T_out)
      sp_fatal("vae: chunk %lld gave %lld frames of %lldx%lld after %d of %d caches",
               (long long)f, (long long)r.t, (long long)r.h, (long long)r.w, r.idx, d->n_cache);
    kern_cpu_vae22_unpatchify(B.x, B.a, 3, r.t, r.h, r.w);
    kern_cpu_clamp(B.a, 3 * r.t * ohw, -1.0f, 1.0f);
    const int rc = fn(user, B.a, frame0, r.t);
    if (rc != 0) return rc;
    frame0 += r.t;
  }
  if (frame0 != T_out)
    sp_fatal("vae: decoded %lld frames, expected %lld", (long long)frame0, (long long)T_out);
  return 0;
}


void wan_vae22_decode(wan_vae22_state *d, const wan_vae22_dec_weights *wt, const float *latents,
                      int64_t F, float *video) {
  const int64_t s = wan_vae22_space_factor(&d->cfg);
  wan_vae_video v = {video, wan_vae22_out_frames(&d->cfg, F), d->h * d->w * s * s};
  (void)wan_vae22_decode_stream(d, wt, latents, F, wan_vae_video_put, &v);
}
