/* The Wan 2.1 VAE decoder on a CUDA device (VAE.md), what both builds know
 * of it: its precisions, the device bytes of its one allocation (laid out
 * by the planner: wan_vae_gpu_layout.h, planner/vae_layout.h) and the
 * kinds of ops it profiles. The decoder itself, the CPU decoder's
 * computation (wan_vae.h) in bf16 (weights and activations, fp32
 * accumulation and statistics) or fp32, chunk by chunk with the same causal
 * caches, is the VAE's CUDA backend (cuda/wan_vae_gpu.c, cuda/wan_vae_cuda.h),
 * compiled only in CUDA builds. */
#ifndef WAN_VAE_GPU_H
#define WAN_VAE_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "wan_vae.h"

/* --vae-precision. tf32 is the fp32 decoder (fp32 weights, activations
 * and accumulation) with its convolutions and the middle attention's GEMMs
 * allowed onto the TF32 tensor cores, which round each product's inputs to
 * a 10-bit mantissa (PyTorch's default for convolutions): VAE.md
 * "Precisions" gives its error against fp32. */
typedef enum {
  WAN_VAE_GPU_BF16 = 0,
  WAN_VAE_GPU_FP32 = 1,
  WAN_VAE_GPU_TF32 = 2,
} wan_vae_gpu_precision;

/* "bf16", "fp32", "tf32". */
const char *wan_vae_gpu_precision_name(wan_vae_gpu_precision p);
/* The name of a precision -> *out: SP_OK, or SP_ERR_INPUT logged naming
 * the value and the choices (--vae-precision). */
int wan_vae_gpu_precision_parse(const char *s, wan_vae_gpu_precision *out);

/* Device bytes the decoder needs for latents of h x w: weights plus
 * workspace, from the same layout create uses (planner/vae_layout.h), in
 * both builds; -1 (logged) for a config or size the decoder refuses. */
int64_t wan_vae_gpu_bytes(const wan_vae_config *c, int64_t h, int64_t w,
                          wan_vae_gpu_precision p);

/* Device bytes the encoder needs for videos of T frames of H x W: weights
 * plus workspace, from the layout its create uses (planner/vae_layout.h
 * plan_vae_enc_layout_make), in both builds; -1 (logged) for a config
 * without the encoder or a size it refuses. */
int64_t wan_vae_gpu_enc_bytes(const wan_vae_config *c, int64_t T, int64_t H, int64_t W,
                              wan_vae_gpu_precision p);

/* Device bytes the decoder's handles (cuDNN, cuBLASLt) and the CUDA
 * runtime's own growth may take besides the layout: kept free when the
 * layout is fitted to the device's free memory. */
#define WAN_VAE_GPU_SLACK_BYTES ((int64_t)512 << 20)

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

#endif
