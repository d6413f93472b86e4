/* The Wan 2.1 video VAE decoder (ranks/nets/wan_vae/VAE.md): its config, the table
 * of its tensors (official state-dict keys, shapes derived from the
 * config), the typed weights bound from that table, and the CPU decode
 * (latents (16, F, H, W) -> video (3, 1 + 4 (F - 1), 8H, 8W) in [-1, 1]
 * for the published config).
 *
 * The decode runs latent frame by latent frame, as published: every causal
 * convolution keeps the last WAN_VAE_CACHE_T frames of its input in a
 * cache for the next chunk. Scratch and caches are sized up front for one
 * latent size (wan_vae_decoder_create); decoding allocates nothing. */
#ifndef WAN_VAE_H
#define WAN_VAE_H

#include <stddef.h>
#include <stdint.h>

#include "net.h"

#define WAN_VAE_MAX_LEVELS 4 /* entries of dim_mult: Decoder3d halves levels 1..3 */
#define WAN_VAE_MAX_RES 5    /* residual blocks per level: num_res_blocks + 1 */
#define WAN_VAE_CACHE_T 2    /* frames a causal conv keeps from the previous chunk */
#define WAN_VAE_Z_DIM 16     /* latent channels of the published statistics */
#define WAN_VAE_MAX_TENSORS 256
#define WAN_VAE_MAX_CACHES 64
#define WAN_VAE_ALIGN_FLOATS 64 /* each tensor of the packed buffer starts on 256 bytes */
#define WAN_VAE_MAX_SIDE 1024   /* latent rows/columns (8192 pixels) */

/* The model file's arch of a VAE (vae_file.h). */
#define WAN_VAE_ARCH "wan2.1-vae"

/* The config, X(type, field, dims) per field in struct order (dims empty
 * for one value, [n] for n); each field's name is its model file
 * attribute (dim_mult and temporal_up stored with their n_mult and
 * n_mult - 1 entries; encoder only when it is 1, so a decoder-only file
 * has the attributes it always had). */
#define WAN_VAE_CONFIG_FIELDS(X)                                                    \
  X(int64_t, dim, )                          /* base width (96) */                  \
  X(int64_t, z_dim, )                        /* latent channels (16) */             \
  X(int, n_mult, )                           /* entries of dim_mult (4) */          \
  X(int64_t, dim_mult, [WAN_VAE_MAX_LEVELS]) /* encoder order (1, 2, 4, 4) */       \
  X(int64_t, num_res_blocks, )               /* (2); a decoder level has one more */ \
  X(int, temporal_up, [WAN_VAE_MAX_LEVELS - 1]) /* resample doubles frames (1, 1, 0) */ \
  X(int, encoder, ) /* 1: the file holds the encoder too (/encoder, wan_vae_enc.h) */

#define WAN_VAE_CONFIG_FIELD_(type, field, dims) type field dims;
typedef struct wan_vae_config { WAN_VAE_CONFIG_FIELDS(WAN_VAE_CONFIG_FIELD_) } wan_vae_config;
#undef WAN_VAE_CONFIG_FIELD_

/* The VAE as a network (net.h): its description. Its backends fill
 * wan_vae_backend (wan_vae_backend.h): the CPU's in wan_vae_cpu.c and
 * wan_vae_enc_cpu.c, the CUDA one's in cuda/wan_vae_gpu.c and
 * cuda/wan_vae_enc_gpu.c; its drivers are the decode (wan_vae_decode.h)
 * and the encode (wan_vae_encode.h, the encoder of wan_vae_enc.h). */
const net_desc *wan_vae_net(void);

/* The published decoder: dim 96, z_dim 16, dim_mult (1, 2, 4, 4), 2 residual
 * blocks, temporal upsampling at the first two resamples (the encoder's
 * temperal_downsample (0, 1, 1) reversed). */
void wan_vae_config_published(wan_vae_config *out);

/* Checks ranges (sizes small enough that no count overflows) and z_dim ==
 * WAN_VAE_Z_DIM. Returns 0, or -1 with a message in err. */
int wan_vae_config_check(const wan_vae_config *c, char *err, size_t errlen);

/* WanVAE's per-channel latent statistics: the decoder's input is
 * z / (1 / std) + mean. */
extern const float wan_vae_latent_mean[WAN_VAE_Z_DIM];
extern const float wan_vae_latent_std[WAN_VAE_Z_DIM];

/* Width of decoder level i's output (dims[i + 1] of Decoder3d); level -1 is
 * conv1 and the middle (dims[0] = dim * dim_mult[n_mult - 1]). */
int64_t wan_vae_level_dim(const wan_vae_config *c, int level);
/* Video frames from F latent frames: 1 + 2^(temporal resamples) (F - 1). */
int64_t wan_vae_out_frames(const wan_vae_config *c, int64_t F);
/* Spatial upsampling factor: 2^(n_mult - 1) (8). */
int64_t wan_vae_out_scale(const wan_vae_config *c);

/* ---------------------------------------------------------------- weights */

/* The decoder's tensors, X(field, key, shape) per tensor in table order,
 * module by module; a module's keys are under its prefix
 * ("decoder.middle.0."), the shapes in the module's widths. One pointer
 * per tensor in the module's struct below, bound by the table
 * (wan_vae_table_bind). */

/* ResidualBlock: x + conv(silu(norm(conv(silu(norm(x)))))), the shortcut,
 * a 1x1x1 conv, only when the width changes (in_dim != out_dim). */
#define WAN_VAE_RESBLOCK_TENSORS(X)                                     \
  X(norm1_gamma, "residual.0.gamma", (in_dim, 1, 1, 1))                 \
  X(conv1_w, "residual.2.weight", (out_dim, in_dim, 3, 3, 3))           \
  X(conv1_b, "residual.2.bias", (out_dim))                              \
  X(norm2_gamma, "residual.3.gamma", (out_dim, 1, 1, 1))                \
  X(conv2_w, "residual.6.weight", (out_dim, out_dim, 3, 3, 3))          \
  X(conv2_b, "residual.6.bias", (out_dim))
#define WAN_VAE_SHORTCUT_TENSORS(X)                                     \
  X(shortcut_w, "shortcut.weight", (out_dim, in_dim, 1, 1, 1))          \
  X(shortcut_b, "shortcut.bias", (out_dim))
/* AttentionBlock: per-frame single-head spatial self-attention. */
#define WAN_VAE_ATTN_TENSORS(X)                                         \
  X(norm_gamma, "norm.gamma", (dim, 1, 1))                              \
  X(qkv_w, "to_qkv.weight", (3 * dim, dim, 1, 1))                       \
  X(qkv_b, "to_qkv.bias", (3 * dim))                                    \
  X(proj_w, "proj.weight", (dim, dim, 1, 1))                            \
  X(proj_b, "proj.bias", (dim))
/* Resample upsample2d / upsample3d: (the time conv, upsample3d only,) 2x
 * nearest, a 3x3 conv to dim / 2 channels. */
#define WAN_VAE_TIME_CONV_TENSORS(X)                                    \
  X(time_w, "time_conv.weight", (2 * dim, dim, 3, 1, 1))                \
  X(time_b, "time_conv.bias", (2 * dim))
#define WAN_VAE_RESAMPLE_TENSORS(X)                                     \
  X(conv_w, "resample.1.weight", (dim / 2, dim, 3, 3))                  \
  X(conv_b, "resample.1.bias", (dim / 2))
/* The decoder's own: conv2 (first), decoder.conv1 into the middle, and the
 * head (last); keys in full. */
#define WAN_VAE_CONV2_TENSORS(X)                                        \
  X(conv2_w, "conv2.weight", (z_dim, z_dim, 1, 1, 1))                   \
  X(conv2_b, "conv2.bias", (z_dim))
#define WAN_VAE_CONV1_TENSORS(X)                                        \
  X(conv1_w, "decoder.conv1.weight", (mid_dim, z_dim, 3, 3, 3))         \
  X(conv1_b, "decoder.conv1.bias", (mid_dim))
#define WAN_VAE_HEAD_TENSORS(X)                                         \
  X(head_gamma, "decoder.head.0.gamma", (head_dim, 1, 1, 1))            \
  X(head_w, "decoder.head.2.weight", (3, head_dim, 3, 3, 3))            \
  X(head_b, "decoder.head.2.bias", (3))

#define WAN_VAE_FIELD_(field, key, shape) const float *field;

typedef struct wan_vae_resblock {
  int64_t in_dim, out_dim;
  WAN_VAE_RESBLOCK_TENSORS(WAN_VAE_FIELD_)
  WAN_VAE_SHORTCUT_TENSORS(WAN_VAE_FIELD_) /* NULL if in_dim == out_dim */
} wan_vae_resblock;

typedef struct wan_vae_attn {
  int64_t dim;
  WAN_VAE_ATTN_TENSORS(WAN_VAE_FIELD_)
} wan_vae_attn;

typedef struct wan_vae_resample {
  int64_t dim;  /* channels in; dim / 2 out */
  int temporal; /* upsample3d */
  WAN_VAE_TIME_CONV_TENSORS(WAN_VAE_FIELD_) /* NULL for upsample2d */
  WAN_VAE_RESAMPLE_TENSORS(WAN_VAE_FIELD_)
} wan_vae_resample;

/* One decoder level: its residual blocks, then (all but the last) a
 * resample. Their keys are decoder.upsamples.<k>, k counted across levels. */
typedef struct wan_vae_level {
  int n_res;
  wan_vae_resblock res[WAN_VAE_MAX_RES];
  int has_up;
  wan_vae_resample up;
} wan_vae_level;

typedef struct wan_vae_weights {
  int64_t z_dim;
  WAN_VAE_CONV2_TENSORS(WAN_VAE_FIELD_)
  int64_t mid_dim; /* dims[0] */
  WAN_VAE_CONV1_TENSORS(WAN_VAE_FIELD_)
  wan_vae_resblock mid0; /* decoder.middle.0 (mid_dim -> mid_dim) */
  wan_vae_attn mid_attn; /* decoder.middle.1 */
  wan_vae_resblock mid2; /* decoder.middle.2 (mid_dim -> mid_dim) */
  int n_levels;
  wan_vae_level level[WAN_VAE_MAX_LEVELS];
  int64_t head_dim; /* last level's width */
  WAN_VAE_HEAD_TENSORS(WAN_VAE_FIELD_)
} wan_vae_weights;

#undef WAN_VAE_FIELD_

/* One tensor: its official key, shape, place in the packed buffer, and the
 * typed field it binds. */
typedef struct wan_vae_tensor {
  char name[64];
  int ndim;
  int64_t shape[5];
  int64_t numel;
  int64_t offset;     /* floats from the start of the packed buffer */
  const float **slot; /* field of the wan_vae_weights the table was made for */
} wan_vae_tensor;

/* Every decoder tensor (conv2.*, then decoder.* in module order), packed
 * one after another at WAN_VAE_ALIGN_FLOATS boundaries. */
typedef struct wan_vae_table {
  int count;
  wan_vae_tensor t[WAN_VAE_MAX_TENSORS];
  int64_t packed_floats; /* buffer size including alignment padding */
  int64_t params;        /* sum of numel */
} wan_vae_table;

/* The table of a checked config, with the structure (widths, flags) of w
 * filled in and its pointers zeroed; the slots point into w, which must
 * outlive the table's use. */
void wan_vae_table_make(const wan_vae_config *c, wan_vae_weights *w, wan_vae_table *out);
/* Points every slot at packed + offset. packed (t->packed_floats). */
void wan_vae_table_bind(const wan_vae_table *t, const float *packed);
/* Index of a key, or -1. */
int wan_vae_table_find(const wan_vae_table *t, const char *name);

/* ---------------------------------------------------------------- decoder */

/* A causal conv's memory of its input: the last n (<= 2) frames, oldest
 * first, right-aligned in frames (c, 2, hw). started: an upsample3d time
 * conv has seen its first chunk (the published "Rep" mark). */
typedef struct wan_vae_cache {
  float *frames; /* (c, WAN_VAE_CACHE_T, hw) */
  int64_t c, hw;
  int n;
  int started;
} wan_vae_cache;

/* Stores the CPU decoder can round to bf16 (round to nearest even), to
 * emulate where the CUDA decoder in bf16 keeps its tensors in bf16 and
 * measure what each costs (VAE.md "Where bf16's error comes from",
 * tests/vae/test_vae_bf16_emul.c). 0, the default, is the fp32 decoder. */
enum {
  WAN_VAE_ROUND_ACT = 1 << 0,   /* a conv's input: norm + SiLU outputs, conv2's output */
  WAN_VAE_ROUND_CONV = 1 << 1,  /* every conv's output (shortcut, qkv, proj, time conv) */
  WAN_VAE_ROUND_RES = 1 << 2,   /* the residual stream: each block's and resample's output */
  WAN_VAE_ROUND_ATTN = 1 << 3,  /* the attention's output before proj */
  WAN_VAE_ROUND_HEAD = 1 << 4,  /* the head conv's output (the frames before the clamp) */
  WAN_VAE_ROUND_ALL = (1 << 5) - 1,
  /* the CUDA decoder in bf16: everything but the residual stream, which it
   * keeps in fp32 */
  WAN_VAE_ROUND_CUDA_BF16 = WAN_VAE_ROUND_ALL & ~WAN_VAE_ROUND_RES
};

/* How the CPU decoder rounds the inputs of the products the CUDA decoder's
 * tf32 mode runs on TF32 tensor cores (wan_vae_gpu.h): not at all (the
 * default), to nearest or by truncation (kern_f32_round_tf32). */
enum { WAN_VAE_TF32_OFF = 0, WAN_VAE_TF32_NEAREST = 1, WAN_VAE_TF32_TRUNCATE = 2 };

typedef struct wan_vae_decoder {
  wan_vae_config cfg;
  int round_mask;     /* WAN_VAE_ROUND_* bits; 0: fp32 throughout */
  int tf32;           /* WAN_VAE_TF32_*; 0: fp32 products */
  int64_t h, w; /* latent size the scratch is sized for */
  int n_cache;
  wan_vae_cache cache[WAN_VAE_MAX_CACHES]; /* in the order the convs run */
  float *cache_mem;
  int64_t buf_floats;
  float *buf[4];      /* activations, each buf_floats */
  float *attn_scratch; /* kern_cpu_frame_attention_scratch of the middle */
} wan_vae_decoder;

/* Decoder state for latents of h x w: every cache and buffer a decode
 * needs. Returns SP_OK, SP_ERR_INPUT (bad config or size, logged) or
 * SP_ERR_RUNTIME (out of memory, logged). */
int wan_vae_decoder_create(const wan_vae_config *c, int64_t h, int64_t w, wan_vae_decoder **out);
void wan_vae_decoder_free(wan_vae_decoder *d);
/* Rounds the stores of mask (WAN_VAE_ROUND_*) to bf16 in the decodes that
 * follow; 0 turns it off. */
void wan_vae_decoder_round(wan_vae_decoder *d, int mask);
/* Emulates the CUDA decoder's tf32 mode in the decodes that follow (mode
 * WAN_VAE_TF32_*; OFF turns it off): the input of every convolution the
 * GPU runs through cuDNN (all but conv2, which the GPU computes in fp32 in
 * its latent-in kernel), the convolution caches, and the middle
 * attention's q, k and v (its GEMMs' operands) rounded to TF32; the
 * residual stream itself stays fp32 (a copy is rounded where it is a
 * conv's input). The probabilities the GPU's P v GEMM rounds too are not
 * (kern_cpu_frame_attention makes them inside), nor are the weights: the
 * caller rounds the conv weights (tests/common/sp_test_vae.h). VAE.md
 * "Precisions", tests/vae/test_vae_tf32_emul.c. */
void wan_vae_decoder_tf32(wan_vae_decoder *d, int mode);
/* Host floats the decoder holds (caches and scratch) for latents h x w. */
int64_t wan_vae_decoder_floats(const wan_vae_config *c, int64_t h, int64_t w);

/* Receives one chunk's video frames (3, n, H, W), clamped, the first of
 * them frame t0 of the video; the buffer is the decoder's and valid only
 * during the call. Returns 0 to go on; anything else stops the decode,
 * which returns it. */
typedef int (*wan_vae_frames_fn)(void *user, const float *frames, int64_t t0, int64_t n);

/* The decode of wan_vae_decode, handing each chunk's frames to fn as they
 * are made (the whole video is never held). Returns 0 or fn's stop code. */
int wan_vae_decode_stream(wan_vae_decoder *d, const wan_vae_weights *wt, const float *latents,
                          int64_t F, wan_vae_frames_fn fn, void *user);

/* latents (z_dim, F, h, w), normalised as the DiT produces them ->
 * video (3, wan_vae_out_frames(F), s h, s w), s = wan_vae_out_scale,
 * clamped to [-1, 1]. Weights bound through the table of d's config. */
void wan_vae_decode(wan_vae_decoder *d, const wan_vae_weights *wt, const float *latents,
                    int64_t F, float *video);

#endif
