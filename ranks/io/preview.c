/* Latent preview PNG (see preview.h). */
#include "preview.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "log.h"
#include "video_backend.h"

/* ComfyUI comfy/latent_formats.py, class Wan21 (published values). */
const double rank_preview_rgb_factors[RANK_PREVIEW_CHANNELS][3] = {
    {-0.1299, -0.1692, 0.2932}, {0.0671, 0.0406, 0.0442},   {0.3568, 0.2548, 0.1747},
    {0.0372, 0.2344, 0.1420},   {0.0313, 0.0189, -0.0328},  {0.0296, -0.0956, -0.0665},
    {-0.3477, -0.4059, -0.2925}, {0.0166, 0.1902, 0.1975},  {-0.0412, 0.0267, -0.1364},
    {-0.1293, 0.0740, 0.1636},  {0.0680, 0.3019, 0.1128},   {0.0032, 0.0581, 0.0639},
    {-0.1251, 0.0927, 0.1699},  {0.0060, -0.0633, 0.0005},  {0.3477, 0.2275, 0.2950},
    {0.1984, 0.0913, 0.1861},
};
const double rank_preview_rgb_bias[3] = {-0.1835, -0.0868, -0.3360};

int64_t rank_preview_frame(int64_t k, int64_t tiles, int64_t f) {
  if (tiles < 2) return 0;
  /* round half up of k (f - 1) / (tiles - 1), in integers */
  return (2 * k * (f - 1) + (tiles - 1)) / (2 * (tiles - 1));
}

static uint8_t to_byte(double v) {
  double u = (v + 1.0) / 2.0; /* ComfyUI: the factors map to [-1, 1] */
  if (!(u > 0.0)) return 0;   /* also NaN */
  if (u >= 1.0) return 255;
  return (uint8_t)(u * 255.0); /* truncation, as torch .to(uint8) */
}

/* The colour of latent position pos (offset inside one channel) into px. */
static void colour(const float *lat, int64_t plane, int64_t pos, uint8_t px[3]) {
  double rgb[3] = {rank_preview_rgb_bias[0], rank_preview_rgb_bias[1], rank_preview_rgb_bias[2]};
  for (int c = 0; c < RANK_PREVIEW_CHANNELS; c++) {
    const double v = (double)lat[c * plane + pos];
    for (int k = 0; k < 3; k++) rgb[k] += v * rank_preview_rgb_factors[c][k];
  }
  for (int k = 0; k < 3; k++) px[k] = to_byte(rgb[k]);
}

/* The grid of the preview.h comment. */
typedef struct preview_grid {
  int64_t f, h, w; /* the latents' frames, rows, columns */
  int64_t scale;   /* rank_preview_scale */
  int64_t tiles, cols, rows;
  int64_t width, height; /* the image's pixels */
} preview_grid;

static void grid_of(int64_t f, int64_t h, int64_t w, int64_t scale, preview_grid *g) {
  g->f = f, g->h = h, g->w = w, g->scale = scale;
  g->tiles = f < RANK_PREVIEW_TILES ? f : RANK_PREVIEW_TILES;
  g->cols = g->tiles < RANK_PREVIEW_TILES ? g->tiles : RANK_PREVIEW_COLS;
  g->rows = (g->tiles + g->cols - 1) / g->cols;
  g->width = g->cols * w * scale;
  g->height = g->rows * h * scale;
}

int64_t rank_preview_scale(int64_t f, int64_t h, int64_t w) {
  if (f < 1 || h < 1 || w < 1 || h > RANK_PREVIEW_MAX_PIXELS || w > RANK_PREVIEW_MAX_PIXELS)
    return 0;
  for (int64_t s = RANK_PREVIEW_SCALE; s >= 1; s /= 2) {
    preview_grid g;
    grid_of(f, h, w, s, &g);
    if (g.width <= RANK_PREVIEW_MAX_PIXELS / g.height) return s;
  }
  return 0;
}

/* Fills rgb (height, width, 3): every tile of the grid holds a frame. */
static void render(const float *lat, const preview_grid *g, uint8_t *rgb) {
  const int64_t plane = g->f * g->h * g->w, s = g->scale;
  for (int64_t k = 0; k < g->tiles; k++) {
    const int64_t fi = rank_preview_frame(k, g->tiles, g->f);
    const int64_t y0 = (k / g->cols) * g->h * s, x0 = (k % g->cols) * g->w * s;
    for (int64_t y = 0; y < g->h; y++) {
      uint8_t *row = rgb + ((y0 + y * s) * g->width + x0) * 3;
      for (int64_t x = 0; x < g->w; x++) {
        uint8_t px[3];
        colour(lat, plane, (fi * g->h + y) * g->w + x, px);
        for (int64_t r = 0; r < s; r++) memcpy(row + (x * s + r) * 3, px, 3);
      }
      for (int64_t r = 1; r < s; r++) /* the pixel rows below repeat the first */
        memcpy(row + r * g->width * 3, row, (size_t)(g->w * s * 3));
    }
  }
}

int rank_preview_write_png(const char *path, const float *latents, int64_t c, int64_t f,
                           int64_t h, int64_t w) {
  if (c != RANK_PREVIEW_CHANNELS) {
    sp_log_error("%s: preview needs latents with %d channels, got %lld", path,
                 RANK_PREVIEW_CHANNELS, (long long)c);
    return SP_ERR_INPUT;
  }
  const int64_t scale = rank_preview_scale(f, h, w);
  if (scale == 0) {
    sp_log_error("%s: preview of latents [16,%lld,%lld,%lld] has an empty or too large "
                 "image (at most %lld pixels)", path, (long long)f, (long long)h, (long long)w,
                 (long long)RANK_PREVIEW_MAX_PIXELS);
    return SP_ERR_INPUT;
  }
  preview_grid g;
  grid_of(f, h, w, scale, &g);
  char tmp[4200];
  int rc = rank_atomic_begin(path, tmp, sizeof tmp);
  if (rc != SP_OK) return rc; /* logged there */
  uint8_t *rgb = sp_xmalloc((size_t)(g.width * g.height * 3));
  render(latents, &g, rgb);
  rc = video_png_write(path, tmp, rgb, g.width, g.height); /* logs its failure */
  free(rgb);
  if (rc != SP_OK) {
    rank_atomic_abort(tmp);
    return rc;
  }
  return rank_atomic_commit(tmp, path); /* logs its own failure */
}
