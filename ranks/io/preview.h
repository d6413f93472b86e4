/* Latent preview: an RGB PNG of the latent frames side by side, so a person
 * can see a result without a VAE.
 *
 * Each latent position (c, f, y, x) maps to pixel (row y, column f*W + x),
 * one pixel per position. The colour is ComfyUI's fixed linear Wan 2.1 latent
 * preview (comfy/latent_formats.py, class Wan21, latent_rgb_factors and
 * latent_rgb_factors_bias; comfy latent_preview.py preview_to_image):
 *   rgb_k = bias_k + sum_c latent_c * factor[c][k]      (double here)
 *   byte  = trunc(255 * clamp((rgb_k + 1) / 2, 0, 1))   (NaN -> 0)
 * The PNG is 8-bit RGB, no interlace, filter 0 on every row, in a zlib stream
 * of stored (uncompressed) deflate blocks; no libpng / zlib dependency. */
#ifndef RANK_PREVIEW_H
#define RANK_PREVIEW_H

#include <stdint.h>

#define RANK_PREVIEW_CHANNELS 16

/* ComfyUI's Wan 2.1 factors: factor[c][k] for latent channel c, colour k. */
extern const double rank_preview_rgb_factors[RANK_PREVIEW_CHANNELS][3];
extern const double rank_preview_rgb_bias[3];

/* Writes the preview of latents (C=c, F=f, H=h, W=w; float32, C-order) to
 * path atomically (ranks/io/atomic_file.h: a temporary beside path, renamed at
 * the end; nothing is left behind on failure). c must be 16 and the image
 * (f*w by h) must fit PNG's 2^31-1 limits and memory.
 * Returns SP_OK, SP_ERR_INPUT (bad shape or unwritable path; logged) or
 * SP_ERR_RUNTIME (a write failed; logged). */
int rank_preview_write_png(const char *path, const float *latents, int64_t c, int64_t f,
                           int64_t h, int64_t w);

#endif
