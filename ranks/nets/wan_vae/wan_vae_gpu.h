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

/* ---- the device form of every Wan VAE's weights (wan_vae_gpu_layout.c) ---- */

/* What a VAE pads on the device: the output channels of the decoder's
 * head conv (decoder.head.2.*) and the input channels of the encoder's
 * conv1 (encoder.conv1.weight), zeros past the table's. */
typedef struct wan_vae_gpu_form {
  int64_t head_co, in_ch;
} wan_vae_gpu_form;

/* Bytes of one activation or convolution weight element in precision p
 * (tf32 stores fp32). */
int wan_vae_gpu_elem_bytes(wan_vae_gpu_precision p);
/* 1 for a convolution weight (every .weight but the 1x1x1 conv2's and
 * conv1's outside the parts), stored (co', kt, kh, kw, ci') in the
 * precision's type; 0 for the rest (those two weights, biases, gammas),
 * stored fp32 as in the table, (co', ...). */
int wan_vae_gpu_is_conv(const wan_vae_tensor *e);
/* Output channels co' and input channels ci' (1 for a 1-D tensor) of e as
 * stored. */
int64_t wan_vae_gpu_form_rows(const wan_vae_tensor *e, wan_vae_gpu_form f);
int64_t wan_vae_gpu_form_cols(const wan_vae_tensor *e, wan_vae_gpu_form f);
/* Device bytes of e (not aligned). */
uint64_t wan_vae_gpu_form_bytes(const wan_vae_tensor *e, wan_vae_gpu_precision p,
                                wan_vae_gpu_form f);
/* Byte offset of every tensor of t in the weights buffer (each
 * PLAN_LAYOUT_ALIGN aligned), off (t->count); returns the buffer's bytes. */
uint64_t wan_vae_gpu_form_offsets(const wan_vae_table *t, wan_vae_gpu_precision p,
                                  wan_vae_gpu_form f, uint64_t *off);
/* Tensor e's values src in its device form into dst
 * (wan_vae_gpu_form_bytes): a convolution weight (co, ci, kt, kh, kw) ->
 * (co', kt, kh, kw, ci') in the precision's type (bf16 rounded to nearest
 * even), anything else fp32; zeros past co and ci. */
void wan_vae_gpu_form_convert(const wan_vae_tensor *e, const float *src, wan_vae_gpu_precision p,
                              wan_vae_gpu_form f, char *dst);

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
