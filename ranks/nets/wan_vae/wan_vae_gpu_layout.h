/* What the CUDA VAE decoder and every build know of its device memory:
 * the checks a config must pass for the device, the device form of each
 * weight tensor, and the device layout (planner/vae_layout.h) of a config,
 * latent size and precision. The CUDA decoder (cuda/wan_vae_gpu.c) carves
 * its allocation from it; the planner's count (wan_vae_gpu_bytes), in both
 * builds, is its total. */
#ifndef WAN_VAE_GPU_LAYOUT_H
#define WAN_VAE_GPU_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "vae_layout.h"
#include "wan_vae.h"
#include "wan_vae_gpu.h"

/* Every channel count the device convolutions see is a multiple of this
 * (16-byte vectors of bf16 in the element kernels, tensor-core shapes). */
#define WAN_VAE_GPU_CH_ALIGN 8

/* The Wan 2.1 VAE's device form of its weights (wan_vae_gpu.h): the
 * decoder's head to PLAN_VAE_HEAD_CO output channels, the encoder's conv1
 * from PLAN_VAE_ENC_IN_CH input channels. */
#define WAN_VAE_GPU_FORM ((wan_vae_gpu_form){PLAN_VAE_HEAD_CO, PLAN_VAE_ENC_IN_CH})

/* Checks c, the latent size and the channel alignment, then lays the
 * decoder out. SP_OK, or SP_ERR_INPUT with the reason logged. */
int wan_vae_gpu_layout(const wan_vae_config *c, int64_t h, int64_t w, wan_vae_gpu_precision p,
                       plan_vae_layout *out);

/* The CUDA encoder's layout (planner/vae_layout.h plan_vae_enc_layout_make)
 * for videos of T frames of H x W: chunks of 4 frames, or 1 when T is 1
 * (an image). Checks the config (with its encoder), the size
 * (wan_vae_enc_size_check) and the widths (multiples of
 * WAN_VAE_GPU_CH_ALIGN). SP_OK, or SP_ERR_INPUT with the reason logged. */
int wan_vae_gpu_enc_layout(const wan_vae_config *c, int64_t T, int64_t H, int64_t W,
                           wan_vae_gpu_precision p, plan_vae_layout *out);

/* The tiling (planner/vae_layout.h plan_vae_tiles_pick) of latents h x w
 * whose tile layout fits budget device bytes, tiles overlapping by
 * PLAN_VAE_TILE_OVERLAP: 1 x 1 when the whole latent fits. SP_OK, or
 * SP_ERR_INPUT (logged: a bad config or size, or not even the least tile
 * fits). */
int wan_vae_gpu_tiles(const wan_vae_config *c, int64_t h, int64_t w, wan_vae_gpu_precision p,
                      uint64_t budget, plan_vae_tiles *out);

#endif
