/* The Wan 2.2 VAE's driver (wan_vae22_run.h): checks, the part's weights,
 * the backend's coder, frames to the video writer. */
#include "wan_vae22_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "log.h"
#include "video_out.h"
#include "wan_vae22.h"
#include "wan_vae22_backend.h"
#include "wan_vae22_gpu.h"

int wan_vae22_check_latents(const wan_vae22_model *m, const char *what, int ndim,
                            const int64_t *dims) {
  const wan_vae22_info *in = wan_vae22_get_info(m);
  const int rc = decode_check_latent_shape(what, ndim, dims, in->config.z_dim, "Wan 2.2 VAE",
                                           in->id.source, " (a Wan 2.1 VAE takes 16)");
  if (rc != SP_OK) return rc;
  if (dims[1] < 1 || dims[2] < 1 || dims[3] < 1 || dims[2] > WAN_VAE22_MAX_SIDE ||
      dims[3] > WAN_VAE22_MAX_SIDE) {
    sp_log_error("%s: latents [%lld, %lld, %lld, %lld]: frames, height and width must be at "
                 "least 1, height and width at most %d", what, (long long)dims[0],
                 (long long)dims[1], (long long)dims[2], (long long)dims[3], WAN_VAE22_MAX_SIDE);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

int wan_vae22_check_outputs(const decode_opts *o, const wan_vae22_model *m, const int64_t *dims) {
  const int64_t s = wan_vae22_space_factor(&wan_vae22_get_info(m)->config);
  const int rc = decode_check_video_outputs(o, dims[3] * s, dims[2] * s);
  if (rc != SP_OK) return rc;
  if (o->tile_h > 0 || o->tile_w > 0) {
    sp_log_error("--tile: the Wan 2.2 VAE decodes untiled (VAE22.md \"Memory\"); leave --tile "
                 "out");
    return SP_ERR_INPUT;
  }
  return net_backend_ops(wan_vae22_net(), o->dev) ? SP_OK : SP_ERR_INPUT;
}

/* A part's weights in its table's layout, read once (one log line). */
typedef struct part_weights {
  wan_vae22_weights wt;
  wan_vae_table tab;
  float *packed; /* (tab.packed_floats) */
} part_weights;

static int read_part(wan_vae22_model *m, wan_vae22_part p, part_weights **out, double *secs) {
  const double t0 = comm_now();
  part_weights *d = calloc(1, sizeof *d);
  if (!d) {
    sp_log_error("vae: out of host memory");
    return SP_ERR_RUNTIME;
  }
  wan_vae22_table_make(&wan_vae22_get_info(m)->config, p, &d->wt, &d->tab);
  d->packed = malloc((size_t)d->tab.packed_floats * sizeof *d->packed);
  if (!d->packed) {
    sp_log_error("vae: out of host memory for %lld MB of %s weights",
                 (long long)(d->tab.packed_floats * 4 / 1000000), wan_vae22_part_name(p));
    free(d);
    return SP_ERR_RUNTIME;
  }
  const int rc = wan_vae22_read(m, p, d->packed, d->tab.packed_floats);
  if (rc != SP_OK) {
    free(d->packed);
    free(d);
    return rc;
  }
  wan_vae_table_bind(&d->tab, d->packed);
  *secs = comm_now() - t0;
  sp_log_info("vae: read the %s weights of %s (%.1f MB) in %.2f s", wan_vae22_part_name(p),
              wan_vae22_get_info(m)->id.source, (double)d->tab.packed_floats * 4 / 1e6, *secs);
  *out = d;
  return SP_OK;
}

static void free_part(part_weights *d) {
  if (!d) return;
  free(d->packed);
  free(d);
}

/* On CUDA: the part's layout against the device's free memory (less
 * WAN_VAE_GPU_SLACK_BYTES); there is no tiling to fall back on. */
static int fits_device(const wan_vae22_config *c, wan_vae22_part p, int64_t h, int64_t w,
                       rank_device dev, wan_vae_gpu_precision prec) {
  if (dev != RANK_DEVICE_CUDA) return SP_OK;
  const int64_t need = wan_vae22_gpu_bytes(c, p, h, w, prec);
  if (need < 0) return SP_ERR_INPUT;
  const int64_t free_b = rank_cuda_free_bytes();
  if (need <= free_b - WAN_VAE_GPU_SLACK_BYTES) return SP_OK;
  sp_log_error("vae: the CUDA %s needs %.2f GiB at %s %lldx%lld, the device has %.2f GiB free "
               "(%.2f GiB kept for its libraries); it is not tiled: use a smaller size, fp32 "
               "-> bf16, or --device cpu", wan_vae22_part_name(p), (double)need / (1 << 30),
               p == WAN_VAE22_ENCODER ? "video" : "latent", (long long)h, (long long)w,
               (double)free_b / (1 << 30), (double)WAN_VAE_GPU_SLACK_BYTES / (1 << 30));
  return SP_ERR_RUNTIME;
}

/* Opens the outputs, decodes into them, commits them (one after the
 * other: a failure of the second leaves the first). */
static int decode_into(const decode_opts *o, const wan_vae22_backend *b, void *coder,
                       const float *latents, const int64_t *dims, decode_stats *st) {
  decode_out k;
  int rc = decode_out_open(o, st, dims[1], &k);
  const double t = k.t0 = comm_now();
  if (rc == SP_OK) rc = b->decode(coder, latents, dims[1], decode_out_put, &k);
  rc = decode_out_close(&k, rc);
  st->decode_s = comm_now() - t;
  return rc;
}

int wan_vae22_decode_run(const decode_opts *o, wan_vae22_model *m, const float *latents,
                         const int64_t *dims, decode_stats *st) {
  const wan_vae22_config *c = &wan_vae22_get_info(m)->config;
  const int64_t h = dims[2], w = dims[3], s = wan_vae22_space_factor(c);
  memset(st, 0, sizeof *st);
  st->frames = wan_vae22_out_frames(c, dims[1]);
  st->height = h * s;
  st->width = w * s;
  st->tiles_y = st->tiles_x = 1;
  st->tile_h = h;
  st->tile_w = w;
  const wan_vae22_backend *b = net_backend_ops(wan_vae22_net(), o->dev);
  if (!b) return SP_ERR_INPUT;
  int rc = fits_device(c, WAN_VAE22_DECODER, h, w, o->dev, o->precision);
  if (rc != SP_OK) return rc;
  part_weights *d = NULL;
  void *coder = NULL;
  if ((rc = read_part(m, WAN_VAE22_DECODER, &d, &st->read_s)) != SP_OK) return rc;
  const wan_vae22_make mk = {c, WAN_VAE22_DECODER, &d->wt, d->packed, h, w, o->precision};
  if ((rc = b->create(&mk, &coder)) == SP_OK) {
    st->host_bytes = b->host_bytes(coder);
    sp_log_info("decode: %lld latent frames of %lldx%lld -> %lld frames of %lldx%lld on %s%s "
                "(Wan 2.2 VAE)", (long long)dims[1], (long long)h, (long long)w,
                (long long)st->frames, (long long)st->height, (long long)st->width,
                rank_device_name(o->dev), o->dev != RANK_DEVICE_CUDA ? ""
                : o->precision == WAN_VAE_GPU_FP32 ? " (fp32)" : " (bf16)");
    rc = decode_into(o, b, coder, latents, dims, st);
    st->device_peak_bytes = b->device_bytes(coder);
    b->destroy(coder);
  }
  free_part(d);
  return rc;
}

/* ---- encode ------------------------------------------------------------------- */

int wan_vae22_check_video(const wan_vae22_model *m, const char *what, int ndim,
                          const int64_t *dims, int64_t *ldims) {
  const wan_vae22_config *c = &wan_vae22_get_info(m)->config;
  const int64_t f = wan_vae22_space_factor(c);
  if (ndim != 4 || dims[0] != 3) {
    sp_log_error("%s: a video for the encoder is [3, T, H, W] (RGB in [-1, 1])", what);
    return SP_ERR_INPUT;
  }
  if (dims[1] < 1 || (dims[1] - 1) % WAN_VAE22_CHUNK != 0) {
    sp_log_error("%s: %lld frames: the Wan 2.2 encoder takes 1 + 4k frames (1, 5, 9, ...)",
                 what, (long long)dims[1]);
    return SP_ERR_INPUT;
  }
  if (dims[2] < f || dims[3] < f || dims[2] % f || dims[3] % f ||
      dims[2] / f > WAN_VAE22_MAX_SIDE || dims[3] / f > WAN_VAE22_MAX_SIDE) {
    sp_log_error("%s: %lldx%lld pixels: the Wan 2.2 encoder takes heights and widths that are "
                 "multiples of %lld (patchify and every downsample halve exactly), at most %lld",
                 what, (long long)dims[2], (long long)dims[3], (long long)f,
                 (long long)(f * WAN_VAE22_MAX_SIDE));
    return SP_ERR_INPUT;
  }
  if (ldims) {
    ldims[0] = c->z_dim;
    ldims[1] = wan_vae22_latent_frames(c, dims[1]);
    ldims[2] = dims[2] / f;
    ldims[3] = dims[3] / f;
  }
  return SP_OK;
}

int wan_vae22_encode_run(const wan_vae22_encode_opts *o, wan_vae22_model *m, const float *video,
                         const int64_t *dims, float *latents, wan_vae22_encode_stats *st) {
  const wan_vae22_config *c = &wan_vae22_get_info(m)->config;
  memset(st, 0, sizeof *st);
  int rc = wan_vae22_check_video(m, "encode", 4, dims, st->dims);
  if (rc != SP_OK) return rc;
  const wan_vae22_backend *b = net_backend_ops(wan_vae22_net(), o->dev);
  if (!b) return SP_ERR_INPUT;
  if ((rc = fits_device(c, WAN_VAE22_ENCODER, dims[2], dims[3], o->dev, o->precision)) != SP_OK)
    return rc;
  part_weights *d = NULL;
  void *coder = NULL;
  if ((rc = read_part(m, WAN_VAE22_ENCODER, &d, &st->read_s)) != SP_OK) return rc;
  const wan_vae22_make mk = {c, WAN_VAE22_ENCODER, &d->wt, d->packed, dims[2], dims[3],
                             o->precision};
  if ((rc = b->create(&mk, &coder)) == SP_OK) {
    st->host_bytes = b->host_bytes(coder);
    if (!o->quiet)
      sp_log_info("encode: %lld frames of %lldx%lld -> latents [%lld, %lld, %lld, %lld] on %s%s "
                  "(Wan 2.2 VAE)", (long long)dims[1], (long long)dims[2], (long long)dims[3],
                  (long long)st->dims[0], (long long)st->dims[1], (long long)st->dims[2],
                  (long long)st->dims[3], rank_device_name(o->dev),
                  o->dev != RANK_DEVICE_CUDA ? ""
                  : o->precision == WAN_VAE_GPU_FP32 ? " (fp32)" : " (bf16)");
    const double t = comm_now();
    rc = b->encode(coder, video, dims[1], latents);
    st->encode_s = comm_now() - t;
    st->device_peak_bytes = b->device_bytes(coder);
    b->destroy(coder);
  }
  free_part(d);
  return rc;
}
