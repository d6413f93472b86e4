/* Latent preview: an RGB PNG of a few latent frames at the video's size, so
 * a person can see a result without a VAE.
 *
 * The colour of a latent position (c, f, y, x) is ComfyUI's fixed linear
 * Wan 2.1 latent preview (comfy/latent_formats.py, class Wan21,
 * latent_rgb_factors and latent_rgb_factors_bias; comfy latent_preview.py
 * preview_to_image):
 *   rgb_k = bias_k + sum_c latent_c * factor[c][k]      (double here)
 *   byte  = trunc(255 * clamp((rgb_k + 1) / 2, 0, 1))   (NaN -> 0)
 *
 * The image is a grid of RANK_PREVIEW_TILES frames at most, evenly spread
 * over the clip (rank_preview_frame: the first and the last always among
 * them), each upscaled by rank_preview_scale (the VAE's spatial factor 8,
 * halved while the image would exceed RANK_PREVIEW_MAX_PIXELS) with
 * nearest-neighbour pixels: a clip of fewer frames than tiles is one row of
 * all its frames, else RANK_PREVIEW_COLS columns. Tile k (row k / cols,
 * column k % cols) holds frame rank_preview_frame(k, tiles, F); its pixel
 * (y, x) is latent position (y / scale, x / scale). Written by libpng (8-bit
 * RGB, no interlace). */
#ifndef RANK_PREVIEW_H
#define RANK_PREVIEW_H

#include <stdint.h>

#define RANK_PREVIEW_CHANNELS 16
#define RANK_PREVIEW_SCALE 8
#define RANK_PREVIEW_TILES 4
#define RANK_PREVIEW_COLS 2
#define RANK_PREVIEW_MAX_PIXELS ((int64_t)1 << 26)

/* ComfyUI's Wan 2.1 factors: factor[c][k] for latent channel c, colour k. */
extern const double rank_preview_rgb_factors[RANK_PREVIEW_CHANNELS][3];
extern const double rank_preview_rgb_bias[3];

/* The latent frame of tile k (0 <= k < tiles) among f frames: round(k (f -
 * 1) / (tiles - 1)) for tiles > 1, else 0; tiles = min(f,
 * RANK_PREVIEW_TILES). */
int64_t rank_preview_frame(int64_t k, int64_t tiles, int64_t f);

/* The upscale factor of the preview of latents with f frames of h x w:
 * RANK_PREVIEW_SCALE, halved while the image exceeds RANK_PREVIEW_MAX_PIXELS;
 * 0 when even 1 does (or a size is below 1). */
int64_t rank_preview_scale(int64_t f, int64_t h, int64_t w);

/* Writes the preview of latents (C=c, F=f, H=h, W=w; float32, C-order) to
 * path atomically (ranks/io/atomic_file.h: a temporary beside path, renamed at
 * the end; nothing is left behind on failure). c must be 16 and the image
 * must fit PNG's 2^31-1 limits and memory.
 * Returns SP_OK, SP_ERR_INPUT (bad shape or unwritable path; logged) or
 * SP_ERR_RUNTIME (a write failed; logged). */
int rank_preview_write_png(const char *path, const float *latents, int64_t c, int64_t f,
                           int64_t h, int64_t w);

#endif
