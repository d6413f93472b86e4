/* The run's VAE (--vae): the Wan 2.1 VAE (16 latent channels: text to
 * video, I2V-A14B) or the Wan 2.2 VAE (48: TI2V-5B), told apart by the file
 * (or the synth: preset) and checked against the model's latents before
 * any work. It decodes a job's latents into its video (the last rank) and
 * encodes the image of an image-to-video job (rank 0, before the model is
 * placed: job_image.c). Each family's driver does the work
 * (wan_vae_decode.h and wan_vae_encode.h, wan_vae22_run.h). */
#ifndef JOB_VAE_H
#define JOB_VAE_H

#include <stdint.h>

#include "model_id.h"
#include "plan.h"
#include "wan_config.h"
#include "wan_vae_decode.h"

typedef struct job_vae job_vae;

/* Opens spec (what names it: "--vae") for a model of config c (named
 * model): its family must make the model's latents (z_dim = out_dim; 48
 * channels are the Wan 2.2 VAE's). SP_OK, or the open's or the check's
 * status (logged); *out NULL on failure. */
int job_vae_open(const char *what, const char *spec, int verify, const wan_config *c,
                 const char *model, job_vae **out);
void job_vae_close(job_vae *v);

/* The checks of a decode of latents lat (out_dim, F, h, w) into d's
 * outputs before any work (the paths, FFmpeg, the device). */
int job_vae_check_outputs(const job_vae *v, const decode_opts *d, const int64_t lat[4]);
/* Decodes latents lat into d's outputs (the Wan 2.1 decoder's weights read
 * at the first call and kept; the Wan 2.2 decoder's read per call). */
int job_vae_decode(job_vae *v, const decode_opts *d, const float *latents, const int64_t lat[4],
                   decode_stats *st);
/* Device bytes of the CUDA decoder for the latent of wl (the planner's
 * decoder_bytes on the last rank); 0 when it cannot say. */
uint64_t job_vae_decoder_bytes(const job_vae *v, wan_vae_gpu_precision p,
                               const plan_workload *wl);

/* Device bytes of the CUDA encoder for a video of T frames of H x W (its
 * one allocation: weights and workspace); 0 when it cannot say (a Wan 2.1
 * VAE file without the encoder, a size the encoder refuses). */
uint64_t job_vae_encoder_bytes(const job_vae *v, int64_t T, int64_t H, int64_t W,
                               wan_vae_gpu_precision p);
/* "Wan 2.1 VAE" or "Wan 2.2 VAE". */
const char *job_vae_name(const job_vae *v);
/* The VAE's identity (its file or synth: spec, checksum). */
const model_file_id *job_vae_id(const job_vae *v);

/* 1 when the VAE can encode: the Wan 2.2 VAE, or a Wan 2.1 VAE file that
 * holds the encoder (vae_file.h). */
int job_vae_can_encode(const job_vae *v);
/* Whether the VAE can encode an image (what names the job's flag): SP_OK,
 * or SP_ERR_INPUT after one line saying why not. */
int job_vae_encoder_check(const job_vae *v, const char *what);
/* Encodes video (3, T, H, W) in [-1, 1] into latents (z_dim, 1 + (T - 1)
 * / 4, H / s, W / s), normalised as the published VAE's encode does, on
 * dev (the rank's current GPU for cuda); *bytes the encoder's device bytes
 * (CUDA) or host bytes (CPU). SP_OK, SP_ERR_INPUT or SP_ERR_RUNTIME
 * (logged). */
int job_vae_encode(job_vae *v, rank_device dev, wan_vae_gpu_precision prec, int quiet,
                   const char *what, const float *video, const int64_t dims[4], float *latents,
                   int64_t *bytes);

#endif
