/* Spatial tiling of the VAE decode (VAE.md "Tiling"): latents (z_dim, F,
 * h, w) decoded as overlapping tiles of th x tw latent positions, each tile
 * through the whole decoder over all F frames (its own causal caches, from
 * empty), the tiles' videos blended in pixel space with linear ramps over
 * the overlaps. For a latent whose decoder does not fit the memory at hand;
 * the result differs from the untiled decode near and across the seams
 * (the middle attention sees only its tile), by the amounts VAE.md states.
 *
 * The tiles' grid is the planner's (plan_vae_tile_count, plan_vae_tile_start
 * in planner/vae_layout.h): all tiles the same size, so one decoder made for
 * th x tw serves every tile, on either backend. */
#ifndef WAN_VAE_TILE_H
#define WAN_VAE_TILE_H

#include <stddef.h>
#include <stdint.h>

#include "wan_vae.h"

typedef struct wan_vae_tiling {
  int64_t th, tw;  /* tile size, latent positions (th >= h: one tile down) */
  int64_t overlap; /* least overlap of neighbouring tiles, latent positions */
} wan_vae_tiling;

/* A decoder made for th x tw latents, run on one tile: latents (z_dim, F,
 * th, tw); fn gets the clamped frames as wan_vae_decode_stream gives them.
 * Returns 0 or fn's stop code. */
typedef int (*wan_vae_tile_decode_fn)(void *decoder, const float *latents, int64_t F,
                                      wan_vae_frames_fn fn, void *user);

/* Checks a tiling of latents h x w: sides of at least 1, overlap 0 or more
 * and below each side that is split (th < h needs overlap < th). Returns 0,
 * or -1 with one line in err naming the check. */
int wan_vae_tiling_check(int64_t h, int64_t w, const wan_vae_tiling *t, char *err,
                         size_t errlen);

/* Tiles down and across (the planner's grid). */
void wan_vae_tiling_grid(int64_t h, int64_t w, const wan_vae_tiling *t, int64_t *ny,
                         int64_t *nx);

/* Host bytes the tiled decode holds besides the decoder: the whole video
 * (fp32) it blends into, a tile's latents and one chunk of frames. */
int64_t wan_vae_tiled_host_bytes(const wan_vae_config *c, int64_t F, int64_t h, int64_t w,
                                 const wan_vae_tiling *t);

/* Decodes latents (z_dim, F, h, w) tile by tile with decode(decoder, ...)
 * (a checked tiling; decoder made for t->th x t->tw, clamped to h x w),
 * then hands the blended video to fn chunk by chunk, as
 * wan_vae_decode_stream does (chunk 0 one frame, later chunks
 * wan_vae_out_frames(c, 2) - 1). With one tile the video is the untiled
 * decode's, bit for bit. Returns 0, fn's or decode's stop code, or
 * SP_ERR_RUNTIME (out of host memory, logged). */
int wan_vae_decode_tiled(const wan_vae_config *c, const float *latents, int64_t F, int64_t h,
                         int64_t w, const wan_vae_tiling *t, wan_vae_tile_decode_fn decode,
                         void *decoder, wan_vae_frames_fn fn, void *user);

#endif
