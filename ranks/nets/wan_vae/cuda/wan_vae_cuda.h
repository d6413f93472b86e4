/* The CUDA VAE decoder (wan_vae_gpu.c) and encoder (wan_vae_enc_gpu.c;
 * VAE.md), the VAE's CUDA backend: their functions, which its backend
 * table (wan_vae_backend.h) wraps and the GPU tests call. CUDA builds
 * only. */
#ifndef WAN_VAE_CUDA_H
#define WAN_VAE_CUDA_H

#include <stdint.h>

#include "kern_cuda_vae.h"
#include "wan_vae.h"
#include "wan_vae_backend.h"
#include "wan_vae_enc.h"
#include "wan_vae_gpu.h"

typedef struct wan_vae_gpu wan_vae_gpu;

/* Uploads the weights (packed fp32, wan_vae_table layout of c) to the
 * current device, converting to the precision, and lays out the workspace
 * for latents of h x w. Returns SP_OK, SP_ERR_INPUT (bad config/size:
 * logged) or SP_ERR_RUNTIME (out of device memory: logged with the bytes
 * asked for). */
int wan_vae_gpu_create(const wan_vae_config *c, const float *packed, int64_t h, int64_t w,
                       wan_vae_gpu_precision p, wan_vae_gpu **out);
void wan_vae_gpu_free(wan_vae_gpu *g);

/* As wan_vae_decode_stream: latents (z_dim, F, h, w) on the host; fn gets
 * each chunk's clamped frames (3, n, H, W) on the host, fp32. */
int wan_vae_gpu_decode(wan_vae_gpu *g, const float *latents, int64_t F, wan_vae_frames_fn fn,
                       void *user);

/* Peak device bytes of the last decode: the one device allocation (weights
 * and workspace, wan_vae_gpu_bytes); the cuDNN and cuBLASLt handles' own
 * memory is not in it. */
int64_t wan_vae_gpu_peak_bytes(const wan_vae_gpu *g);

/* on = 1: the decodes that follow time every op with CUDA events (which
 * costs a little time) and the totals restart from zero; on = 0: no
 * timing. */
void wan_vae_gpu_profile(wan_vae_gpu *g, int on);
/* Milliseconds per op kind summed over the decodes since profiling was
 * turned on (zeros when it is off). */
void wan_vae_gpu_profile_ms(const wan_vae_gpu *g, double ms[WAN_VAE_GPU_OPS]);

/* The decoder's kernel context: the convolution shapes it has run and the
 * algorithm of each (kernels/cuda/cuda_vae_conv.h cuda_vae_conv_picks),
 * for the algorithm benchmark (tests/gpu/dev/vae_algo_bench.h). */
const kern_cuda_vae *wan_vae_gpu_kernels(const wan_vae_gpu *g);

/* ---- the encoder (wan_vae_enc_gpu.c) ---------------------------------------- */

typedef struct wan_vae_enc_gpu wan_vae_enc_gpu;

/* Uploads the encoder's weights (packed fp32, the encoder table's layout
 * of c, c->encoder set) to the current device, converting to the
 * precision, and lays out the workspace for videos of H x W: chunks of 4
 * frames, or of 1 when T is 1 (it then encodes single images only).
 * SP_OK, SP_ERR_INPUT (bad config or size: logged) or SP_ERR_RUNTIME (out
 * of device memory: logged with the bytes asked for). */
int wan_vae_enc_gpu_create(const wan_vae_config *c, const float *packed, int64_t T, int64_t H,
                           int64_t W, wan_vae_gpu_precision p, wan_vae_enc_gpu **out);
void wan_vae_enc_gpu_free(wan_vae_enc_gpu *g);

/* As wan_vae_encode_stream: video (3, T, H, W) on the host (T = 1 + 4k;
 * 1 for an encoder made for images); fn gets each chunk's normalised
 * latents (z_dim, n, h, w) on the host, fp32. */
int wan_vae_enc_gpu_encode(wan_vae_enc_gpu *g, const float *video, int64_t T,
                           wan_vae_latents_fn fn, void *user);

/* The one device allocation's bytes (wan_vae_gpu_enc_bytes). */
int64_t wan_vae_enc_gpu_peak_bytes(const wan_vae_enc_gpu *g);

/* Profiling as the decoder's. */
void wan_vae_enc_gpu_profile(wan_vae_enc_gpu *g, int on);
void wan_vae_enc_gpu_profile_ms(const wan_vae_enc_gpu *g, double ms[WAN_VAE_GPU_OPS]);

/* The encoder in the CUDA backend's table (wan_vae_backend.h). */
int wan_vae_gpu_enc_backend_create(const wan_vae_enc_make *a, void **out);
void wan_vae_gpu_enc_backend_destroy(void *e);
int wan_vae_gpu_enc_backend_encode(void *e, const float *video, int64_t T, wan_vae_latents_fn fn,
                                   void *user);
int64_t wan_vae_gpu_enc_backend_bytes(const void *e);

#endif
