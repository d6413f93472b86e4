/* The Wan 2.2 VAE encoder on a CUDA device (wan_vae22_cuda.h): the CPU
 * encoder's computation (wan_vae22_cpu_enc.c) chunk by chunk with the same
 * caches, on channels-last activations in the coder's one allocation
 * (wan_vae22_gpu_impl.h). */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "log.h"
#include "wan_vae22_gpu_impl.h"

/* Resample downsample2d / downsample3d: x zero-padded on the right and
 * bottom into s, the stride-2 3x3 conv into y; downsample3d then, except in
 * the first chunk (whose frame passes and is kept, biased, in the cache),
 * the chunk's biased frames behind the kept frame in s and the stride-2
 * time conv into y. The bias of the conv left in y comes back in *bias. */
static void downsample(g22_run *r, const wan_vae22_down *d, const float **bias) {
  wan_vae22_gpu *g = r->g;
  const int64_t c = d->dim;
  static const int k2d[3] = {1, 3, 3}, s2d[3] = {1, 2, 2}, kt[3] = {3, 1, 1}, st[3] = {2, 1, 1};
  g22_fits(g, PLAN_VAE22_S, (uint64_t)(r->t * (r->h + 1) * (r->w + 1) * c));
  int i = g22_prof_begin(g);
  kern_cuda_vae22_pad_from_f32(g->k2, g->x, g->s, r->t, r->h, r->w, c);
  g22_prof_end(g, i, WAN_VAE22_GPU_OP_ELEM);
  g22_fits(g, PLAN_VAE22_Y, (uint64_t)(r->t * (r->h / 2) * (r->w / 2) * c));
  i = g22_prof_begin(g);
  kern_cuda_vae22_conv_strided(g->k2, g->s, r->t, r->h + 1, r->w + 1, c, d->conv_w, c, k2d, s2d,
                               g->y);
  g22_prof_end(g, i, WAN_VAE22_GPU_OP_CONV2D);
  r->h /= 2;
  r->w /= 2;
  *bias = d->conv_b;
  if (!d->temporal) return;
  const int k = g22_next_cache(r, c, 1);
  if (!g->started[k]) { /* the first chunk: its frame passes through and is kept */
    g22_add(r, g->y, d->conv_b, NULL, 0, NULL, g->cache[k], 0, c);
    g->started[k] = 1;
    return;
  }
  g22_cache_in(r, k, c, 1);
  g22_add(r, g->y, d->conv_b, NULL, 0, NULL, g22_s_frames(r, c, 1), 0, c);
  g22_cache_out(r, k, c, 1);
  g22_fits(g, PLAN_VAE22_Y, (uint64_t)(r->t / 2 * r->h * r->w * c));
  i = g22_prof_begin(g);
  kern_cuda_vae22_conv_strided(g->k2, g->s, 1 + r->t, r->h, r->w, c, d->time_w, c, kt, st, g->y);
  g22_prof_end(g, i, WAN_VAE22_GPU_OP_CONV_TIME);
  r->t /= 2;
  *bias = d->time_b;
}

/* Down_ResidualBlock: the level's input kept in k, the residual blocks, the
 * downsample, and x = its conv + bias + AvgDown3D(k) (x += AvgDown3D(k) at
 * the last level, which does not downsample). */
static void down_level(g22_run *r, const wan_vae22_down *l) {
  wan_vae22_gpu *g = r->g;
  const kern_vae22_shortcut sc = {r->t, r->h, r->w, l->in_dim, l->out_dim, l->ft, l->fs, 0};
  const uint64_t n = (uint64_t)(r->t * r->h * r->w * l->in_dim);
  g22_fits(g, PLAN_VAE22_K, n);
  g22_copy(g, g->k, g->x, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice);
  for (int i = 0; i < l->n_res; i++) g22_resblock(r, &l->res[i]);
  const float *bias = NULL;
  if (l->has_down) downsample(r, l, &bias);
  if (r->t != (sc.T + sc.ft - 1) / sc.ft || r->h != sc.H / sc.fs)
    sp_fatal("vae gpu: encoder level gave %lld frames of %lld rows from %lld of %lld",
             (long long)r->t, (long long)r->h, (long long)sc.T, (long long)sc.H);
  g22_fits(g, PLAN_VAE22_X, (uint64_t)(r->t * r->h * r->w * l->out_dim));
  const int i = g22_prof_begin(g);
  kern_cuda_vae22_down_out(g->k2, l->has_down ? g->y : NULL, bias, g->k, g->x, &sc);
  g22_prof_end(g, i, WAN_VAE22_GPU_OP_SHORTCUT);
}

/* Encoder3d on video frames v0 .. v0 + t of video (3, T, H, W): uploaded,
 * patchified behind conv1's cache, the levels, the middle, the head; the
 * chunk's normalised latents (z_dim, t', h, w) end in g->io. */
static void encoder_chunk(g22_run *r, const float *video, int64_t T, int64_t v0) {
  wan_vae22_gpu *g = r->g;
  const wan_vae22_enc_weights *wt = &g->wt.enc;
  const int64_t H = r->h * WAN_VAE22_PATCH, W = r->w * WAN_VAE22_PATCH, plane = r->t * H * W;
  g22_fits(g, PLAN_VAE22_FRAMES, (uint64_t)(3 * plane));
  for (int64_t c = 0; c < 3; c++)
    g22_copy(g, g->frames + c * plane, video + (c * T + v0) * H * W,
             (size_t)plane * sizeof(float), cudaMemcpyHostToDevice);
  int k = g22_next_cache(r, PLAN_VAE22_IMG_CH, WAN_VAE22_CACHE_T);
  g22_cache_in(r, k, PLAN_VAE22_IMG_CH, WAN_VAE22_CACHE_T);
  int i = g22_prof_begin(g);
  kern_cuda_vae22_patchify_in(g->k2, g->frames,
                              g22_s_frames(r, PLAN_VAE22_IMG_CH, WAN_VAE22_CACHE_T), r->t, H, W,
                              PLAN_VAE22_IMG_CH);
  g22_prof_end(g, i, WAN_VAE22_GPU_OP_ELEM);
  g22_cached_conv3(r, k, wt->conv1_w, PLAN_VAE22_IMG_CH, wt->dim0);
  g22_add(r, g->y, wt->conv1_b, NULL, 0, NULL, g->x, 1, wt->dim0);
  for (int l = 0; l < wt->n_levels; l++) down_level(r, &wt->level[l]);
  g22_resblock(r, &wt->mid0);
  g22_attnblock(r, &wt->mid_attn);
  g22_resblock(r, &wt->mid2);
  k = g22_next_cache(r, wt->head_dim, WAN_VAE22_CACHE_T);
  g22_cache_in(r, k, wt->head_dim, WAN_VAE22_CACHE_T);
  g22_norm_x(r, wt->head_gamma, g22_s_frames(r, wt->head_dim, WAN_VAE22_CACHE_T), wt->head_dim,
             1);
  g22_cached_conv3(r, k, wt->head_w, wt->head_dim, wt->z2);
  float mean[WAN_VAE22_Z_DIM], inv_std[WAN_VAE22_Z_DIM];
  for (int ch = 0; ch < WAN_VAE22_Z_DIM; ch++) {
    mean[ch] = wan_vae22_latent_mean[ch];
    inv_std[ch] = 1.0f / wan_vae22_latent_std[ch];
  }
  g22_fits(g, PLAN_VAE22_IO, (uint64_t)(wt->z_dim * r->t * r->h * r->w));
  i = g22_prof_begin(g);
  const kern_vae22_head head = {wt->head_b, wt->out_w, wt->out_b, wt->z2};
  const kern_vae22_stats st = {mean, inv_std, wt->z_dim};
  kern_cuda_vae22_latent_out(g->k2, g->y, &head, &st, g->io, r->t, r->h * r->w);
  g22_prof_end(g, i, WAN_VAE22_GPU_OP_ELEM);
}

int wan_vae22_gpu_encode(wan_vae22_gpu *g, const float *video, int64_t T, float *latents) {
  if (g->part != WAN_VAE22_ENCODER) sp_fatal("vae gpu: an encode with a decoder");
  if (T < 1 || (T - 1) % WAN_VAE22_CHUNK != 0) {
    sp_log_error("vae encoder: %lld frames: the encoder takes 1 + 4k frames", (long long)T);
    return SP_ERR_INPUT;
  }
  const int64_t F = wan_vae22_latent_frames(&g->cfg, T), z = g->wt.enc.z_dim;
  g22_reset(g);
  int64_t f0 = 0;
  for (int64_t c = 0; c < 1 + (T - 1) / WAN_VAE22_CHUNK; c++) {
    const int64_t v0 = c == 0 ? 0 : 1 + WAN_VAE22_CHUNK * (c - 1);
    g22_run r = {.g = g, .idx = 0, .first = c == 0, .t = c == 0 ? 1 : WAN_VAE22_CHUNK,
                 .h = g->h, .w = g->w};
    encoder_chunk(&r, video, T, v0);
    const int64_t hw = r.h * r.w;
    if (r.idx != g->lay->n_cache || f0 + r.t > F || hw != g->lay->out_h * g->lay->out_w)
      sp_fatal("vae gpu: chunk %lld gave %lld latent frames of %lldx%lld after %d of %d caches",
               (long long)c, (long long)r.t, (long long)r.h, (long long)r.w, r.idx,
               g->lay->n_cache);
    const int i = g22_prof_begin(g);
    CUDA_CHECK(cudaMemcpy2DAsync(latents + f0 * hw, (size_t)(F * hw) * sizeof(float), g->io,
                                 (size_t)(r.t * hw) * sizeof(float),
                                 (size_t)(r.t * hw) * sizeof(float), (size_t)z,
                                 cudaMemcpyDeviceToHost, g->stream));
    g22_prof_end(g, i, WAN_VAE22_GPU_OP_COPY);
    CUDA_CHECK(cudaStreamSynchronize(g->stream));
    g22_prof_flush(g);
    f0 += r.t;
  }
  if (f0 != F) sp_fatal("vae gpu: encoded %lld latent frames, expected %lld", (long long)f0,
                        (long long)F);
  return SP_OK;
}
