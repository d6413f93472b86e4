/* The tiled VAE decode (wan_vae_tile.h, VAE.md "Tiling").
 *
 * Blending: along each axis, tile i's weight is 1 inside, rising linearly
 * over its overlap with the tile before it and falling over its overlap
 * with the tile after it (pixel centres, so no weight is 0 inside a tile),
 * then divided by the sum of the weights of every tile covering that pixel:
 * the weights of a pixel sum to 1 however many tiles overlap there. A
 * pixel's weight is the product of its row's and its column's, and the
 * video is the sum of the tiles' clamped frames times their weights; with
 * one tile every weight is exactly 1 and the sum is the tile itself. */
#include "wan_vae_tile.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "vae_layout.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

int wan_vae_tiling_check(int64_t h, int64_t w, const wan_vae_tiling *t, char *err,
                         size_t errlen) {
  const char *bad = NULL;
  if (t->th < 1 || t->tw < 1) bad = "a tile side below 1";
  else if (t->overlap < 0) bad = "a negative overlap";
  else if ((t->th < h && t->overlap >= t->th) || (t->tw < w && t->overlap >= t->tw))
    bad = "an overlap not below a split tile side";
  if (!bad) return 0;
  snprintf(err, errlen,
           "tile %lldx%lld with overlap %lld for latents %lldx%lld: %s (tiles are at least 1 "
           "latent position a side, the overlap 0 or more and below every side that is split)",
           (long long)t->th, (long long)t->tw, (long long)t->overlap, (long long)h,
           (long long)w, bad);
  return -1;
}

void wan_vae_tiling_grid(int64_t h, int64_t w, const wan_vae_tiling *t, int64_t *ny,
                         int64_t *nx) {
  *ny = plan_vae_tile_count(h, min64(t->th, h), t->overlap);
  *nx = plan_vae_tile_count(w, min64(t->tw, w), t->overlap);
}

/* Frames of a later chunk: 2^(temporal resamples). */
static int64_t chunk_frames(const wan_vae_config *c) { return wan_vae_out_frames(c, 2) - 1; }

int64_t wan_vae_tiled_host_bytes(const wan_vae_config *c, int64_t F, int64_t h, int64_t w,
                                 const wan_vae_tiling *t) {
  const int64_t s = wan_vae_out_scale(c), ohw = h * w * s * s;
  const int64_t tile = c->z_dim * F * min64(t->th, h) * min64(t->tw, w);
  return (3 * wan_vae_out_frames(c, F) * ohw + tile + 3 * chunk_frames(c) * ohw) *
         (int64_t)sizeof(float);
}

/* The normalised weights (count, t s) of the tiles along an axis of n
 * latent positions, tile t, scale s. */
static void axis_weights(int64_t n, int64_t t, int64_t count, int64_t s, float *out,
                         double *sum) {
  const int64_t tp = t * s;
  memset(sum, 0, (size_t)(n * s) * sizeof *sum);
  for (int pass = 0; pass < 2; pass++) {
    for (int64_t i = 0; i < count; i++) {
      const int64_t p0 = plan_vae_tile_start(n, t, count, i) * s;
      const int64_t prev_end = i > 0 ? plan_vae_tile_start(n, t, count, i - 1) * s + tp : p0;
      const int64_t next0 = i + 1 < count ? plan_vae_tile_start(n, t, count, i + 1) * s : p0 + tp;
      for (int64_t k = 0; k < tp; k++) {
        const int64_t p = p0 + k;
        double wt = 1.0;
        if (p < prev_end) {
          const double r = ((double)k + 0.5) / (double)(prev_end - p0);
          if (r < wt) wt = r;
        }
        if (p >= next0) {
          const double r = ((double)(tp - k) - 0.5) / (double)(p0 + tp - next0);
          if (r < wt) wt = r;
        }
        if (pass == 0) sum[p] += wt;
        else out[i * tp + k] = (float)(wt / sum[p]);
      }
    }
  }
}

/* One tile's sink: its clamped frames (3, n, th s, tw s), weighted, into
 * the video (3, T, H, W). */
typedef struct tile_sink {
  float *video;
  int64_t T, H, W;
  int64_t y0, x0, tph, tpw; /* the tile's pixel origin and size */
  const float *wy, *wx;     /* (tph), (tpw) */
} tile_sink;

static int tile_put(void *user, const float *frames, int64_t t0, int64_t n) {
  const tile_sink *k = user;
  for (int64_t ch = 0; ch < 3; ch++)
    for (int64_t f = 0; f < n; f++) {
      const float *src = frames + (ch * n + f) * k->tph * k->tpw;
      float *dst = k->video + ((ch * k->T + t0 + f) * k->H + k->y0) * k->W + k->x0;
      for (int64_t y = 0; y < k->tph; y++)
        for (int64_t x = 0; x < k->tpw; x++)
          dst[y * k->W + x] += k->wy[y] * k->wx[x] * src[y * k->tpw + x];
    }
  return 0;
}

/* The blended video to fn, chunk by chunk, through buf (3, chunk_frames, H W). */
static int emit(const wan_vae_config *c, const float *video, int64_t T, int64_t ohw, float *buf,
                wan_vae_frames_fn fn, void *user) {
  for (int64_t t0 = 0; t0 < T;) {
    const int64_t n = t0 == 0 ? 1 : chunk_frames(c);
    for (int64_t ch = 0; ch < 3; ch++)
      memcpy(buf + ch * n * ohw, video + (ch * T + t0) * ohw, (size_t)(n * ohw) * sizeof *buf);
    /* The weights of a pixel sum to 1 only up to rounding: a blend of
     * values at +-1 can land one ulp outside, so it is clamped again, as
     * every tile's frames were (a no-op for a value already inside). */
    for (int64_t i = 0; i < 3 * n * ohw; i++) buf[i] = fminf(1.0f, fmaxf(-1.0f, buf[i]));
    int rc = fn(user, buf, t0, n);
    if (rc != 0) return rc;
    t0 += n;
  }
  return 0;
}

/* Flat list: latents and shape (as wan_vae_decode_stream), tiling, two callbacks and contexts. */
int wan_vae_decode_tiled(const wan_vae_config *c, const float *latents, int64_t F, int64_t h,
                         int64_t w, const wan_vae_tiling *t, wan_vae_tile_decode_fn decode,
                         void *decoder, wan_vae_frames_fn fn, void *user) {
  const int64_t s = wan_vae_out_scale(c), T = wan_vae_out_frames(c, F), z = c->z_dim;
  const int64_t th = min64(t->th, h), tw = min64(t->tw, w), H = h * s, W = w * s;
  int64_t ny, nx;
  wan_vae_tiling_grid(h, w, t, &ny, &nx);
  if (ny < 1 || nx < 1) sp_fatal("vae tiles: tiling %lldx%lld/%lld not checked",
                                 (long long)t->th, (long long)t->tw, (long long)t->overlap);
  float *video = calloc((size_t)(3 * T * H * W), sizeof *video);
  float *crop = malloc((size_t)(z * F * th * tw) * sizeof *crop);
  float *buf = malloc((size_t)(3 * chunk_frames(c) * H * W) * sizeof *buf);
  float *wy = malloc((size_t)(ny * th * s) * sizeof *wy);
  float *wx = malloc((size_t)(nx * tw * s) * sizeof *wx);
  double *sum = malloc((size_t)((H > W ? H : W)) * sizeof *sum);
  int rc = 0;
  if (!video || !crop || !buf || !wy || !wx || !sum) {
    sp_log_error("vae tiles: out of host memory for the blended video (%.2f GiB)",
                 (double)wan_vae_tiled_host_bytes(c, F, h, w, t) / (1 << 30));
    rc = SP_ERR_RUNTIME;
    goto done;
  }
  axis_weights(h, th, ny, s, wy, sum);
  axis_weights(w, tw, nx, s, wx, sum);
  for (int64_t iy = 0; iy < ny && rc == 0; iy++)
    for (int64_t ix = 0; ix < nx && rc == 0; ix++) {
      const int64_t y0 = plan_vae_tile_start(h, th, ny, iy);
      const int64_t x0 = plan_vae_tile_start(w, tw, nx, ix);
      for (int64_t cf = 0; cf < z * F; cf++)
        for (int64_t y = 0; y < th; y++)
          memcpy(crop + (cf * th + y) * tw, latents + (cf * h + y0 + y) * w + x0,
                 (size_t)tw * sizeof *crop);
      tile_sink k = {video, T, H, W, y0 * s, x0 * s, th * s, tw * s,
                     wy + iy * th * s, wx + ix * tw * s};
      rc = decode(decoder, crop, F, tile_put, &k);
    }
  if (rc == 0) rc = emit(c, video, T, H * W, buf, fn, user);
done:
  free(sum);
  free(wx);
  free(wy);
  free(buf);
  free(crop);
  free(video);
  return rc;
}
