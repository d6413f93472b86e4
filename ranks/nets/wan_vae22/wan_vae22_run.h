/* The Wan 2.2 VAE's driver, written once over its backend table
 * (wan_vae22_backend.h: the CPU's or the CUDA one's, by the options'
 * device): latents to video, feeding a video output (video_out.h) chunk by
 * chunk, and video to latents.
 *
 * The decode takes the options and reports the statistics of the Wan 2.1
 * decoder's driver (wan_vae_decode.h: decode_opts, decode_stats), so
 * `staticpipe decode` drives either VAE the same way; the encode's API has
 * the same shape. Everything that can be refused is refused first (the
 * latents' or the video's shape against the VAE, every output path,
 * FFmpeg for a video file, the device), then the part's weights are read,
 * then the work runs. */
#ifndef WAN_VAE22_RUN_H
#define WAN_VAE22_RUN_H

#include <stdint.h>

#include "net.h"
#include "wan_vae22_file.h"
#include "wan_vae_decode.h"
#include "wan_vae_gpu.h"

/* ---- decode ---------------------------------------------------------------- */

/* The latents' shape the decoder of VAE m takes: (z_dim, F, h, w), F >= 1,
 * h and w in 1..WAN_VAE22_MAX_SIDE. Logs one line naming what (e.g.
 * "--latents L.h5") and the check. */
int wan_vae22_check_latents(const wan_vae22_model *m, const char *what, int ndim,
                            const int64_t *dims);

/* The checks of the outputs before any work (each path, FFmpeg), of the
 * options the decoder does not take (--tile) and of the device's backend. */
int wan_vae22_check_outputs(const decode_opts *o, const wan_vae22_model *m, const int64_t *dims);

/* Decodes latents (z_dim, F, h, w) with the opened VAE into the outputs
 * of o (its decoder's weights read for this one call; o->vae is not
 * read). Returns SP_OK, SP_ERR_INPUT or SP_ERR_RUNTIME (logged); no output
 * is left behind on failure. */
int wan_vae22_decode_run(const decode_opts *o, wan_vae22_model *m, const float *latents,
                         const int64_t *dims, decode_stats *stats);

/* ---- encode ---------------------------------------------------------------- */

typedef struct wan_vae22_encode_opts {
  rank_device dev;                 /* cpu, or cuda: the current device */
  wan_vae_gpu_precision precision; /* CUDA: bf16 (default) or fp32 */
  int quiet;                       /* no progress lines */
} wan_vae22_encode_opts;

typedef struct wan_vae22_encode_stats {
  int64_t dims[4];           /* of the latents: (z_dim, F, h, w) */
  double read_s;             /* reading (or generating) the encoder's weights */
  double encode_s;           /* encoding, weights in place */
  int64_t device_peak_bytes; /* CUDA: the encoder's one allocation; 0 on the CPU */
  int64_t host_bytes;        /* CPU: the encoder's caches and scratch */
} wan_vae22_encode_stats;

/* The video's shape the encoder of VAE m takes: (3, T, H, W), T = 1 + 4k,
 * H and W positive multiples of the space factor (16); into ldims (may be
 * NULL) the latents' (z_dim, 1 + k, H/16, W/16). Logs one line naming what
 * and the check. */
int wan_vae22_check_video(const wan_vae22_model *m, const char *what, int ndim,
                          const int64_t *dims, int64_t *ldims);

/* Encodes video (3, T, H, W) in [-1, 1] (checked by
 * wan_vae22_check_video) into latents (the ldims it gives, host fp32),
 * normalised as the published Wan2_2_VAE.encode does; the encoder's weights
 * read for this one call. SP_OK, SP_ERR_INPUT or SP_ERR_RUNTIME (logged). */
int wan_vae22_encode_run(const wan_vae22_encode_opts *o, wan_vae22_model *m, const float *video,
                         const int64_t *dims, float *latents, wan_vae22_encode_stats *stats);

#endif
