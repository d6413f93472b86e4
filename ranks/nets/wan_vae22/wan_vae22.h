/* The Wan 2.2 video VAE (TI2V-5B's; ranks/nets/wan_vae22/VAE22.md, I2V.md
 * "The Wan 2.2 VAE"): its config, latent statistics, the tables of its two
 * parts' tensors (official state-dict keys of vae2_2.py's Wan2_2_VAE,
 * shapes from the config), the typed weights bound from them, and the CPU
 * encoder and decoder (fp32).
 *
 * Encoder: video (3, 1 + 4k, H, W) in [-1, 1], H and W multiples of 16 ->
 * normalised latents (48, 1 + k, H/16, W/16); decoder: latents (48, F, h,
 * w) -> video (3, 1 + 4 (F - 1), 16h, 16w) clamped to [-1, 1] (the
 * published config). Both run chunk by chunk with the published causal
 * caches: the encoder takes frame 0 alone, then 4 frames a call; the
 * decoder one latent frame a call, the first with first_chunk. Caches and
 * scratch are sized up front for one size (the create functions); encoding
 * and decoding allocate nothing.
 *
 * The residual and attention blocks, the causal convolution and RMS norm
 * are the Wan 2.1 VAE's (wan_vae_table.h's block tensor lists and structs,
 * kern_cpu_vae.h's kernels); what is its own is in kern_cpu_vae22.h. */
#ifndef WAN_VAE22_H
#define WAN_VAE22_H

#include <stddef.h>
#include <stdint.h>

#include "net.h"
#include "wan_vae.h"

#define WAN_VAE22_MAX_LEVELS 4 /* entries of dim_mult */
#define WAN_VAE22_MAX_RES 5    /* residual blocks of a decoder level: num_res_blocks + 1 */
#define WAN_VAE22_Z_DIM 48     /* latent channels of the published statistics */
#define WAN_VAE22_PATCH 2      /* patchify's factor in height and width */
#define WAN_VAE22_IMG_CH 12    /* video channels after patchify: 3 x 2 x 2 */
#define WAN_VAE22_CHUNK 4      /* video frames per encoder call after the first */
#define WAN_VAE22_CACHE_T 2    /* frames a causal conv keeps from the previous chunk */
#define WAN_VAE22_MAX_CACHES 64
#define WAN_VAE22_MAX_SIDE 1024   /* latent rows/columns (16384 pixels) */

/* The model file's arch (wan_vae22_schema.h). */
#define WAN_VAE22_ARCH "wan2.2-vae"

/* The config, X(type, field, dims) per field in struct order; each
 * field's name is its model file attribute (dim_mult and temporal_down
 * stored with their n_mult and n_mult - 1 entries). */
#define WAN_VAE22_CONFIG_FIELDS(X)                                                      \
  X(int64_t, dim, )       /* the encoder's base width (160) */                         \
  X(int64_t, dec_dim, )   /* the decoder's base width (256) */                         \
  X(int64_t, z_dim, )     /* latent channels (48) */                                   \
  X(int, n_mult, )        /* entries of dim_mult (4) */                                \
  X(int64_t, dim_mult, [WAN_VAE22_MAX_LEVELS]) /* encoder order (1, 2, 4, 4) */        \
  X(int64_t, num_res_blocks, ) /* per encoder level (2); a decoder level has one more */ \
  X(int, temporal_down, [WAN_VAE22_MAX_LEVELS - 1]) /* encoder resample i halves the  \
                           frames (0, 1, 1); the decoder's upsamples reversed */

#define WAN_VAE22_CONFIG_FIELD_(type, field, dims) type field dims;
typedef struct wan_vae22_config {
  WAN_VAE22_CONFIG_FIELDS(WAN_VAE22_CONFIG_FIELD_)
} wan_vae22_config;
#undef WAN_VAE22_CONFIG_FIELD_

/* The two parts of the VAE, each a group of the model file. */
typedef enum { WAN_VAE22_DECODER = 0, WAN_VAE22_ENCODER = 1, WAN_VAE22_PARTS = 2 } wan_vae22_part;

/* The VAE as a network (net.h): its description. Its backends fill
 * wan_vae22_backend (wan_vae22_backend.h); its driver is wan_vae22_run.h. */
const net_desc *wan_vae22_net(void);

/* Wan2_2_VAE: z_dim 48, encoder width 160, decoder width 256, dim_mult
 * (1, 2, 4, 4), 2 residual blocks, temporal downsampling at the encoder's
 * resamples 1 and 2 (0, 1, 1). */
void wan_vae22_config_published(wan_vae22_config *out);

/* Checks ranges (sizes small enough that no count overflows), z_dim ==
 * WAN_VAE22_Z_DIM, at most 2 temporal resamples (a chunk of 4 frames
 * halves twice), and that every AvgDown3D and DupUp3D shortcut splits its
 * channels evenly. Returns 0, or -1 with a message in err. */
int wan_vae22_config_check(const wan_vae22_config *c, char *err, size_t errlen);

/* Wan2_2_VAE's per-channel latent statistics: latents are (mu - mean) *
 * (1 / std) after encoding, z / (1 / std) + mean before decoding, with
 * float32 mean and 1 / std. */
extern const float wan_vae22_latent_mean[WAN_VAE22_Z_DIM];
extern const float wan_vae22_latent_std[WAN_VAE22_Z_DIM];

/* Encoder widths dims[i], i = 0..n_mult (dim x [1, dim_mult...]); decoder
 * widths dims[i], i = 0..n_mult (dec_dim x [dim_mult[-1], dim_mult
 * reversed...]): dims[0] is conv1's and the middle's. */
int64_t wan_vae22_enc_dim(const wan_vae22_config *c, int i);
int64_t wan_vae22_dec_dim(const wan_vae22_config *c, int i);
/* Whether decoder level i's upsample doubles the frames (the encoder's
 * flags reversed). */
int wan_vae22_dec_temporal(const wan_vae22_config *c, int i);
/* Frames per latent frame: 2^(temporal resamples) (4). */
int64_t wan_vae22_time_factor(const wan_vae22_config *c);
/* Pixels per latent position along each side: 2 x 2^(n_mult - 1) (16). */
int64_t wan_vae22_space_factor(const wan_vae22_config *c);
/* Video frames from F latent frames: 1 + time_factor (F - 1). */
int64_t wan_vae22_out_frames(const wan_vae22_config *c, int64_t F);
/* Latent frames from T = 1 + 4k video frames: 1 + (T - 1) / time_factor. */
int64_t wan_vae22_latent_frames(const wan_vae22_config *c, int64_t T);

/* ---------------------------------------------------------------- weights */

/* The tensors of the modules of their own, X(field, key, shape) per tensor
 * in table order; a module's keys are under its prefix, the shapes in its
 * widths. The residual and attention blocks are wan_vae_table.h's
 * (WAN_VAE_RESBLOCK_TENSORS, WAN_VAE_SHORTCUT_TENSORS, WAN_VAE_ATTN_TENSORS). */

/* Resample downsample2d / downsample3d (encoder): the stride-2 3x3 conv
 * keeping the width, and downsample3d's stride-2 (3, 1, 1) time conv. */
#define WAN_VAE22_DOWN_TENSORS(X)                                       \
  X(conv_w, "resample.1.weight", (dim, dim, 3, 3))                      \
  X(conv_b, "resample.1.bias", (dim))
#define WAN_VAE22_TIME_DOWN_TENSORS(X)                                  \
  X(time_w, "time_conv.weight", (dim, dim, 3, 1, 1))                    \
  X(time_b, "time_conv.bias", (dim))
/* Resample upsample3d / upsample2d (decoder): upsample3d's causal time conv
 * to 2 dim channels, then 2x nearest and a 3x3 conv keeping the width. */
#define WAN_VAE22_TIME_UP_TENSORS(X)                                    \
  X(time_w, "time_conv.weight", (2 * dim, dim, 3, 1, 1))                \
  X(time_b, "time_conv.bias", (2 * dim))
#define WAN_VAE22_UP_TENSORS(X)                                         \
  X(conv_w, "resample.1.weight", (dim, dim, 3, 3))                      \
  X(conv_b, "resample.1.bias", (dim))
/* The encoder's own: its conv1 on the patchified video, its head, and the
 * 1x1x1 conv1 outside encoder.; keys in full. */
#define WAN_VAE22_ENC_IN_TENSORS(X)                                     \
  X(conv1_w, "encoder.conv1.weight", (dim0, in_ch, 3, 3, 3))            \
  X(conv1_b, "encoder.conv1.bias", (dim0))
#define WAN_VAE22_ENC_HEAD_TENSORS(X)                                   \
  X(head_gamma, "encoder.head.0.gamma", (head_dim, 1, 1, 1))            \
  X(head_w, "encoder.head.2.weight", (z2, head_dim, 3, 3, 3))           \
  X(head_b, "encoder.head.2.bias", (z2))                                \
  X(out_w, "conv1.weight", (z2, z2, 1, 1, 1))                           \
  X(out_b, "conv1.bias", (z2))
/* The decoder's own: conv2 outside decoder. (first), decoder.conv1 into
 * the middle, and the head to the patchified video (last). */
#define WAN_VAE22_DEC_IN_TENSORS(X)                                     \
  X(conv2_w, "conv2.weight", (z_dim, z_dim, 1, 1, 1))                   \
  X(conv2_b, "conv2.bias", (z_dim))                                     \
  X(conv1_w, "decoder.conv1.weight", (mid_dim, z_dim, 3, 3, 3))         \
  X(conv1_b, "decoder.conv1.bias", (mid_dim))
#define WAN_VAE22_DEC_HEAD_TENSORS(X)                                   \
  X(head_gamma, "decoder.head.0.gamma", (head_dim, 1, 1, 1))            \
  X(head_w, "decoder.head.2.weight", (out_ch, head_dim, 3, 3, 3))       \
  X(head_b, "decoder.head.2.bias", (out_ch))

#define WAN_VAE22_FIELD_(field, key, shape) const float *field;

/* Down_ResidualBlock (encoder level): n_res residual blocks (in -> out,
 * out -> out), then (all but the last level) a downsample; its output plus
 * AvgDown3D(in -> out, ft, fs) of the level's input. Keys
 * encoder.downsamples.<i>.downsamples.<j>, the downsample's j = n_res. */
typedef struct wan_vae22_down {
  int64_t in_dim, out_dim;
  int ft, fs; /* AvgDown3D: 2 in time when temporal, 2 in space when it downsamples */
  int n_res;
  wan_vae_resblock res[WAN_VAE22_MAX_RES];
  int has_down, temporal; /* downsample2d, or downsample3d when temporal */
  int64_t dim;            /* the downsample's width (out_dim) */
  WAN_VAE22_DOWN_TENSORS(WAN_VAE22_FIELD_)
  WAN_VAE22_TIME_DOWN_TENSORS(WAN_VAE22_FIELD_) /* NULL for downsample2d */
} wan_vae22_down;

/* Up_ResidualBlock (decoder level): n_res residual blocks, then (all but
 * the last level) an upsample, whose output gets DupUp3D(in -> out, ft,
 * fs) of the level's input added (the last level has no shortcut). Keys
 * decoder.upsamples.<i>.upsamples.<j>, the upsample's j = n_res. */
typedef struct wan_vae22_up {
  int64_t in_dim, out_dim;
  int ft, fs; /* DupUp3D: 2 in time when temporal, 2 in space */
  int n_res;
  wan_vae_resblock res[WAN_VAE22_MAX_RES];
  int has_up, temporal; /* upsample2d, or upsample3d when temporal */
  int64_t dim;          /* the upsample's width (out_dim) */
  WAN_VAE22_TIME_UP_TENSORS(WAN_VAE22_FIELD_) /* NULL for upsample2d */
  WAN_VAE22_UP_TENSORS(WAN_VAE22_FIELD_)
} wan_vae22_up;

typedef struct wan_vae22_enc_weights {
  int64_t in_ch, dim0; /* patchified channels (12), dims[0] */
  WAN_VAE22_ENC_IN_TENSORS(WAN_VAE22_FIELD_)
  int n_levels;
  wan_vae22_down level[WAN_VAE22_MAX_LEVELS];
  int64_t mid_dim;        /* dims[n_mult] */
  wan_vae_resblock mid0;  /* encoder.middle.0 */
  wan_vae_attn mid_attn;  /* encoder.middle.1 */
  wan_vae_resblock mid2;  /* encoder.middle.2 */
  int64_t head_dim, z2, z_dim; /* head width, 2 z_dim (mu and log-variance), z_dim */
  WAN_VAE22_ENC_HEAD_TENSORS(WAN_VAE22_FIELD_)
} wan_vae22_enc_weights;

typedef struct wan_vae22_dec_weights {
  int64_t z_dim, mid_dim; /* latent channels, dims[0] */
  WAN_VAE22_DEC_IN_TENSORS(WAN_VAE22_FIELD_)
  wan_vae_resblock mid0; /* decoder.middle.0 */
  wan_vae_attn mid_attn; /* decoder.middle.1 */
  wan_vae_resblock mid2; /* decoder.middle.2 */
  int n_levels;
  wan_vae22_up level[WAN_VAE22_MAX_LEVELS];
  int64_t head_dim, out_ch; /* last level's width, patchified channels (12) */
  WAN_VAE22_DEC_HEAD_TENSORS(WAN_VAE22_FIELD_)
} wan_vae22_dec_weights;

#undef WAN_VAE22_FIELD_

/* The typed weights of both parts; a table binds one part's. */
typedef struct wan_vae22_weights {
  wan_vae22_enc_weights enc;
  wan_vae22_dec_weights dec;
} wan_vae22_weights;

/* The table (wan_vae_table.h) of every tensor of part in module order
 * (decoder: conv2.*, then decoder.*; encoder: encoder.*, then conv1.*) for
 * a checked config, with that part's structure
 * (widths, flags) filled into w and its pointers zeroed; the slots point
 * into w, which must outlive the table's use. */
void wan_vae22_table_make(const wan_vae22_config *c, wan_vae22_part part, wan_vae22_weights *w,
                          wan_vae_table *out);
/* The part's name as the model file's group ("decoder", "encoder"). */
const char *wan_vae22_part_name(wan_vae22_part p);

/* ---------------------------------------------------------------- CPU coders */

/* The CPU encoder or decoder's state: caches and scratch for one size
 * (wan_vae22_cpu.c). */
typedef struct wan_vae22_state wan_vae22_state;

/* A decoder for latents of h x w, or an encoder for videos of H x W
 * pixels. Returns SP_OK, SP_ERR_INPUT (bad config or size, logged) or
 * SP_ERR_RUNTIME (out of memory, logged). */
int wan_vae22_decoder_create(const wan_vae22_config *c, int64_t h, int64_t w,
                             wan_vae22_state **out);
int wan_vae22_encoder_create(const wan_vae22_config *c, int64_t H, int64_t W,
                             wan_vae22_state **out);
void wan_vae22_state_free(wan_vae22_state *s);
/* Host floats of the state (caches and scratch). */
int64_t wan_vae22_state_floats(const wan_vae22_state *s);

/* Decodes latents (z_dim, F, h, w), normalised as the DiT produces them,
 * handing each chunk's clamped frames (3, n, 16h, 16w) to fn as they are
 * made (the whole video is never held). Returns 0 or fn's stop code. */
int wan_vae22_decode_stream(wan_vae22_state *d, const wan_vae22_dec_weights *wt,
                            const float *latents, int64_t F, wan_vae_frames_fn fn, void *user);
/* The same into video (3, wan_vae22_out_frames(F), 16h, 16w). */
void wan_vae22_decode(wan_vae22_state *d, const wan_vae22_dec_weights *wt, const float *latents,
                      int64_t F, float *video);

/* Encodes video (3, T, H, W) in [-1, 1], T = 1 + 4k, into normalised
 * latents (z_dim, wan_vae22_latent_frames(T), H/16, W/16): mu, the first
 * z_dim channels of conv1's output (the log-variance is not used). Returns
 * SP_OK, or SP_ERR_INPUT (logged) for a T that is not 1 + 4k. */
int wan_vae22_encode(wan_vae22_state *e, const wan_vae22_enc_weights *wt, const float *video,
                     int64_t T, float *latents);

#endif
