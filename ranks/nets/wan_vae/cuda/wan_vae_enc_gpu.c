/* The Wan 2.1 VAE encoder on a CUDA device (wan_vae_cuda.h, VAE.md "The
 * encoder"): the CPU encoder's computation (wan_vae_enc_cpu.c), frame 0
 * alone then chunks of 4 frames with the same caches, on channels-last
 * activations in one device allocation laid out by planner/vae_layout.h
 * (plan_vae_enc_layout_make, through wan_vae_gpu_enc_layout), over the
 * pieces it shares with the decoder (wan_vae_gpu_core.h).
 *
 * A chunk's frames go up as the host holds them (3, t, H, W) fp32 and are
 * written as 8 channels (RGB and zeros) behind conv1's cache. A
 * downsample pads the residual stream by one zero row and column into s
 * and runs the 3x3 conv with stride 2 and no padding; downsample3d then
 * writes its cached frame and the spatial output (with its bias) into s
 * and runs the (3, 1, 1) time conv with stride 2 over them, the last
 * spatial frame going back into its one-frame cache (the first chunk's
 * frame passes, and is kept). The head's raw output goes through the bias,
 * conv1 and the normalisation in one kernel into the chunk's latents. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "kern_cuda_vae.h"
#include "kern_cuda_vae_enc.h"
#include "kern_dtype.h"
#include "log.h"
#include "wan_vae_cuda.h"
#include "wan_vae_enc.h"
#include "wan_vae_gpu_core.h"
#include "wan_vae_gpu_layout.h"

struct wan_vae_enc_gpu {
  vae_gpu_core c;
  wan_vae_config cfg;
  int64_t H, W, h, w;
  wan_vae_enc_weights wt; /* device addresses */
  float *frames, *latent;
  int started[PLAN_VAE_MAX_CACHES]; /* downsample3d has run its first chunk */
  float *host_latent;               /* pinned, one chunk's (z_dim, t, h, w) */
};

void wan_vae_enc_gpu_profile(wan_vae_enc_gpu *g, int on) { vae_gpu_profile(&g->c, on); }

void wan_vae_enc_gpu_profile_ms(const wan_vae_enc_gpu *g, double ms[WAN_VAE_GPU_OPS]) {
  for (int i = 0; i < WAN_VAE_GPU_OPS; i++) ms[i] = g->c.prof ? g->c.ms[i] : 0.0;
}

/* ---------------------------------------------------------------- create */

int wan_vae_enc_gpu_create(const wan_vae_config *c, const float *packed, int64_t T, int64_t H,
                           int64_t W, wan_vae_gpu_precision p, wan_vae_enc_gpu **out) {
  *out = NULL;
  wan_vae_enc_gpu *g = calloc(1, sizeof *g);
  wan_vae_table *t = malloc(sizeof *t);
  plan_vae_layout *lay = malloc(sizeof *lay);
  int rc = SP_ERR_RUNTIME;
  if (!g || !t || !lay) {
    sp_log_error("vae gpu: out of host memory");
    free(lay);
    goto fail;
  }
  if ((rc = wan_vae_gpu_enc_layout(c, T, H, W, p, lay)) != SP_OK) {
    free(lay);
    goto fail;
  }
  g->cfg = *c;
  g->H = H;
  g->W = W;
  g->h = lay->out_h;
  g->w = lay->out_w;
  char what[80];
  snprintf(what, sizeof what, "encoder at %lldx%lld", (long long)H, (long long)W);
  if ((rc = vae_gpu_core_open(&g->c, lay, p, what)) != SP_OK) goto fail;
  wan_vae_enc_table_make(c, &g->wt, t);
  if ((rc = vae_gpu_upload(&g->c, t, packed)) != SP_OK) goto fail;
  g->frames = vae_gpu_buf(&g->c, PLAN_VAE_FRAMES, 0);
  g->latent = vae_gpu_buf(&g->c, PLAN_VAE_LATENT, 0);
  const plan_vae_buffer *lb = plan_vae_layout_find(lay, PLAN_VAE_LATENT, 0);
  if ((rc = vae_gpu_pinned(lb->bytes, "latents", (void **)&g->host_latent)) != SP_OK) goto fail;
  free(t);
  sp_log_info("vae gpu: %s encoder for %lldx%lld (chunks of %lld frames): %.2f GiB of device "
              "memory (weights %.1f MiB)",
              wan_vae_gpu_precision_name(p), (long long)H, (long long)W,
              (long long)(T == 1 ? 1 : WAN_VAE_ENC_CHUNK), (double)lay->total / (1 << 30),
              (double)plan_vae_layout_find(lay, PLAN_VAE_WEIGHTS, 0)->bytes / (1 << 20));
  *out = g;
  return SP_OK;

fail:
  free(t);
  wan_vae_enc_gpu_free(g);
  return rc;
}

void wan_vae_enc_gpu_free(wan_vae_enc_gpu *g) {
  if (!g) return;
  if (g->host_latent) CUDA_CHECK(cudaFreeHost(g->host_latent));
  vae_gpu_core_close(&g->c);
  free(g);
}

int64_t wan_vae_enc_gpu_peak_bytes(const wan_vae_enc_gpu *g) {
  return (int64_t)g->c.lay->total;
}

/* ---------------------------------------------------------------- encode */

/* A stride-2 convolution without padding at r's current frames. */
/* Flat list: a convolution's operands and shape, as kern_cuda_vae_conv_valid's desc holds them. */
static void conv_s2(vae_grun *r, const void *x, int64_t T, int64_t H, int64_t W, int64_t c,
                    const float *w, int k3, wan_vae_gpu_op op) {
  /* k3 1: the spatial 3x3 (stride 2 in space); 0: the (3, 1, 1) time conv
   * (stride 2 in time) */
  const kern_cuda_vae_conv_desc d = {.T = T, .H = H, .W = W, .ci = c, .co = c,
                                     .kt = k3 ? 1 : 3, .kh = k3 ? 3 : 1, .kw = k3 ? 3 : 1,
                                     .st = k3 ? 1 : 2, .ss = k3 ? 2 : 1};
  const int i = vae_gpu_prof_begin(r->g);
  kern_cuda_vae_conv_valid(r->g->k, &d, x, w, r->g->y);
  vae_gpu_prof_end(r->g, i, op);
}

/* out (N = n positions x c) = y + b in dt: the bias of a conv's raw
 * output, for the next conv's input. */
static void biased(vae_grun *r, const void *y, const float *b, void *out, int64_t n, int64_t c) {
  const int i = vae_gpu_prof_begin(r->g);
  kern_cuda_vae_add(r->g->k, y, b, NULL, 0, NULL, out, 0, n, c);
  vae_gpu_prof_end(r->g, i, WAN_VAE_GPU_OP_ELEM);
}

/* downsample3d after its spatial step (y holds it raw, t frames of h x w):
 * the time conv over (cached frame, y + b) into x, or in the first chunk
 * y + b into x with its last frame kept. */
static void time_down(vae_grun *r, wan_vae_enc_gpu *e, const wan_vae_down *d) {
  vae_gpu_core *g = r->g;
  const int64_t c = d->dim, hw = r->h * r->w;
  const int k = vae_gpu_next_cache(r, c);
  if (!e->started[k]) {
    vae_gpu_add(r, g->y, d->conv_b, NULL, 0, NULL, g->x, 1, c);
    biased(r, vae_gpu_at(r, g->y, (r->t - 1) * hw * c), d->conv_b, g->cache[k], hw, c);
    e->started[k] = 1;
    return;
  }
  vae_gpu_cache_in(r, k, c);
  biased(r, g->y, d->conv_b, vae_gpu_at(r, g->s, hw * c), r->t * hw, c);
  conv_s2(r, g->s, 1 + r->t, r->h, r->w, c, d->time_w, 0, WAN_VAE_GPU_OP_CONV_TIME);
  const int i = vae_gpu_prof_begin(g);
  CUDA_CHECK(cudaMemcpyAsync(g->cache[k], vae_gpu_at(r, g->s, r->t * hw * c),
                             (size_t)(hw * c * g->E), cudaMemcpyDeviceToDevice, g->stream));
  vae_gpu_prof_end(g, i, WAN_VAE_GPU_OP_COPY);
  r->t = (1 + r->t - 3) / 2 + 1;
  vae_gpu_add(r, g->y, d->time_b, NULL, 0, NULL, g->x, 1, c);
}

/* Resample downsample2d / downsample3d on x. */
static void downsample(vae_grun *r, wan_vae_enc_gpu *e, const wan_vae_down *d) {
  vae_gpu_core *g = r->g;
  const int64_t c = d->dim;
  const int i = vae_gpu_prof_begin(g);
  kern_cuda_vae_pad_from_f32(g->k, g->x, g->s, r->t, r->h, r->w, c);
  vae_gpu_prof_end(g, i, WAN_VAE_GPU_OP_ELEM);
  conv_s2(r, g->s, r->t, r->h + 1, r->w + 1, c, d->conv_w, 1, WAN_VAE_GPU_OP_CONV2D);
  r->h /= 2;
  r->w /= 2;
  if (d->temporal)
    time_down(r, e, d);
  else
    vae_gpu_add(r, g->y, d->conv_b, NULL, 0, NULL, g->x, 1, c);
}

/* The head: norm + SiLU behind its cache, the conv to 2 z_dim, then the
 * bias, conv1 and the normalisation into the chunk's latents. */
static void head(vae_grun *r, wan_vae_enc_gpu *e) {
  vae_gpu_core *g = r->g;
  const wan_vae_enc_weights *wt = &e->wt;
  const int k = vae_gpu_next_cache(r, wt->head_dim);
  vae_gpu_cache_in(r, k, wt->head_dim);
  vae_gpu_norm_x(r, wt->head_gamma, vae_gpu_s_frames(r, wt->head_dim), wt->head_dim, 1);
  vae_gpu_cached_conv3(r, k, wt->head_w, wt->head_dim, 2 * wt->z_dim);
  float mean[WAN_VAE_Z_DIM], inv_std[WAN_VAE_Z_DIM];
  for (int ch = 0; ch < WAN_VAE_Z_DIM; ch++) {
    mean[ch] = wan_vae_latent_mean[ch];
    inv_std[ch] = 1.0f / wan_vae_latent_std[ch]; /* Wan2_1_VAE's float32 1 / std */
  }
  const kern_cuda_vae_latent_out_args a = {.x = g->y,
                                           .hb = wt->head_b,
                                           .qw = wt->quant_w,
                                           .qb = wt->quant_b,
                                           .mean = mean,
                                           .inv_std = inv_std,
                                           .out = e->latent,
                                           .n = r->t * r->h * r->w,
                                           .nz = wt->z_dim};
  const int i = vae_gpu_prof_begin(g);
  kern_cuda_vae_latent_out(g->k, &a);
  vae_gpu_prof_end(g, i, WAN_VAE_GPU_OP_ELEM);
}

/* Encoder3d and conv1 on the chunk of r->t frames from frame first of
 * video (3, T, H, W); its latents end in e->latent. */
static void encoder_chunk(vae_grun *r, wan_vae_enc_gpu *e, const float *video, int64_t T,
                          int64_t first) {
  vae_gpu_core *g = r->g;
  const wan_vae_enc_weights *wt = &e->wt;
  const int64_t HW = e->H * e->W;
  int i = vae_gpu_prof_begin(g);
  CUDA_CHECK(cudaMemcpy2DAsync(e->frames, (size_t)(r->t * HW) * sizeof(float), video + first * HW,
                               (size_t)(T * HW) * sizeof(float), (size_t)(r->t * HW) * sizeof(float),
                               WAN_VAE_ENC_IN_CH, cudaMemcpyHostToDevice, g->stream));
  vae_gpu_prof_end(g, i, WAN_VAE_GPU_OP_COPY);
  const int k = vae_gpu_next_cache(r, PLAN_VAE_ENC_IN_CH);
  vae_gpu_cache_in(r, k, PLAN_VAE_ENC_IN_CH);
  i = vae_gpu_prof_begin(g);
  kern_cuda_vae_video_in(g->k, e->frames, vae_gpu_s_frames(r, PLAN_VAE_ENC_IN_CH), r->t, HW);
  vae_gpu_prof_end(g, i, WAN_VAE_GPU_OP_ELEM);
  vae_gpu_cached_conv3(r, k, wt->conv1_w, PLAN_VAE_ENC_IN_CH, wt->in_dim);
  vae_gpu_add(r, g->y, wt->conv1_b, NULL, 0, NULL, g->x, 1, wt->in_dim);
  for (int l = 0; l < wt->n_levels; l++) {
    const wan_vae_enc_level *lv = &wt->level[l];
    for (int b = 0; b < lv->n_res; b++) vae_gpu_resblock(r, &lv->res[b]);
    if (lv->has_down) downsample(r, e, &lv->down);
  }
  vae_gpu_resblock(r, &wt->mid0);
  vae_gpu_attnblock(r, &wt->mid_attn);
  vae_gpu_resblock(r, &wt->mid2);
  head(r, e);
}

int wan_vae_enc_gpu_encode(wan_vae_enc_gpu *e, const float *video, int64_t T,
                           wan_vae_latents_fn fn, void *user) {
  vae_gpu_core *g = &e->c;
  const int64_t z = e->cfg.z_dim, F = wan_vae_enc_latent_frames(&e->cfg, T);
  char err[200];
  if (wan_vae_enc_size_check(&e->cfg, T, e->H, e->W, err, sizeof err) != 0)
    sp_fatal("vae gpu encoder: %s", err);
  /* WanVAE_.clear_cache: every encode starts with empty caches (zeros, the
   * causal padding). */
  vae_gpu_clear_caches(g);
  memset(e->started, 0, sizeof e->started);
  int64_t f0 = 0;
  for (int64_t first = 0; first < T;) {
    const int64_t t = first == 0 ? 1 : WAN_VAE_ENC_CHUNK;
    const plan_vae_buffer *fb = plan_vae_layout_find(g->lay, PLAN_VAE_FRAMES, 0);
    if ((uint64_t)(3 * t * e->H * e->W) * sizeof(float) > fb->bytes)
      sp_fatal("vae gpu encoder: made for single images, given %lld frames", (long long)T);
    vae_grun r = {.g = g, .idx = 0, .t = t, .h = e->H, .w = e->W};
    encoder_chunk(&r, e, video, T, first);
    if (r.h != e->h || r.w != e->w || r.idx != g->lay->n_cache || f0 + r.t > F)
      sp_fatal("vae gpu encoder: frames %lld.. gave %lld latent frames of %lldx%lld after %d "
               "of %d caches", (long long)first, (long long)r.t, (long long)r.h, (long long)r.w,
               r.idx, g->lay->n_cache);
    const int i = vae_gpu_prof_begin(g);
    CUDA_CHECK(cudaMemcpyAsync(e->host_latent, e->latent,
                               (size_t)(z * r.t * r.h * r.w) * sizeof(float),
                               cudaMemcpyDeviceToHost, g->stream));
    vae_gpu_prof_end(g, i, WAN_VAE_GPU_OP_COPY);
    CUDA_CHECK(cudaStreamSynchronize(g->stream));
    vae_gpu_prof_flush(g);
    const int rc = fn(user, e->host_latent, f0, r.t);
    if (rc != 0) return rc;
    f0 += r.t;
    first += t;
  }
  if (f0 != F)
    sp_fatal("vae gpu encoder: %lld latent frames, expected %lld", (long long)f0, (long long)F);
  return 0;
}

/* ---------------------------------------------------------------- backend */

int wan_vae_gpu_enc_backend_create(const wan_vae_enc_make *a, void **out) {
  wan_vae_enc_gpu *g = NULL;
  const int rc = wan_vae_enc_gpu_create(a->config, a->packed, a->T, a->H, a->W, a->precision, &g);
  *out = g;
  return rc;
}

void wan_vae_gpu_enc_backend_destroy(void *e) { wan_vae_enc_gpu_free(e); }

int wan_vae_gpu_enc_backend_encode(void *e, const float *video, int64_t T, wan_vae_latents_fn fn,
                                   void *user) {
  return wan_vae_enc_gpu_encode(e, video, T, fn, user);
}

int64_t wan_vae_gpu_enc_backend_bytes(const void *e) { return wan_vae_enc_gpu_peak_bytes(e); }
