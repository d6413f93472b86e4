/* Image to video in the run (I2V.md "I2V-A14B", "TI2V-5B"): each job's
 * image (--image, image=) read and prepared as the published pipeline of
 * the model's task prepares it (io/image_prep.h), encoded by --vae's
 * encoder on rank 0 before the model is placed (as the prompts are:
 * job_prompt.c), or its latents read (--image-latents); the job's size
 * (and frames) set from it; the conditioning kept on rank 0 until the job
 * runs:
 *
 *   I2V  (in_dim 2 out_dim + 4): y = [mask (4); latents (out_dim)]
 *        (4 + out_dim, F, lat_h, lat_w), the video of the resized image
 *        and frames - 1 zero frames encoded; stage 0 concatenates it after
 *        the latent before the patch embedding, every step;
 *   TI2V (48/48): z (48, 1, lat_h, lat_w), the image alone encoded; the
 *        last stage copies it into latent frame 0 before the first step
 *        and after every step, and the tokens of that frame take timestep
 *        0 (pipeline.h, rank_job.frame0).
 *
 * The session's part is job_session_impl.h's (job_images_prepare,
 * job_image_inputs); the mask, y and I2V's video are here for their test
 * (tests/io/image_prep_dump.c). */
#ifndef JOB_IMAGE_H
#define JOB_IMAGE_H

#include <stdint.h>

#include "image_prep.h"
#include "job_params.h"
#include "wan_config.h"

/* Every job's conditioning on rank 0 (job_image.c). */
typedef struct job_images job_images;
void job_images_free(job_images *im);

/* The size of job j's video from its image (j->image) on a model of
 * config c, as the run prepares it (I2V: 8 x the latent grid of
 * --max-area; TI2V: the size rule of multiples of 32), into j->height
 * and j->width; the image is read, nothing is encoded (plan uses it).
 * SP_OK or SP_ERR_INPUT (logged, naming what). */
int job_image_size(const wan_config *c, const char *what, job_spec *j);

/* Where a run encodes a job's image and what that needs (plan prints it,
 * as it prints the text encoder's): rank 0, before the model is placed;
 * the VAE's encoder on the rank's GPU when the run is on CUDA (its one
 * allocation, weights and workspace), and rank 0's host memory for the
 * video it encodes (I2V: the resized image and frames - 1 zero frames,
 * TI2V: the image alone) and the latents. */
typedef struct job_image_cost {
  const char *vae;               /* "Wan 2.1 VAE" or "Wan 2.2 VAE" */
  int can_encode;                /* the VAE holds its encoder (job_vae_can_encode) */
  uint64_t device_bytes;         /* the CUDA encoder's; 0 when unknown */
  uint64_t host_bytes;           /* the video and its latents */
  int64_t frames, height, width; /* the video encoded */
} job_image_cost;
/* The cost of job j's image (its size set: job_image_size) with the VAE
 * spec vae (metadata only) on a model of config c (named model), for the
 * CUDA encoder in precision p. SP_OK or the VAE's open status (logged). */
int job_image_cost_of(const char *vae, const wan_config *c, const char *model,
                      const job_spec *j, wan_vae_gpu_precision p, job_image_cost *out);

/* How an image is prepared into the encoder's video (job_image_video). */
typedef struct job_image_prep {
  int64_t max_area;      /* the area rule's pixels; 0: the task's default */
  int64_t height, width; /* nonzero: this size instead of the area rule's (encode
                          * --size: a stream's planned size; I2V multiples of
                          * 16, TI2V of 32, checked by the caller) */
  int64_t frames;        /* the job's frames: I2V's video holds them; TI2V's
                          * is the image alone (its workload is checked) */
} job_image_prep;
/* The VAE encoder's video of image im on a model of config c (I2V or
 * TI2V), as the run prepares it (--image, image=; encode --vae --model
 * calls it too): I2V job_i2v_video (with a given size, the bicubic resize
 * to it), TI2V the size rule, LANCZOS and the centre crop
 * (rank_image_ti2v_prepare; with a given size rank_image_ti2v_cover),
 * into *video (3, T, H, W) in [-1, 1], allocated, and dims. SP_OK,
 * SP_ERR_INPUT (the size rule, the workload; logged naming what) or
 * SP_ERR_RUNTIME. */
int job_image_video(const wan_config *c, const char *what, const rank_image *im,
                    const job_image_prep *p, float **video, int64_t dims[4]);

/* The mask channels of y for frames video frames (4k + 1) and a latent of
 * h x w, into mask (4, F, h, w), F = 1 + (frames - 1) / 4, as
 * WanI2V.generate builds it: a mask of frames rows (1 for frame 0, 0
 * after), row 0 repeated 4 times (frames + 3 rows), regrouped 4 rows per
 * latent frame and moved to the channel axis, so channel c of latent frame
 * f is row 4 f + c: ones in all 4 channels of latent frame 0 only. */
void job_i2v_mask(int64_t frames, int64_t h, int64_t w, float *mask);
/* I2V's y = [mask (4); latents (channels)] for frames video frames:
 * latents (channels, F, h, w) into y (4 + channels, F, h, w). */
void job_i2v_condition(int64_t frames, int64_t channels, const float *latents, int64_t h,
                       int64_t w, float *y);
/* I2V-A14B's video of image im, the VAE encoder's input (I2V.md steps 1-2):
 * [-1, 1], the latent grid lat_h x lat_w of max_area and the image's
 * aspect ratio, the bicubic resize to 8 lat_h x 8 lat_w, then frames - 1
 * zero frames: into *video (3, frames, 8 lat_h, 8 lat_w), allocated, and
 * dims. SP_OK or SP_ERR_INPUT (a grid without a token, a video past the
 * limits; logged naming what). */
int job_i2v_video(const char *what, const rank_image *im, int64_t max_area, int64_t frames,
                  float **video, int64_t dims[4]);

#endif
