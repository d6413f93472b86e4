/* Latents to video (wan_vae_decode.h). */
#include "wan_vae_decode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "log.h"
#include "video_out.h"
#include "wan_vae.h"
#include "wan_vae_backend.h"
#include "wan_vae_gpu_layout.h"
#include "wan_vae_tile.h"

int decode_check_latents(const vae_model *m, const char *what, int ndim, const int64_t *dims) {
  const wan_vae_config *c = &vae_model_get_info(m)->config;
  const int rc = decode_check_latent_shape(what, ndim, dims, c->z_dim, "VAE",
                                           vae_model_get_info(m)->id.source, "");
  if (rc != SP_OK) return rc;
  if (dims[1] < 1 || dims[2] < 1 || dims[3] < 1) {
    sp_log_error("%s: latents [%lld, %lld, %lld, %lld] are empty", what, (long long)dims[0],
                 (long long)dims[1], (long long)dims[2], (long long)dims[3]);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

int decode_check_outputs(const decode_opts *o, const vae_model *m, const int64_t *dims) {
  const wan_vae_config *c = &vae_model_get_info(m)->config;
  const int64_t s = wan_vae_out_scale(c);
  const int rc = decode_check_video_outputs(o, dims[3] * s, dims[2] * s);
  if (rc != SP_OK) return rc;
  if (o->tile_h > 0 || o->tile_w > 0) {
    char err[320];
    const wan_vae_tiling t = {o->tile_h, o->tile_w, o->tile_overlap};
    if (wan_vae_tiling_check(dims[2], dims[3], &t, err, sizeof err) != 0) {
      sp_log_error("--tile: %s", err);
      return SP_ERR_INPUT;
    }
  }
  if (!net_backend_ops(wan_vae_net(), o->dev)) return SP_ERR_INPUT;
  return SP_OK;
}

/* Reads the weights in the table layout of the VAE's config. */
static int read_weights(vae_model *m, wan_vae_weights *wt, wan_vae_table *tab, float **packed) {
  wan_vae_table_make(&vae_model_get_info(m)->config, wt, tab);
  *packed = malloc((size_t)tab->packed_floats * sizeof(float));
  if (!*packed) {
    sp_log_error("decode: out of host memory for %lld MB of VAE weights",
                 (long long)(tab->packed_floats * 4 / 1000000));
    return SP_ERR_RUNTIME;
  }
  int rc = vae_model_read(m, *packed, tab->packed_floats);
  if (rc != SP_OK) return rc;
  wan_vae_table_bind(tab, *packed);
  return SP_OK;
}

struct decode_weights {
  wan_vae_weights wt;
  wan_vae_table tab;
  float *packed; /* (tab.packed_floats) */
};

int decode_weights_read(vae_model *m, decode_weights **out) {
  decode_weights *d = calloc(1, sizeof *d);
  if (!d) {
    sp_log_error("decode: out of host memory");
    return SP_ERR_RUNTIME;
  }
  const double t = comm_now();
  int rc = read_weights(m, &d->wt, &d->tab, &d->packed);
  if (rc != SP_OK) {
    decode_weights_free(d);
    return rc;
  }
  sp_log_info("decode: read the VAE weights of %s (%.1f MB) in %.2f s",
              vae_model_get_info(m)->id.source, (double)d->tab.packed_floats * 4 / 1e6,
              comm_now() - t);
  *out = d;
  return SP_OK;
}

void decode_weights_free(decode_weights *d) {
  if (!d) return;
  free(d->packed);
  free(d);
}

/* The tiling of this decode: the one asked for, else on CUDA the
 * planner's when the whole latent's layout does not fit the device's free
 * memory (less WAN_VAE_GPU_SLACK_BYTES); *tiled = 0 for none. */
static int decode_tiling(const decode_opts *o, const wan_vae_config *c, int64_t h, int64_t w,
                         wan_vae_tiling *t, int *tiled) {
  *tiled = 0;
  if (o->tile_h > 0) {
    *t = (wan_vae_tiling){o->tile_h, o->tile_w, o->tile_overlap};
    *tiled = 1;
    return SP_OK;
  }
  if (o->dev != RANK_DEVICE_CUDA) return SP_OK;
  const int64_t need = wan_vae_gpu_bytes(c, h, w, o->precision);
  if (need < 0) return SP_ERR_INPUT;
  const int64_t budget = rank_cuda_free_bytes() - WAN_VAE_GPU_SLACK_BYTES;
  if (need <= budget) return SP_OK;
  plan_vae_tiles pt;
  int rc = wan_vae_gpu_tiles(c, h, w, o->precision, budget > 0 ? (uint64_t)budget : 0, &pt);
  if (rc != SP_OK) return rc;
  *t = (wan_vae_tiling){pt.th, pt.tw, pt.overlap};
  *tiled = 1;
  sp_log_info("decode: the decoder needs %.2f GiB at latent %lldx%lld, the device has %.2f GiB "
              "free: %lld x %lld tiles of %lldx%lld (%.2f GiB each), overlap %lld",
              (double)need / (1 << 30), (long long)h, (long long)w,
              (double)(budget + WAN_VAE_GPU_SLACK_BYTES) / (1 << 30), (long long)pt.ny,
              (long long)pt.nx, (long long)pt.th, (long long)pt.tw,
              (double)pt.bytes / (1 << 30), (long long)pt.overlap);
  return SP_OK;
}

/* A tiled decode's decoder: the backend's, with a line per tile. */
typedef struct tile_decoder {
  const wan_vae_backend *b;
  void *d;
  int64_t tile, tiles;
  int quiet;
} tile_decoder;

static int tile_decode(void *decoder, const float *latents, int64_t F, wan_vae_frames_fn fn,
                       void *user) {
  tile_decoder *d = decoder;
  d->tile++;
  if (!d->quiet) sp_log_info("decode: tile %lld/%lld", (long long)d->tile, (long long)d->tiles);
  return d->b->decode(d->d, latents, F, fn, user);
}

int decode_run(const decode_opts *o, vae_model *m, const float *latents, const int64_t *dims,
               decode_stats *stats) {
  decode_weights *d = NULL;
  memset(stats, 0, sizeof *stats);
  const double t = comm_now();
  int rc = decode_weights_read(m, &d);
  const double read_s = comm_now() - t;
  if (rc == SP_OK) rc = decode_run_with(o, m, d, latents, dims, stats);
  stats->read_s = read_s;
  decode_weights_free(d);
  return rc;
}

/* The video's size and the tiling into stats (tl, *tiled: decode_tiling). */
static int decode_shape(const decode_opts *o, const wan_vae_config *c, const int64_t *dims,
                        decode_stats *stats, wan_vae_tiling *tl, int *tiled) {
  const int64_t F = dims[1], h = dims[2], w = dims[3], s = wan_vae_out_scale(c);
  memset(stats, 0, sizeof *stats);
  stats->frames = wan_vae_out_frames(c, F);
  stats->height = h * s;
  stats->width = w * s;
  const int rc = decode_tiling(o, c, h, w, tl, tiled);
  if (rc != SP_OK) return rc;
  stats->tiles_y = stats->tiles_x = 1;
  stats->tile_h = h;
  stats->tile_w = w;
  if (*tiled) {
    wan_vae_tiling_grid(h, w, tl, &stats->tiles_y, &stats->tiles_x);
    stats->tile_h = tl->th < h ? tl->th : h;
    stats->tile_w = tl->tw < w ? tl->tw : w;
    stats->host_bytes = wan_vae_tiled_host_bytes(c, F, h, w, tl);
  }
  return SP_OK;
}

int decode_run_with(const decode_opts *o, vae_model *m, decode_weights *d, const float *latents,
                    const int64_t *dims, decode_stats *stats) {
  const wan_vae_config *c = &vae_model_get_info(m)->config;
  const int64_t F = dims[1], h = dims[2], w = dims[3];
  decode_out sink = {0};
  tile_decoder td = {.b = net_backend_ops(wan_vae_net(), o->dev), .quiet = o->quiet};
  wan_vae_tiling tl;
  int tiled;
  double t;
  int rc = decode_shape(o, c, dims, stats, &tl, &tiled);
  if (rc != SP_OK) goto done;
  if (!td.b) {
    rc = SP_ERR_INPUT;
    goto done;
  }
  td.tiles = stats->tiles_y * stats->tiles_x;
  const wan_vae_make mk = {c, &d->wt, d->packed, stats->tile_h, stats->tile_w, o->precision};
  if ((rc = td.b->create(&mk, &td.d)) != SP_OK) goto done;
  stats->host_bytes += td.b->host_bytes(td.d);

  if ((rc = decode_out_open(o, stats, F, &sink)) != SP_OK) goto done;
  sp_log_info("decode: %lld latent frames of %lldx%lld -> %lld frames of %lldx%lld on %s%s%s%s",
              (long long)F, (long long)h, (long long)w, (long long)stats->frames,
              (long long)stats->height, (long long)stats->width, rank_device_name(o->dev),
              o->dev != RANK_DEVICE_CUDA ? "" : " (",
              o->dev != RANK_DEVICE_CUDA ? "" : wan_vae_gpu_precision_name(o->precision),
              o->dev != RANK_DEVICE_CUDA ? "" : ")");
  if (tiled)
    sp_log_info("decode: in %lld x %lld tiles of latent %lldx%lld, overlap %lld",
                (long long)stats->tiles_y, (long long)stats->tiles_x, (long long)stats->tile_h,
                (long long)stats->tile_w, (long long)tl.overlap);
  t = sink.t0 = comm_now();
  if (tiled)
    rc = wan_vae_decode_tiled(c, latents, F, h, w, &tl, tile_decode, &td, decode_out_put,
                              &sink);
  else
    rc = td.b->decode(td.d, latents, F, decode_out_put, &sink);
  if ((rc = decode_out_close(&sink, rc)) != SP_OK) goto done;
  stats->decode_s = comm_now() - t;
  stats->device_peak_bytes = td.b->device_bytes(td.d);
done:
  decode_out_close(&sink, rc);
  if (td.d) td.b->destroy(td.d);
  return rc;
}
