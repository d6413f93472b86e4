/* The Wan 2.2 VAE on a CUDA device, what both builds know of it: the
 * device bytes of a coder's one allocation (laid out by the planner:
 * planner/vae22_layout.h through wan_vae22_gpu_layout.h), the device form
 * of its weights and the kinds of ops it profiles. The coders themselves,
 * the CPU's computation (wan_vae22.h) in bf16 (weights and activations,
 * fp32 accumulation, statistics and residual stream) or fp32, chunk by
 * chunk with the same causal caches, are the VAE's CUDA backend
 * (cuda/wan_vae22_gpu.c, cuda/wan_vae22_cuda.h), compiled only in CUDA
 * builds. The precisions are the Wan 2.1 decoder's (wan_vae_gpu.h). */
#ifndef WAN_VAE22_GPU_H
#define WAN_VAE22_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "vae22_layout.h"
#include "wan_vae22.h"
#include "wan_vae_gpu.h"

/* Every channel count the device ops see is a multiple of this (16-byte
 * vectors of bf16 in the element kernels, tensor-core shapes); the
 * patchified video's 12 channels are padded to PLAN_VAE22_IMG_CH. */
#define WAN_VAE22_GPU_CH_ALIGN 8

/* The Wan 2.2 VAE's device form of its weights (wan_vae_gpu.h): the
 * decoder's head to PLAN_VAE22_IMG_CH output channels, the encoder's conv1
 * from PLAN_VAE22_IMG_CH input channels. */
#define WAN_VAE22_GPU_FORM ((wan_vae_gpu_form){PLAN_VAE22_IMG_CH, PLAN_VAE22_IMG_CH})

/* Checks c, the size (decoder: latent h x w; encoder: video H x W pixels,
 * multiples of the space factor) and the channel alignment, then lays the
 * part out. SP_OK, or SP_ERR_INPUT with the reason logged. */
int wan_vae22_gpu_layout(const wan_vae22_config *c, wan_vae22_part part, int64_t h, int64_t w,
                         wan_vae_gpu_precision p, plan_vae22_layout *out);
/* That layout's total: the device bytes of the coder; -1 (logged) for a
 * config or size it refuses. */
int64_t wan_vae22_gpu_bytes(const wan_vae22_config *c, wan_vae22_part part, int64_t h,
                            int64_t w, wan_vae_gpu_precision p);

/* Device time per kind of op, for seeing where a run's time goes. */
typedef enum {
  WAN_VAE22_GPU_OP_CONV3D = 0, /* causal 3x3x3 convolutions */
  WAN_VAE22_GPU_OP_CONV_TIME,  /* the resamples' 3x1x1 time convolutions */
  WAN_VAE22_GPU_OP_CONV2D,     /* the resamples' 3x3 convolutions (stride 2 in the encoder) */
  WAN_VAE22_GPU_OP_CONV1,      /* 1x1 convolutions: shortcuts, to_qkv, proj */
  WAN_VAE22_GPU_OP_NORM,       /* RMS norms (with SiLU) */
  WAN_VAE22_GPU_OP_ATTN,       /* the middle attention: scores, softmax, P v */
  WAN_VAE22_GPU_OP_SHORTCUT,   /* AvgDown3D and DupUp3D with their adds */
  WAN_VAE22_GPU_OP_ELEM,       /* latents in and out, biases, residual adds, upsampling,
                                  patchify, frames out */
  WAN_VAE22_GPU_OP_COPY,       /* cache and level-input copies, transfers */
  WAN_VAE22_GPU_OPS
} wan_vae22_gpu_op;
const char *wan_vae22_gpu_op_name(wan_vae22_gpu_op op);

#endif
