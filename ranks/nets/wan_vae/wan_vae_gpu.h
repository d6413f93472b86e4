/* The Wan 2.1 VAE decoder on a CUDA device (VAE.md): the CPU decoder's
 * computation (wan_vae.h) in bf16 (weights and activations, fp32
 * accumulation and statistics) or fp32, chunk by chunk with the same causal
 * caches, in one device workspace whose layout the planner computes
 * (plan_vae_layout). A CPU-only build has the same functions; create then
 * returns SP_ERR_INPUT saying CUDA is not built in. */
#ifndef WAN_VAE_GPU_H
#define WAN_VAE_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "wan_vae.h"

typedef enum {
  WAN_VAE_GPU_BF16 = 0,
  WAN_VAE_GPU_FP32 = 1,
} wan_vae_gpu_precision;

typedef struct wan_vae_gpu wan_vae_gpu;

/* 1 when this build has the CUDA decoder. */
int wan_vae_gpu_available(void);

/* Device bytes the decoder needs for latents of h x w: weights plus
 * workspace, from the same layout create uses (planner/vae_layout.h), in
 * both builds; -1 (logged) for a config or size the decoder refuses. */
int64_t wan_vae_gpu_bytes(const wan_vae_config *c, int64_t h, int64_t w,
                          wan_vae_gpu_precision p);

/* Device bytes the decoder's handles (cuDNN, cuBLASLt) and the CUDA
 * runtime's own growth may take besides the layout: kept free when the
 * layout is fitted to the device's free memory. */
#define WAN_VAE_GPU_SLACK_BYTES ((int64_t)512 << 20)

/* Free bytes of the current device as cudaMemGetInfo reports them (every
 * process on it counts); 0 in a build without CUDA. */
int64_t wan_vae_gpu_free_bytes(void);

/* Uploads the weights (packed fp32, wan_vae_table layout of c) to the
 * current device, converting to the precision, and lays out the workspace
 * for latents of h x w. Returns SP_OK, SP_ERR_INPUT (bad config/size, no
 * CUDA build: logged) or SP_ERR_RUNTIME (out of device memory: logged with
 * the bytes asked for). */
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

/* Device time per kind of op, for seeing where a decode's time goes. */
typedef enum {
  WAN_VAE_GPU_OP_CONV3D = 0, /* causal 3x3x3 convolutions */
  WAN_VAE_GPU_OP_CONV_TIME,  /* upsample3d's 3x1x1 time convolutions */
  WAN_VAE_GPU_OP_CONV2D,     /* the resamples' 3x3 convolutions */
  WAN_VAE_GPU_OP_CONV1,      /* 1x1 convolutions: shortcuts, to_qkv, proj */
  WAN_VAE_GPU_OP_NORM,       /* RMS norms (with SiLU) */
  WAN_VAE_GPU_OP_ATTN,       /* the middle attention: scores, softmax, P v */
  WAN_VAE_GPU_OP_ELEM,       /* latent in, biases, residual adds, upsampling, output frames */
  WAN_VAE_GPU_OP_COPY,       /* cache copies, frames to the host */
  WAN_VAE_GPU_OPS
} wan_vae_gpu_op;
const char *wan_vae_gpu_op_name(wan_vae_gpu_op op);

/* on = 1: the decodes that follow time every op with CUDA events (which
 * costs a little time) and the totals restart from zero; on = 0: no
 * timing. */
void wan_vae_gpu_profile(wan_vae_gpu *g, int on);
/* Milliseconds per op kind summed over the decodes since profiling was
 * turned on (zeros when it is off). */
void wan_vae_gpu_profile_ms(const wan_vae_gpu *g, double ms[WAN_VAE_GPU_OPS]);

#endif
