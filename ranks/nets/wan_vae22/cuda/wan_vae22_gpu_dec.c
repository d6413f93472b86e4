/* The Wan 2.2 VAE decoder on a CUDA device (wan_vae22_cuda.h): the CPU
 * decoder's computation (wan_vae22_cpu_dec.c) chunk by chunk with the same
 * caches, on channels-last activations in the coder's one allocation
 * (wan_vae22_gpu_impl.h). */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "log.h"
#include "wan_vae22_gpu_impl.h"

/* Resample upsample3d / upsample2d into s: upsample3d's time conv (skipped
 * in the first chunk, the published "Rep"), unfolded and 2x nearest with
 * its bias; else x 2x nearest; then the 3x3 conv keeping the width into y. */
static void upsample(g22_run *r, const wan_vae22_up *u) {
  wan_vae22_gpu *g = r->g;
  const int64_t c = u->dim, hw = r->h * r->w;
  int doubled = 0;
  if (u->temporal) {
    const int k = g22_next_cache(r, c, WAN_VAE22_CACHE_T);
    if (g->started[k]) {
      g22_cache_in(r, k, c, WAN_VAE22_CACHE_T);
      int i = g22_prof_begin(g);
      kern_cuda_vae_from_f32(g->k1, g->x, g22_s_frames(r, c, WAN_VAE22_CACHE_T), r->t * hw * c);
      g22_prof_end(g, i, WAN_VAE22_GPU_OP_ELEM);
      g22_conv(r, g->s, WAN_VAE22_CACHE_T + r->t, c, u->time_w, 2 * c, 3, 1, 1, g->y,
               WAN_VAE22_GPU_OP_CONV_TIME);
      g22_cache_out(r, k, c, WAN_VAE22_CACHE_T);
      g22_fits(g, PLAN_VAE22_S, (uint64_t)(2 * r->t * 4 * hw * c));
      i = g22_prof_begin(g);
      kern_cuda_vae_unfold_upsample(g->k1, g->y, u->time_b, g->s, r->t, r->h, r->w, c);
      g22_prof_end(g, i, WAN_VAE22_GPU_OP_ELEM);
      r->t *= 2;
      doubled = 1;
    }
    g->started[k] = 1;
  }
  if (!doubled) {
    g22_fits(g, PLAN_VAE22_S, (uint64_t)(r->t * 4 * hw * c));
    const int i = g22_prof_begin(g);
    kern_cuda_vae_upsample2x(g->k1, g->x, 1, g->s, r->t, r->h, r->w, c);
    g22_prof_end(g, i, WAN_VAE22_GPU_OP_ELEM);
  }
  r->h *= 2;
  r->w *= 2;
  g22_conv(r, g->s, r->t, c, u->conv_w, c, 1, 3, 3, g->y, WAN_VAE22_GPU_OP_CONV2D);
}

/* Up_ResidualBlock: the level's input kept in k, the residual blocks, the
 * upsample, and x = its conv + bias + DupUp3D(k). */
static void up_level(g22_run *r, const wan_vae22_up *l) {
  wan_vae22_gpu *g = r->g;
  const kern_vae22_shortcut sc = {r->t, r->h, r->w, l->in_dim, l->out_dim, l->ft, l->fs,
                                  r->first ? l->ft - 1 : 0};
  if (l->has_up) {
    const uint64_t n = (uint64_t)(r->t * r->h * r->w * l->in_dim);
    g22_fits(g, PLAN_VAE22_K, n);
    g22_copy(g, g->k, g->x, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice);
  }
  for (int i = 0; i < l->n_res; i++) g22_resblock(r, &l->res[i]);
  if (!l->has_up) return;
  upsample(r, l);
  if (r->t != sc.T * sc.ft - sc.drop || r->h != sc.H * sc.fs)
    sp_fatal("vae gpu: decoder level gave %lld frames of %lld rows from %lld of %lld",
             (long long)r->t, (long long)r->h, (long long)sc.T, (long long)sc.H);
  g22_fits(g, PLAN_VAE22_X, (uint64_t)(r->t * r->h * r->w * l->out_dim));
  const int i = g22_prof_begin(g);
  kern_cuda_vae22_up_out(g->k2, g->y, l->conv_b, g->k, g->x, &sc);
  g22_prof_end(g, i, WAN_VAE22_GPU_OP_SHORTCUT);
}

/* Decoder3d on latent frame f: un-normalised and conv2 behind conv1's
 * cache, the middle, the levels, the head; the chunk's clamped frames (3,
 * t, H, W) end in g->frames. */
static void decoder_chunk(g22_run *r, const float *latents, int64_t F, int64_t f) {
  wan_vae22_gpu *g = r->g;
  const wan_vae22_dec_weights *wt = &g->wt.dec;
  const int64_t z = wt->z_dim, hw = r->h * r->w;
  int i = g22_prof_begin(g);
  CUDA_CHECK(cudaMemcpy2DAsync(g->io, (size_t)hw * sizeof(float), latents + f * hw,
                               (size_t)(F * hw) * sizeof(float), (size_t)hw * sizeof(float),
                               (size_t)z, cudaMemcpyHostToDevice, g->stream));
  g22_prof_end(g, i, WAN_VAE22_GPU_OP_COPY);
  int k = g22_next_cache(r, z, WAN_VAE22_CACHE_T);
  g22_cache_in(r, k, z, WAN_VAE22_CACHE_T);
  float mean[WAN_VAE22_Z_DIM], inv_std[WAN_VAE22_Z_DIM];
  for (int ch = 0; ch < WAN_VAE22_Z_DIM; ch++) {
    mean[ch] = wan_vae22_latent_mean[ch];
    inv_std[ch] = 1.0f / wan_vae22_latent_std[ch]; /* as published: 1 / std stored, divided by */
  }
  i = g22_prof_begin(g);
  const kern_vae22_stats st = {mean, inv_std, z};
  kern_cuda_vae22_latent_in(g->k2, g->io, wt->conv2_w, wt->conv2_b, &st,
                            g22_s_frames(r, z, WAN_VAE22_CACHE_T), hw);
  g22_prof_end(g, i, WAN_VAE22_GPU_OP_ELEM);
  g22_cached_conv3(r, k, wt->conv1_w, z, wt->mid_dim);
  g22_add(r, g->y, wt->conv1_b, NULL, 0, NULL, g->x, 1, wt->mid_dim);
  g22_resblock(r, &wt->mid0);
  g22_attnblock(r, &wt->mid_attn);
  g22_resblock(r, &wt->mid2);
  for (int l = 0; l < wt->n_levels; l++) up_level(r, &wt->level[l]);
  k = g22_next_cache(r, wt->head_dim, WAN_VAE22_CACHE_T);
  g22_cache_in(r, k, wt->head_dim, WAN_VAE22_CACHE_T);
  g22_norm_x(r, wt->head_gamma, g22_s_frames(r, wt->head_dim, WAN_VAE22_CACHE_T), wt->head_dim,
             1);
  g22_conv(r, g->s, WAN_VAE22_CACHE_T + r->t, wt->head_dim, wt->head_w, PLAN_VAE22_IMG_CH, 3, 3,
           3, g->y, WAN_VAE22_GPU_OP_CONV3D);
  g22_cache_out(r, k, wt->head_dim, WAN_VAE22_CACHE_T);
  g22_fits(g, PLAN_VAE22_FRAMES, (uint64_t)(3 * r->t * 4 * r->h * r->w));
  i = g22_prof_begin(g);
  kern_cuda_vae22_frames_out(g->k2, g->y, wt->head_b, g->frames, r->t, r->h, r->w,
                             PLAN_VAE22_IMG_CH);
  g22_prof_end(g, i, WAN_VAE22_GPU_OP_ELEM);
}

int wan_vae22_gpu_decode(wan_vae22_gpu *g, const float *latents, int64_t F,
                         wan_vae_frames_fn fn, void *user) {
  const int64_t T_out = wan_vae22_out_frames(&g->cfg, F);
  const int64_t ohw = g->lay->out_h * g->lay->out_w;
  if (g->part != WAN_VAE22_DECODER || F < 1)
    sp_fatal("vae gpu: a decode of %lld latent frames with %s", (long long)F,
             g->part != WAN_VAE22_DECODER ? "an encoder" : "a decoder");
  g22_reset(g);
  int64_t frame0 = 0;
  for (int64_t f = 0; f < F; f++) {
    g22_run r = {.g = g, .idx = 0, .first = f == 0, .t = 1, .h = g->h, .w = g->w};
    decoder_chunk(&r, latents, F, f);
    if (4 * r.h * r.w != ohw || r.idx != g->lay->n_cache || frame0 + r.t > T_out ||
        r.t > g->lay->chunk_frames)
      sp_fatal("vae gpu: chunk %lld gave %lld frames of %lldx%lld after %d of %d caches",
               (long long)f, (long long)r.t, (long long)r.h, (long long)r.w, r.idx,
               g->lay->n_cache);
    g22_copy(g, g->host_frames, g->frames, (size_t)(3 * r.t * ohw) * sizeof(float),
             cudaMemcpyDeviceToHost);
    CUDA_CHECK(cudaStreamSynchronize(g->stream));
    g22_prof_flush(g);
    const int rc = fn(user, g->host_frames, frame0, r.t);
    if (rc != 0) return rc;
    frame0 += r.t;
  }
  if (frame0 != T_out)
    sp_fatal("vae gpu: decoded %lld frames, expected %lld", (long long)frame0, (long long)T_out);
  return 0;
}
