/* Video to latents: the VAE encoder's driver, written once over the VAE's
 * backend table (wan_vae_backend.h: the CPU's or the CUDA one's, by
 * vae_encode_opts.dev). `staticpipe encode --vae` is this on an image or a
 * video file; an image-to-video run is this on its prepared image.
 *
 * Everything that can be refused is refused first (vae_encode_check: the
 * VAE has the encoder, the video's shape; vae_encode_check_device: a CUDA
 * encoder fits the device), then the weights are read, then the chunks
 * are encoded and their latents assembled.
 *
 * The CUDA encoder is not tiled. A video that does not fit is refused
 * with the memory it needs: tiles would change the latents near and across
 * every seam (the middle attention spans the whole latent frame), and
 * those latents condition every later sampling step, where a tiled
 * decode's seams touch only the pixels of its output; the published
 * encoder is not tiled either, and at 720p it needs less device memory
 * than any GPU that runs the DiT has (VAE.md "The encoder"). */
#ifndef WAN_VAE_ENCODE_H
#define WAN_VAE_ENCODE_H

#include <stdint.h>

#include "net.h"
#include "vae_file.h"
#include "wan_vae_gpu.h"

typedef struct vae_encode_opts {
  const char *vae;                 /* VAE model: file or synth:PRESET[:SEED] */
  int verify;                      /* check each dataset's checksum as it is read */
  rank_device dev;                 /* cpu, or cuda: the current device */
  wan_vae_gpu_precision precision; /* CUDA: bf16 (default), fp32 or tf32 */
  int quiet;                       /* no per-chunk progress lines */
} vae_encode_opts;

typedef struct vae_encode_stats {
  int64_t frames, height, width; /* of the latents */
  double read_s;                 /* reading (or generating) the weights */
  double encode_s;               /* encoding, weights in place */
  int64_t device_bytes;          /* CUDA: the encoder's one allocation; 0 on the CPU */
  int64_t host_bytes;            /* CPU: the encoder's caches and scratch */
} vae_encode_stats;

/* The video (3, T, H, W) an encoder of VAE m takes, before any work: m
 * holds the encoder; 3 channels; T = 1 + 4k; H and W multiples of the
 * VAE's spatial factor (8), so that the latents decode to the same size,
 * and at most WAN_VAE_MAX_PIXELS. Logs one line naming what ("--image
 * x.png") and the check. SP_OK or SP_ERR_INPUT. */
int vae_encode_check(const vae_model *m, const char *what, const int64_t *dims);

/* On CUDA: the device (a backend in this build) and the encoder's layout
 * (wan_vae_gpu_enc_bytes) within the current device's free memory less
 * WAN_VAE_GPU_SLACK_BYTES; refused with the bytes needed and free
 * otherwise. SP_OK or SP_ERR_INPUT (logged). */
int vae_encode_check_device(const vae_encode_opts *o, const vae_model *m, const int64_t *dims);

/* Encodes video (3, T, H, W) in [-1, 1] (checked by the two above) with
 * VAE m into latents (z_dim, 1 + (T - 1) / 4, H / 8, W / 8), normalised
 * as Wan2_1_VAE.encode does; the encoder's weights read for this call.
 * SP_OK, SP_ERR_INPUT or SP_ERR_RUNTIME (logged). */
int vae_encode_run(const vae_encode_opts *o, vae_model *m, const float *video,
                   const int64_t *dims, float *latents, vae_encode_stats *stats);

#endif
