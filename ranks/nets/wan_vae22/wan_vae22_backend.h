/* The Wan 2.2 VAE's backend table (net.h): what its driver (wan_vae22_run.c)
 * asks of a backend. The CPU's is wan_vae22_cpu.c (wan_vae22_cpu), the CUDA
 * one's cuda/wan_vae22_gpu.c (wan_vae22_cuda). A coder is one part, the
 * encoder or the decoder, made for one size. */
#ifndef WAN_VAE22_BACKEND_H
#define WAN_VAE22_BACKEND_H

#include <stdint.h>

#include "wan_vae22.h"
#include "wan_vae_gpu.h"

/* What a coder is made from. */
typedef struct wan_vae22_make {
  const wan_vae22_config *config;
  wan_vae22_part part;
  const wan_vae22_weights *weights; /* the part's, bound through its table into packed */
  const float *packed;              /* (the part's table packed_floats) host fp32 */
  int64_t h, w; /* decoder: the latent size; encoder: the video's, in pixels */
  wan_vae_gpu_precision precision; /* CUDA: bf16 or fp32 (the CPU computes in fp32) */
} wan_vae22_make;

typedef struct wan_vae22_backend {
  /* A coder of a->part for a->h x a->w (on CUDA: the current device; the
   * weights are copied there). SP_OK, or SP_ERR_INPUT / SP_ERR_RUNTIME
   * (logged). a's weights must outlive the coder. */
  int (*create)(const wan_vae22_make *a, void **out);
  void (*destroy)(void *d);
  /* A decoder's wan_vae22_decode_stream: latents (z_dim, F, h, w) on the
   * host; fn gets each chunk's clamped frames (3, n, H, W), host fp32. 0 or
   * fn's stop code. */
  int (*decode)(void *d, const float *latents, int64_t F, wan_vae_frames_fn fn, void *user);
  /* An encoder's wan_vae22_encode: video (3, T, H, W) host fp32 in [-1,
   * 1], T = 1 + 4k -> latents (z_dim, 1 + k, H/16, W/16) host fp32. SP_OK
   * or a logged status. */
  int (*encode)(void *e, const float *video, int64_t T, float *latents);
  /* The coder's own memory: host bytes (the CPU's caches and scratch) and
   * device bytes (the CUDA coder's one allocation). */
  int64_t (*host_bytes)(const void *d);
  int64_t (*device_bytes)(const void *d);
} wan_vae22_backend;

#endif
