/* Latents to video: the VAE decoder's driver, written once over its
 * backend table (wan_vae_backend.h: the CPU's or the CUDA one's, by
 * decode_opts.dev), feeding a video output (video_out.h) chunk by chunk:
 * the tiling, the precision, the frames to the video writer. `staticpipe decode` is this on a latents
 * file; `run --vae --video` is this on the latents a job has just made.
 *
 * The order is what a user wants from a long job: everything that can be
 * refused is refused first (decode_check: the VAE, the latents' shape and
 * values, every output path, FFmpeg when a video file is asked for), then
 * the weights are read, then frames are decoded and written as they come,
 * with progress in the log. */
#ifndef WAN_VAE_DECODE_H
#define WAN_VAE_DECODE_H

#include <stdint.h>

#include "net.h"
#include "vae_file.h"
#include "video_out.h"
#include "wan_vae_gpu.h"

typedef struct decode_opts {
  const char *vae;        /* VAE model: file or synth:PRESET[:SEED] */
  int verify;             /* check each dataset's checksum as it is read */
  rank_device dev;        /* cpu, or cuda: the current device (in run, the rank's GPU,
                             made current by its stage) */
  wan_vae_gpu_precision precision; /* CUDA: bf16 (default) or fp32 */
  const char *out;        /* video file (.mp4 .mkv .mov .webm .h5) or NULL */
  const char *frames_dir; /* directory of PNG frames or NULL */
  double fps;
  int quiet;              /* no per-chunk progress lines */
  int64_t tile_h, tile_w; /* --tile: decode in tiles of this many latent positions (VAE.md
                             "Tiling"); 0: tiles only when the CUDA decoder does not fit the
                             device's free memory, of the size the planner picks */
  int64_t tile_overlap;   /* with tile_h: least overlap of tiles, latent positions */
} decode_opts;

typedef struct decode_stats {
  int64_t frames, height, width; /* of the video */
  double read_s;                 /* reading (or generating) the weights */
  double decode_s;               /* decoding and writing, weights in place */
  int64_t device_peak_bytes;     /* CUDA: the decoder's peak; 0 on the CPU */
  int64_t host_bytes;            /* CPU: the decoder's caches and scratch; tiled: plus the
                                    blended video */
  int64_t tiles_y, tiles_x;      /* tiles down and across (1, 1 untiled) */
  int64_t tile_h, tile_w;        /* latent positions of a tile (the latent's untiled) */
} decode_stats;

/* ---- the steps every Wan VAE's decode driver takes (wan_vae_decode_out.c) ---- */

/* The first checks of latents (dims, ndim of them) for a decoder of z_dim
 * channels: 4 dimensions, z_dim channels. The message names what (e.g.
 * "--latents L.h5"), the VAE as noun ("VAE") and source, then note (or
 * ""). SP_OK or SP_ERR_INPUT (logged). */
int decode_check_latent_shape(const char *what, int ndim, const int64_t *dims, int64_t z_dim,
                              const char *noun, const char *source, const char *note);
/* The checks of the outputs o names (at least one; each path, FFmpeg) for
 * a video of width x height pixels. */
int decode_check_video_outputs(const decode_opts *o, int64_t width, int64_t height);

/* The outputs of a decode as one frame sink: every output o names in turn,
 * and a progress line per chunk (unless o->quiet). */
typedef struct decode_out {
  video_out *v[2];
  int n;
  int64_t chunk, chunks, frames; /* chunks: latent frames; frames: of the video */
  double t0;                     /* when the decode began (comm_now), the caller's to set */
  int quiet;
} decode_out;

/* Opens every output for the video of st (frames, width, height) decoded
 * from chunks latent frames; on failure those opened are aborted. */
int decode_out_open(const decode_opts *o, const decode_stats *st, int64_t chunks,
                    decode_out *out);
/* The sink (a wan_vae_frames_fn, user a decode_out). */
int decode_out_put(void *user, const float *frames, int64_t t0, int64_t n);
/* Commits the outputs one after the other (each rename puts one complete
 * output in place: a failure of the second leaves the first), then aborts
 * any left (after a failed decode or commit: nothing is left behind). A
 * second close does nothing. */
int decode_out_close(decode_out *k, int rc);

/* ---- the Wan 2.1 VAE's decode --------------------------------------------- */

/* The latents' shape a decoder of VAE m takes: (z_dim, F, h, w), F >= 1.
 * Logs one line naming what (e.g. "--latents L.h5") and the check. */
int decode_check_latents(const vae_model *m, const char *what, int ndim, const int64_t *dims);

/* The checks of the outputs before any work (each path, FFmpeg) and of
 * the tiling asked for. */
int decode_check_outputs(const decode_opts *o, const vae_model *m, const int64_t *dims);

/* The VAE's weights in the decoder's table layout, read once (one log line:
 * megabytes and seconds) and used by any number of decodes (run's jobs).
 * SP_OK or SP_ERR_RUNTIME / SP_ERR_INPUT (logged); *out untouched on
 * failure. */
typedef struct decode_weights decode_weights;
int decode_weights_read(vae_model *m, decode_weights **out);
void decode_weights_free(decode_weights *d);

/* decode_run with weights read before (decode_weights_read of m). */
int decode_run_with(const decode_opts *o, vae_model *m, decode_weights *d, const float *latents,
                    const int64_t *dims, decode_stats *stats);

/* Decodes latents (z_dim, F, h, w) with the opened VAE into the outputs
 * (its weights read for this one call).
 * Returns SP_OK, SP_ERR_INPUT or SP_ERR_RUNTIME (logged); no output is
 * left behind on failure. */
int decode_run(const decode_opts *o, vae_model *m, const float *latents, const int64_t *dims,
               decode_stats *stats);

#endif
