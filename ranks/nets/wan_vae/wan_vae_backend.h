/* The VAE's backend table (net.h): what the decode driver
 * (wan_vae_decode.c) and the encode driver (wan_vae_encode.c) ask of a
 * backend. The CPU's is wan_vae_cpu.c
 * (wan_vae_cpu), the CUDA one's cuda/wan_vae_gpu.c (wan_vae_cuda). */
#ifndef WAN_VAE_BACKEND_H
#define WAN_VAE_BACKEND_H

#include <stdint.h>

#include "wan_vae.h"
#include "wan_vae_enc.h"
#include "wan_vae_gpu.h"

/* What a decoder is made from. */
typedef struct wan_vae_make {
  const wan_vae_config *config;
  const wan_vae_weights *weights; /* bound through the table of config into packed */
  const float *packed;            /* (wan_vae_table.packed_floats) host fp32 */
  int64_t h, w;                   /* the latent size (of a tile when tiled) */
  wan_vae_gpu_precision precision; /* CUDA: bf16 or fp32 (the CPU decodes in fp32) */
} wan_vae_make;

/* What an encoder is made from. */
typedef struct wan_vae_enc_make {
  const wan_vae_config *config;       /* config->encoder set */
  const wan_vae_enc_weights *weights; /* bound through the encoder table into packed */
  const float *packed;                /* (the encoder table's packed_floats) host fp32 */
  int64_t T, H, W;                    /* the videos: frames (1 sizes a CUDA encoder for
                                       * single images) and size */
  wan_vae_gpu_precision precision;    /* CUDA: bf16 or fp32 (the CPU encodes in fp32) */
} wan_vae_enc_make;

typedef struct wan_vae_backend {
  /* A decoder of latents of a->h x a->w (on CUDA: the current device; the
   * weights are copied there). SP_OK, or SP_ERR_INPUT / SP_ERR_RUNTIME
   * (logged). a's weights must outlive the decoder. */
  int (*create)(const wan_vae_make *a, void **out);
  void (*destroy)(void *d);
  /* wan_vae_decode_stream: latents (z_dim, F, h, w) on the host; fn gets
   * each chunk's clamped frames (3, n, H, W), host fp32. 0 or fn's stop
   * code. */
  int (*decode)(void *d, const float *latents, int64_t F, wan_vae_frames_fn fn, void *user);
  /* The decoder's own memory: host bytes (the CPU's caches and scratch)
   * and device bytes (the CUDA decoder's one allocation). */
  int64_t (*host_bytes)(const void *d);
  int64_t (*device_bytes)(const void *d);

  /* The encoder (wan_vae_enc.h): made for videos of a->H x a->W, as
   * create; encode is wan_vae_encode_stream (video (3, T, H, W) host fp32
   * in [-1, 1], fn gets each chunk's normalised latents (z_dim, n, h, w),
   * host fp32); its memory as host_bytes and device_bytes. */
  int (*enc_create)(const wan_vae_enc_make *a, void **out);
  void (*enc_destroy)(void *e);
  int (*encode)(void *e, const float *video, int64_t T, wan_vae_latents_fn fn, void *user);
  int64_t (*enc_host_bytes)(const void *e);
  int64_t (*enc_device_bytes)(const void *e);
} wan_vae_backend;

#endif
