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

/* Bytes of one activation element in precision p. */
int wan_vae_gpu_elem_bytes(wan_vae_gpu_precision p);

/* The device form of tensor e of the decoder's or the encoder's table: 1
 * for a convolution weight (every .weight except conv2's and conv1's, the
 * 1x1x1 convs outside the decoder and encoder), stored (co', kt, kh, kw,
 * ci') in the precision's type, co' = co or PLAN_VAE_HEAD_CO for the
 * decoder's head, ci' = ci or PLAN_VAE_ENC_IN_CH for the encoder's conv1;
 * 0 for everything else (conv2's and conv1's weights, biases, gammas),
 * stored fp32 as in the table, the decoder's head bias padded with zeros
 * to PLAN_VAE_HEAD_CO. */
int wan_vae_gpu_is_conv(const wan_vae_tensor *e);
/* Output channels of e as stored on the device. */
int64_t wan_vae_gpu_rows(const wan_vae_tensor *e);
/* Input channels of a convolution weight e as stored on the device. */
int64_t wan_vae_gpu_cols(const wan_vae_tensor *e);
/* Device bytes of e (not aligned). */
uint64_t wan_vae_gpu_tensor_bytes(const wan_vae_tensor *e, wan_vae_gpu_precision p);
/* Byte offset of every tensor of t in the weights buffer (each
 * PLAN_LAYOUT_ALIGN aligned), off (t->count); returns the buffer's bytes. */
uint64_t wan_vae_gpu_weight_offsets(const wan_vae_table *t, wan_vae_gpu_precision p,
                                    uint64_t *off);

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
