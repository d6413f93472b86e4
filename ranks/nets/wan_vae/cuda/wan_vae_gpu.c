/* The Wan 2.1 VAE decoder on a CUDA device (wan_vae_gpu.h, VAE.md): the
 * CPU decoder's computation (wan_vae_cpu.c), chunk by chunk with the same
 * causal caches, on channels-last activations in one device allocation
 * laid out by planner/vae_layout.h (through wan_vae_gpu_layout), over the
 * pieces it shares with the encoder (wan_vae_gpu_core.h: the caches, the
 * residual and attention blocks).
 *
 * The weights are bound through the VAE table to device addresses: the
 * wan_vae_weights fields point into the device allocation, conv weights in
 * the precision's type (bf16 bit patterns in bf16), everything else fp32.
 * The VAE's CUDA backend (wan_vae_backend.h) is this decoder and the
 * encoder of wan_vae_enc_gpu.c. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "kern_cuda_vae.h"
#include "kern_dtype.h"
#include "log.h"
#include "wan_vae_backend.h"
#include "wan_vae_cuda.h"
#include "wan_vae_gpu_core.h"
#include "wan_vae_gpu_layout.h"

struct wan_vae_gpu {
  vae_gpu_core c;
  wan_vae_config cfg;
  int64_t h, w;
  wan_vae_weights wt; /* device addresses */
  float *latent, *frames;
  int started[PLAN_VAE_MAX_CACHES]; /* upsample3d time conv has run its first chunk */
  float *host_frames; /* pinned, one chunk's (3, t, H, W) */
};

void wan_vae_gpu_profile(wan_vae_gpu *g, int on) { vae_gpu_profile(&g->c, on); }

void wan_vae_gpu_profile_ms(const wan_vae_gpu *g, double ms[WAN_VAE_GPU_OPS]) {
  for (int i = 0; i < WAN_VAE_GPU_OPS; i++) ms[i] = g->c.prof ? g->c.ms[i] : 0.0;
}

const kern_cuda_vae *wan_vae_gpu_kernels(const wan_vae_gpu *g) { return g->c.k; }

/* ---------------------------------------------------------------- create */

int wan_vae_gpu_create(const wan_vae_config *c, const float *packed, int64_t h, int64_t w,
                       wan_vae_gpu_precision p, wan_vae_gpu **out) {
  *out = NULL;
  wan_vae_gpu *g = calloc(1, sizeof *g);
  wan_vae_table *t = malloc(sizeof *t);
  plan_vae_layout *lay = malloc(sizeof *lay);
  int rc = SP_ERR_RUNTIME;
  if (!g || !t || !lay) {
    sp_log_error("vae gpu: out of host memory");
    free(lay);
    goto fail;
  }
  if ((rc = wan_vae_gpu_layout(c, h, w, p, lay)) != SP_OK) {
    free(lay);
    goto fail;
  }
  g->cfg = *c;
  g->h = h;
  g->w = w;
  char what[64];
  snprintf(what, sizeof what, "decoder at latents %lldx%lld", (long long)h, (long long)w);
  if ((rc = vae_gpu_core_open(&g->c, lay, p, what)) != SP_OK) goto fail;
  /* Weights: converted on the host into one staging buffer, one copy up. */
  wan_vae_table_make(c, &g->wt, t);
  if ((rc = vae_gpu_upload(&g->c, t, packed)) != SP_OK) goto fail;
  g->latent = vae_gpu_buf(&g->c, PLAN_VAE_LATENT, 0);
  g->frames = vae_gpu_buf(&g->c, PLAN_VAE_FRAMES, 0);
  const plan_vae_buffer *fb = plan_vae_layout_find(lay, PLAN_VAE_FRAMES, 0);
  if ((rc = vae_gpu_pinned(fb->bytes, "frames", (void **)&g->host_frames)) != SP_OK) goto fail;
  free(t);
  sp_log_info("vae gpu: %s decoder for latents %lldx%lld: %.2f GiB of device memory "
              "(weights %.1f MiB)",
              wan_vae_gpu_precision_name(p), (long long)h, (long long)w,
              (double)lay->total / (1 << 30),
              (double)plan_vae_layout_find(lay, PLAN_VAE_WEIGHTS, 0)->bytes / (1 << 20));
  *out = g;
  return SP_OK;

fail:
  free(t);
  wan_vae_gpu_free(g);
  return rc;
}

void wan_vae_gpu_free(wan_vae_gpu *g) {
  if (!g) return;
  if (g->host_frames) CUDA_CHECK(cudaFreeHost(g->host_frames));
  vae_gpu_core_close(&g->c);
  free(g);
}

int64_t wan_vae_gpu_peak_bytes(const wan_vae_gpu *g) { return (int64_t)g->c.lay->total; }

/* ---------------------------------------------------------------- decode */

/* Resample: upsample3d's time conv (skipped in the first chunk, the
 * published "Rep"), 2x nearest into s, 3x3 conv to c / 2 into x. */
static void resample(vae_grun *r, wan_vae_gpu *d, const wan_vae_resample *u) {
  vae_gpu_core *g = r->g;
  const int64_t c = u->dim, hw = r->h * r->w;
  int doubled = 0;
  if (u->temporal) {
    const int k = vae_gpu_next_cache(r, c);
    if (d->started[k]) {
      vae_gpu_cache_in(r, k, c);
      int i = vae_gpu_prof_begin(g);
      kern_cuda_vae_from_f32(g->k, g->x, vae_gpu_s_frames(r, c), r->t * hw * c);
      vae_gpu_prof_end(g, i, WAN_VAE_GPU_OP_ELEM);
      vae_gpu_conv(r, g->s, PLAN_VAE_CACHE_T + r->t, c, u->time_w, 2 * c, 3, 1, 1, g->y,
                   WAN_VAE_GPU_OP_CONV_TIME);
      vae_gpu_cache_out(r, k, c);
      i = vae_gpu_prof_begin(g);
      kern_cuda_vae_unfold_upsample(g->k, g->y, u->time_b, g->s, r->t, r->h, r->w, c);
      vae_gpu_prof_end(g, i, WAN_VAE_GPU_OP_ELEM);
      r->t *= 2;
      doubled = 1;
    }
    d->started[k] = 1;
  }
  if (!doubled) {
    const int i = vae_gpu_prof_begin(g);
    kern_cuda_vae_upsample2x(g->k, g->x, 1, g->s, r->t, r->h, r->w, c);
    vae_gpu_prof_end(g, i, WAN_VAE_GPU_OP_ELEM);
  }
  r->h *= 2;
  r->w *= 2;
  vae_gpu_conv(r, g->s, r->t, c, u->conv_w, c / 2, 1, 3, 3, g->y, WAN_VAE_GPU_OP_CONV2D);
  vae_gpu_add(r, g->y, u->conv_b, NULL, 0, NULL, g->x, 1, c / 2);
}

/* Decoder3d on latent frame f: conv2's output behind conv1's cache, the
 * middle, the levels, the head; the chunk's clamped frames (3, t, H, W)
 * end in d->frames. */
static void decoder_chunk(vae_grun *r, wan_vae_gpu *d, const float *latents, int64_t F,
                          int64_t f) {
  vae_gpu_core *g = r->g;
  const wan_vae_weights *wt = &d->wt;
  const int64_t z = wt->z_dim, hw = r->h * r->w;
  int i = vae_gpu_prof_begin(g);
  CUDA_CHECK(cudaMemcpy2DAsync(d->latent, (size_t)hw * sizeof(float), latents + f * hw,
                               (size_t)(F * hw) * sizeof(float), (size_t)hw * sizeof(float),
                               (size_t)z, cudaMemcpyHostToDevice, g->stream));
  vae_gpu_prof_end(g, i, WAN_VAE_GPU_OP_COPY);
  int k = vae_gpu_next_cache(r, z);
  vae_gpu_cache_in(r, k, z);
  float mean[WAN_VAE_Z_DIM], inv_std[WAN_VAE_Z_DIM];
  for (int ch = 0; ch < WAN_VAE_Z_DIM; ch++) {
    mean[ch] = wan_vae_latent_mean[ch];
    inv_std[ch] = 1.0f / wan_vae_latent_std[ch]; /* as published: 1 / std stored, divided by */
  }
  i = vae_gpu_prof_begin(g);
  kern_cuda_vae_latent_in(g->k, d->latent, wt->conv2_w, wt->conv2_b, mean, inv_std,
                          vae_gpu_s_frames(r, z), z, hw);
  vae_gpu_prof_end(g, i, WAN_VAE_GPU_OP_ELEM);
  vae_gpu_cached_conv3(r, k, wt->conv1_w, z, wt->mid_dim);
  vae_gpu_add(r, g->y, wt->conv1_b, NULL, 0, NULL, g->x, 1, wt->mid_dim);
  vae_gpu_resblock(r, &wt->mid0);
  vae_gpu_attnblock(r, &wt->mid_attn);
  vae_gpu_resblock(r, &wt->mid2);
  for (int l = 0; l < wt->n_levels; l++) {
    const wan_vae_level *lv = &wt->level[l];
    for (int b = 0; b < lv->n_res; b++) vae_gpu_resblock(r, &lv->res[b]);
    if (lv->has_up) resample(r, d, &lv->up);
  }
  k = vae_gpu_next_cache(r, wt->head_dim);
  vae_gpu_cache_in(r, k, wt->head_dim);
  vae_gpu_norm_x(r, wt->head_gamma, vae_gpu_s_frames(r, wt->head_dim), wt->head_dim, 1);
  vae_gpu_conv(r, g->s, PLAN_VAE_CACHE_T + r->t, wt->head_dim, wt->head_w, PLAN_VAE_HEAD_CO, 3,
               3, 3, g->y, WAN_VAE_GPU_OP_CONV3D);
  vae_gpu_cache_out(r, k, wt->head_dim);
  i = vae_gpu_prof_begin(g);
  kern_cuda_vae_frames_out(g->k, g->y, wt->head_b, d->frames, r->t, r->h * r->w,
                           PLAN_VAE_HEAD_CO);
  vae_gpu_prof_end(g, i, WAN_VAE_GPU_OP_ELEM);
}

int wan_vae_gpu_decode(wan_vae_gpu *d, const float *latents, int64_t F, wan_vae_frames_fn fn,
                       void *user) {
  vae_gpu_core *g = &d->c;
  const int64_t T_out = wan_vae_out_frames(&d->cfg, F);
  const int64_t ohw = g->lay->out_h * g->lay->out_w;
  if (F < 1) sp_fatal("vae gpu: decode of %lld latent frames", (long long)F);
  /* WanVAE_.clear_cache: every decode starts with empty caches (zeros, the
   * causal padding). */
  vae_gpu_clear_caches(g);
  memset(d->started, 0, sizeof d->started);
  int64_t frame0 = 0;
  for (int64_t f = 0; f < F; f++) {
    vae_grun r = {.g = g, .idx = 0, .t = 1, .h = d->h, .w = d->w};
    decoder_chunk(&r, d, latents, F, f);
    if (r.h * r.w != ohw || r.idx != g->lay->n_cache || frame0 + r.t > T_out ||
        r.t > g->lay->frames_per_chunk)
      sp_fatal("vae gpu: chunk %lld gave %lld frames of %lldx%lld after %d of %d caches",
               (long long)f, (long long)r.t, (long long)r.h, (long long)r.w, r.idx,
               g->lay->n_cache);
    const int i = vae_gpu_prof_begin(g);
    CUDA_CHECK(cudaMemcpyAsync(d->host_frames, d->frames, (size_t)(3 * r.t * ohw) * sizeof(float),
                               cudaMemcpyDeviceToHost, g->stream));
    vae_gpu_prof_end(g, i, WAN_VAE_GPU_OP_COPY);
    CUDA_CHECK(cudaStreamSynchronize(g->stream));
    vae_gpu_prof_flush(g);
    const int rc = fn(user, d->host_frames, frame0, r.t);
    if (rc != 0) return rc;
    frame0 += r.t;
  }
  if (frame0 != T_out)
    sp_fatal("vae gpu: decoded %lld frames, expected %lld", (long long)frame0, (long long)T_out);
  return 0;
}

/* ---------------------------------------------------------------- backend */

static int gpu_create(const wan_vae_make *a, void **out) {
  wan_vae_gpu *g = NULL;
  const int rc = wan_vae_gpu_create(a->config, a->packed, a->h, a->w, a->precision, &g);
  *out = g;
  return rc;
}

static void gpu_destroy(void *d) { wan_vae_gpu_free(d); }

static int gpu_decode(void *d, const float *latents, int64_t F, wan_vae_frames_fn fn,
                      void *user) {
  return wan_vae_gpu_decode(d, latents, F, fn, user);
}

static int64_t gpu_host_bytes(const void *d) { return 0; }

static int64_t gpu_device_bytes(const void *d) { return wan_vae_gpu_peak_bytes(d); }

static const wan_vae_backend cuda_ops = {.create = gpu_create,
                                         .destroy = gpu_destroy,
                                         .decode = gpu_decode,
                                         .host_bytes = gpu_host_bytes,
                                         .device_bytes = gpu_device_bytes,
                                         .enc_create = wan_vae_gpu_enc_backend_create,
                                         .enc_destroy = wan_vae_gpu_enc_backend_destroy,
                                         .encode = wan_vae_gpu_enc_backend_encode,
                                         .enc_host_bytes = gpu_host_bytes,
                                         .enc_device_bytes = wan_vae_gpu_enc_backend_bytes};

const net_backend wan_vae_cuda = {wan_vae_net, RANK_DEVICE_CUDA, &cuda_ops};
