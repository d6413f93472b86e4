/* The Wan 2.1 VAE encoder (VAE.md "The encoder"; I2V.md "The Wan 2.1 VAE
 * encoder"): the decoder's twin in the same network and the same model
 * file (its optional group /encoder). Its table of tensors (official
 * state-dict keys encoder.* and conv1.*, shapes from the VAE's config), the
 * typed weights bound from it, and the CPU encode: a video (3, T, H, W) in
 * [-1, 1], T = 1 + 4k, to normalised latents (z_dim, 1 + (T - 1) / 4,
 * H / 8, W / 8) for the published config.
 *
 * The encode runs as WanVAE_.encode does: frame 0 alone, then chunks of
 * WAN_VAE_ENC_CHUNK frames, every causal convolution keeping the last
 * WAN_VAE_CACHE_T frames of its input and every downsample3d the last frame
 * of its spatial output for the next chunk. Scratch and caches are sized up
 * front for one video size (wan_vae_encoder_create); encoding allocates
 * nothing. */
#ifndef WAN_VAE_ENC_H
#define WAN_VAE_ENC_H

#include <stddef.h>
#include <stdint.h>

#include "wan_vae.h"

#define WAN_VAE_ENC_CHUNK 4     /* frames per encoder call after the first */
#define WAN_VAE_ENC_IN_CH 3     /* RGB */
#define WAN_VAE_ENC_MAX_TIME_DOWN 2 /* a third halving would leave a 4-frame chunk one frame */
#define WAN_VAE_MAX_PIXELS 8192 /* video rows/columns an encoder takes */

/* ---------------------------------------------------------------- config */

/* The encoder's structure comes from the VAE's config (WanVAE_ builds
 * both halves from the same dim, dim_mult, num_res_blocks; the encoder's
 * temperal_downsample is the decoder's temporal_up reversed). Widths
 * dims = dim x [1, dim_mult...]: level -1 is conv1's output (dims[0] =
 * dim), level i the output of level i (dims[i + 1] = dim * dim_mult[i]). */
int64_t wan_vae_enc_level_dim(const wan_vae_config *c, int level);
/* Whether the resample after encoder level i halves the frames
 * (downsample3d): temporal_up[n_mult - 2 - i]. */
int wan_vae_enc_temporal(const wan_vae_config *c, int level);
/* 2^(temporal downsamples): latent frames per later chunk are
 * WAN_VAE_ENC_CHUNK / this. */
int64_t wan_vae_enc_time_factor(const wan_vae_config *c);
/* Latent frames of a video of T = 1 + 4k frames: 1 + (T - 1) / time factor. */
int64_t wan_vae_enc_latent_frames(const wan_vae_config *c, int64_t T);
/* Latent side of a video side n: n halved with floor at each of the
 * n_mult - 1 downsamples. */
int64_t wan_vae_enc_latent_side(const wan_vae_config *c, int64_t n);
/* What the encoder asks of a config beyond wan_vae_config_check: at least
 * one residual block per level (the published Encoder3d resamples its
 * blocks' output width) and at most WAN_VAE_ENC_MAX_TIME_DOWN temporal
 * resamples. 0, or -1 with the reason in err. */
int wan_vae_enc_config_check(const wan_vae_config *c, char *err, size_t errlen);
/* The checks of a video of T frames of H x W before any work: T = 1 + 4k,
 * each side at least 2^(n_mult - 1) (every downsample needs two rows and
 * columns) and at most WAN_VAE_MAX_PIXELS. 0, or -1 with the reason. */
int wan_vae_enc_size_check(const wan_vae_config *c, int64_t T, int64_t H, int64_t W, char *err,
                           size_t errlen);

/* ---------------------------------------------------------------- weights */

/* The encoder's own tensors, X(field, key, shape) as wan_vae.h's lists:
 * encoder.conv1 (3 -> dims[0]), the resamples downsample2d and
 * downsample3d (the spatial 3x3 stride-2 conv resample.1 keeps the width;
 * downsample3d's time_conv is (3, 1, 1) with stride 2 in time), the head
 * (RMS norm, causal conv to 2 z_dim channels: mean and log-variance) and
 * conv1 outside encoder. (diffusers' quant_conv), 1x1x1 over 2 z_dim. */
#define WAN_VAE_ENC_CONV1_TENSORS(X)                                    \
  X(conv1_w, "encoder.conv1.weight", (in_dim, 3, 3, 3, 3))              \
  X(conv1_b, "encoder.conv1.bias", (in_dim))
#define WAN_VAE_DOWN_TENSORS(X)                                         \
  X(conv_w, "resample.1.weight", (dim, dim, 3, 3))                      \
  X(conv_b, "resample.1.bias", (dim))
#define WAN_VAE_DOWN_TIME_TENSORS(X)                                    \
  X(time_w, "time_conv.weight", (dim, dim, 3, 1, 1))                    \
  X(time_b, "time_conv.bias", (dim))
#define WAN_VAE_ENC_HEAD_TENSORS(X)                                     \
  X(head_gamma, "encoder.head.0.gamma", (head_dim, 1, 1, 1))            \
  X(head_w, "encoder.head.2.weight", (2 * z_dim, head_dim, 3, 3, 3))    \
  X(head_b, "encoder.head.2.bias", (2 * z_dim))
#define WAN_VAE_ENC_QUANT_TENSORS(X)                                    \
  X(quant_w, "conv1.weight", (2 * z_dim, 2 * z_dim, 1, 1, 1))           \
  X(quant_b, "conv1.bias", (2 * z_dim))

#define WAN_VAE_ENC_FIELD_(field, key, shape) const float *field;

/* Resample downsample2d / downsample3d of dim channels. */
typedef struct wan_vae_down {
  int64_t dim;
  int temporal; /* downsample3d */
  WAN_VAE_DOWN_TENSORS(WAN_VAE_ENC_FIELD_)
  WAN_VAE_DOWN_TIME_TENSORS(WAN_VAE_ENC_FIELD_) /* NULL for downsample2d */
} wan_vae_down;

/* One encoder level: num_res_blocks residual blocks, then (all but the
 * last) a resample; keys encoder.downsamples.<k>, k counted across levels. */
typedef struct wan_vae_enc_level {
  int n_res;
  wan_vae_resblock res[WAN_VAE_MAX_RES];
  int has_down;
  wan_vae_down down;
} wan_vae_enc_level;

typedef struct wan_vae_enc_weights {
  int64_t z_dim;
  int64_t in_dim; /* dims[0] */
  WAN_VAE_ENC_CONV1_TENSORS(WAN_VAE_ENC_FIELD_)
  int n_levels;
  wan_vae_enc_level level[WAN_VAE_MAX_LEVELS];
  int64_t mid_dim;       /* the last level's width */
  wan_vae_resblock mid0; /* encoder.middle.0 */
  wan_vae_attn mid_attn; /* encoder.middle.1 */
  wan_vae_resblock mid2; /* encoder.middle.2 */
  int64_t head_dim;      /* = mid_dim */
  WAN_VAE_ENC_HEAD_TENSORS(WAN_VAE_ENC_FIELD_)
  WAN_VAE_ENC_QUANT_TENSORS(WAN_VAE_ENC_FIELD_)
} wan_vae_enc_weights;

#undef WAN_VAE_ENC_FIELD_

/* Every encoder tensor (encoder.* in module order, then conv1.*), packed
 * as the decoder's table (wan_vae_table: offsets at WAN_VAE_ALIGN_FLOATS
 * boundaries, slots into w). Published: 86 tensors, 53,596,928
 * parameters. */
void wan_vae_enc_table_make(const wan_vae_config *c, wan_vae_enc_weights *w,
                            wan_vae_table *out);

/* ---------------------------------------------------------------- encoder */

typedef struct wan_vae_encoder {
  wan_vae_config cfg;
  int round_mask; /* WAN_VAE_ROUND_* bits (wan_vae.h); 0: fp32 throughout */
  int tf32;       /* WAN_VAE_TF32_* (wan_vae.h); 0: fp32 products */
  int64_t H, W; /* video size the scratch is sized for */
  int64_t h, w; /* its latent size */
  int n_cache;
  wan_vae_cache cache[WAN_VAE_MAX_CACHES]; /* causal convs and downsample3d, in run order */
  float *cache_mem;
  int64_t buf_floats;
  float *buf[4];       /* activations, each buf_floats */
  float *attn_scratch; /* kern_cpu_frame_attention_scratch of the middle */
} wan_vae_encoder;

/* Encoder state for videos of H x W: every cache and buffer an encode
 * needs. SP_OK, SP_ERR_INPUT (bad config or size, logged) or
 * SP_ERR_RUNTIME (out of memory, logged). */
int wan_vae_encoder_create(const wan_vae_config *c, int64_t H, int64_t W, wan_vae_encoder **out);
void wan_vae_encoder_free(wan_vae_encoder *e);
/* Rounds the stores of mask (WAN_VAE_ROUND_*: conv inputs, which include
 * the video frames and the downsamples' inputs, conv outputs, the
 * attention's output, the head's output) to bf16 in the encodes that
 * follow, to emulate the CUDA encoder in bf16 (WAN_VAE_ROUND_CUDA_BF16);
 * 0 turns it off. */
void wan_vae_encoder_round(wan_vae_encoder *e, int mask);
/* Emulates the CUDA encoder's tf32 mode in the encodes that follow (mode
 * WAN_VAE_TF32_*; OFF turns it off), as wan_vae_decoder_tf32 does the
 * decoder's: the input of every convolution the GPU runs through cuDNN
 * (all but conv1, the 1x1x1 the GPU computes in fp32 with the
 * normalisation), the caches, the downsamples' inputs and the middle
 * attention's q, k and v rounded to TF32; the residual stream stays fp32.
 * The conv weights are the caller's to round (tests/common/sp_test_vae.h).
 * tests/vae/test_vae_enc_driver.c measures it against fp32. */
void wan_vae_encoder_tf32(wan_vae_encoder *e, int mode);
/* Host floats the encoder holds (caches and scratch) for videos H x W. */
int64_t wan_vae_encoder_floats(const wan_vae_config *c, int64_t H, int64_t W);

/* Receives one chunk's latent frames (z_dim, n, h, w), normalised, the
 * first of them latent frame f0; the buffer is the encoder's and valid only
 * during the call. 0 to go on; anything else stops the encode, which
 * returns it. */
typedef int (*wan_vae_latents_fn)(void *user, const float *latents, int64_t f0, int64_t n);

/* WanVAE_.encode with Wan2_1_VAE's scale: video (3, T, H, W) in [-1, 1]
 * (T = 1 + 4k, checked by the caller: wan_vae_enc_size_check) chunk by
 * chunk, each chunk's latents (mu, then (mu - mean) * (1 / std)) handed to
 * fn. Weights bound through the encoder table of e's config. 0 or fn's
 * stop code. */
int wan_vae_encode_stream(wan_vae_encoder *e, const wan_vae_enc_weights *wt, const float *video,
                          int64_t T, wan_vae_latents_fn fn, void *user);

/* The same into latents (z_dim, wan_vae_enc_latent_frames(T), h, w). */
void wan_vae_encode(wan_vae_encoder *e, const wan_vae_enc_weights *wt, const float *video,
                    int64_t T, float *latents);

#endif
