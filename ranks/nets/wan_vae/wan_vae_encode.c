/* Video to latents (wan_vae_encode.h). */
#include "wan_vae_encode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "log.h"
#include "wan_vae_backend.h"
#include "wan_vae_enc.h"

int vae_encode_check(const vae_model *m, const char *what, const int64_t *dims) {
  const vae_model_info *in = vae_model_get_info(m);
  const wan_vae_config *c = &in->config;
  const int64_t s = wan_vae_out_scale(c);
  char err[200];
  if (!c->encoder) {
    sp_log_error("--vae %s: %s", in->id.source, VAE_MODEL_NO_ENCODER);
    return SP_ERR_INPUT;
  }
  if (dims[0] != WAN_VAE_ENC_IN_CH) {
    sp_log_error("%s: %lld channels; the encoder takes %d (RGB)", what, (long long)dims[0],
                 WAN_VAE_ENC_IN_CH);
    return SP_ERR_INPUT;
  }
  if (wan_vae_enc_size_check(c, dims[1], dims[2], dims[3], err, sizeof err) != 0) {
    sp_log_error("%s: %s", what, err);
    return SP_ERR_INPUT;
  }
  if (dims[2] % s != 0 || dims[3] % s != 0) {
    sp_log_error("%s: %lldx%lld pixels: height and width must be multiples of %lld (the VAE's "
                 "downsampling), so that the latents decode to the same size", what,
                 (long long)dims[2], (long long)dims[3], (long long)s);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

int vae_encode_check_device(const vae_encode_opts *o, const vae_model *m, const int64_t *dims) {
  if (!net_backend_ops(wan_vae_net(), o->dev)) return SP_ERR_INPUT;
  if (o->dev != RANK_DEVICE_CUDA) return SP_OK;
  const wan_vae_config *c = &vae_model_get_info(m)->config;
  const int64_t need = wan_vae_gpu_enc_bytes(c, dims[1], dims[2], dims[3], o->precision);
  if (need < 0) return SP_ERR_INPUT;
  const int64_t free_b = rank_cuda_free_bytes();
  if (need <= free_b - WAN_VAE_GPU_SLACK_BYTES) return SP_OK;
  sp_log_error("encode: the CUDA encoder needs %.2f GiB for %lld frames of %lldx%lld in %s, the "
               "device has %.2f GiB free (%.2f GiB kept for its libraries): encode on the CPU "
               "(--device cpu)%s, or free the device; the encoder is not tiled (tiles would "
               "change the latents every sampling step is conditioned on)",
               (double)need / (1 << 30), (long long)dims[1], (long long)dims[2],
               (long long)dims[3], wan_vae_gpu_precision_name(o->precision),
               (double)free_b / (1 << 30), (double)WAN_VAE_GPU_SLACK_BYTES / (1 << 30),
               o->precision == WAN_VAE_GPU_BF16 ? "" : ", or in bf16 (--vae-precision bf16)");
  return SP_ERR_INPUT;
}

/* The encoder's weights in its table's layout. */
typedef struct enc_weights {
  wan_vae_enc_weights wt;
  wan_vae_table tab;
  float *packed; /* (tab.packed_floats) */
} enc_weights;

static int read_weights(vae_model *m, enc_weights *w) {
  wan_vae_enc_table_make(&vae_model_get_info(m)->config, &w->wt, &w->tab);
  w->packed = malloc((size_t)w->tab.packed_floats * sizeof(float));
  if (!w->packed) {
    sp_log_error("encode: out of host memory for %lld MB of VAE encoder weights",
                 (long long)(w->tab.packed_floats * 4 / 1000000));
    return SP_ERR_RUNTIME;
  }
  const double t = comm_now();
  int rc = vae_model_read_encoder(m, w->packed, w->tab.packed_floats);
  if (rc != SP_OK) return rc;
  wan_vae_table_bind(&w->tab, w->packed);
  sp_log_info("encode: read the VAE encoder's weights of %s (%.1f MB) in %.2f s",
              vae_model_get_info(m)->id.source, (double)w->tab.packed_floats * 4 / 1e6,
              comm_now() - t);
  return SP_OK;
}

/* The latents' sink: each chunk's (z, n, h, w) into the whole latents, a
 * progress line per chunk. */
typedef struct enc_sink {
  float *latents;
  int64_t z, F, hw;
  int64_t chunk, chunks;
  double t0;
  int quiet;
} enc_sink;

static int sink_put(void *user, const float *lat, int64_t f0, int64_t n) {
  enc_sink *k = user;
  for (int64_t ch = 0; ch < k->z; ch++)
    memcpy(k->latents + (ch * k->F + f0) * k->hw, lat + ch * n * k->hw,
           (size_t)(n * k->hw) * sizeof(float));
  k->chunk++;
  if (!k->quiet)
    sp_log_info("encode: chunk %lld/%lld -> latent frames %lld..%lld of %lld (%.1f s)",
                (long long)k->chunk, (long long)k->chunks, (long long)f0, (long long)(f0 + n - 1),
                (long long)k->F, comm_now() - k->t0);
  return SP_OK;
}

int vae_encode_run(const vae_encode_opts *o, vae_model *m, const float *video,
                   const int64_t *dims, float *latents, vae_encode_stats *stats) {
  const wan_vae_config *c = &vae_model_get_info(m)->config;
  const int64_t T = dims[1], H = dims[2], W = dims[3];
  memset(stats, 0, sizeof *stats);
  stats->frames = wan_vae_enc_latent_frames(c, T);
  stats->height = wan_vae_enc_latent_side(c, H);
  stats->width = wan_vae_enc_latent_side(c, W);
  const wan_vae_backend *b = net_backend_ops(wan_vae_net(), o->dev);
  if (!b) return SP_ERR_INPUT;
  enc_weights *w = calloc(1, sizeof *w);
  if (!w) {
    sp_log_error("encode: out of host memory");
    return SP_ERR_RUNTIME;
  }
  double t = comm_now();
  int rc = read_weights(m, w);
  stats->read_s = comm_now() - t;
  void *e = NULL;
  const wan_vae_enc_make mk = {c, &w->wt, w->packed, T, H, W, o->precision};
  if (rc == SP_OK) rc = b->enc_create(&mk, &e);
  if (rc == SP_OK) {
    enc_sink k = {latents, c->z_dim, stats->frames, stats->height * stats->width, 0,
                  1 + (T - 1) / WAN_VAE_ENC_CHUNK, 0, o->quiet};
    sp_log_info("encode: %lld frames of %lldx%lld -> %lld latent frames of %lldx%lld on %s%s%s%s",
                (long long)T, (long long)H, (long long)W, (long long)stats->frames,
                (long long)stats->height, (long long)stats->width, rank_device_name(o->dev),
                o->dev != RANK_DEVICE_CUDA ? "" : " (",
                o->dev != RANK_DEVICE_CUDA ? "" : wan_vae_gpu_precision_name(o->precision),
                o->dev != RANK_DEVICE_CUDA ? "" : ")");
    t = k.t0 = comm_now();
    rc = b->encode(e, video, T, sink_put, &k);
    stats->encode_s = comm_now() - t;
    stats->host_bytes = b->enc_host_bytes(e);
    stats->device_bytes = b->enc_device_bytes(e);
  }
  if (e) b->enc_destroy(e);
  free(w->packed);
  free(w);
  return rc;
}
