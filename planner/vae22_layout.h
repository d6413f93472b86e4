/* The device layout of the CUDA Wan 2.2 VAE (ranks/nets/wan_vae22/cuda/):
 * every buffer of its one device allocation, for the decoder or the
 * encoder, a size and an element width, with what it holds, its offset and
 * its bytes. wan_vae22_gpu_bytes reports this layout's total and the CUDA
 * coder carves its pointers at these offsets: one layout, two users.
 *
 * Pure C11 like the rest of planner/: plain sizes in, offsets out. The
 * caller (ranks/nets/wan_vae22/wan_vae22_gpu_layout.c) derives the shape
 * from the VAE config and counts the converted weights' bytes.
 *
 * Activations are channels-last, (T, H, W, C), in the precision (2 or 4
 * bytes), the residual stream x and a level's kept input k in fp32. Per
 * chunk the coder uses these roles, each one buffer sized for the largest
 * use over a whole run (a later chunk's frame counts):
 *   x       the residual stream: a block's input, updated to its output
 *   y       a convolution's raw output (no bias yet): the qkv, a time
 *           conv's output, a resample's convolution output, the head's
 *   s       a causal conv's input: its cached frames copied in front, the
 *           chunk's frames written behind them by the producer; also the
 *           normed attention input, the projection output, the upsampled
 *           input of a 3x3 conv (decoder), the zero-padded input of a
 *           stride-2 conv and a downsample3d's time conv input (encoder)
 *   r       a shortcut's output, the attention output
 *   k       a level's input, kept for its AvgDown3D / DupUp3D shortcut
 *   scores  the attention's scores and probabilities for a chunk of rows
 *   io      decoder: one latent frame (z_dim, h w) fp32; encoder: a chunk's
 *           latents (z_dim, t, h w) fp32
 *   frames  decoder: a chunk's clamped video (3, t, H, W) fp32; encoder: a
 *           chunk of the video (3, t, H, W) fp32
 * plus the weights, the cuDNN and cuBLASLt workspaces and one cache per
 * causal convolution or downsample3d in the order they run (2 frames of a
 * causal conv's input channels, 1 frame of a downsample3d's). */
#ifndef PLAN_VAE22_LAYOUT_H
#define PLAN_VAE22_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PLAN_VAE22_MAX_LEVELS 4
#define PLAN_VAE22_MAX_CACHES 64
#define PLAN_VAE22_CACHE_T 2 /* frames a causal conv keeps */
#define PLAN_VAE22_CHUNK 4   /* video frames of an encoder chunk after the first */
/* The patchified video's 12 channels as the device holds them: the
 * encoder's input and the decoder head's output padded with zero channels
 * (zero filters) to a multiple of 8. */
#define PLAN_VAE22_IMG_CH 16

typedef enum plan_vae22_buf {
  PLAN_VAE22_WEIGHTS = 0, /* converted weights (caller's bytes) */
  PLAN_VAE22_IO,          /* latents in (decoder) or out (encoder), fp32 */
  PLAN_VAE22_X,           /* residual stream, fp32 */
  PLAN_VAE22_Y,           /* conv output */
  PLAN_VAE22_S,           /* conv input with cached frames in front; upsampled; padded */
  PLAN_VAE22_R,           /* shortcut / attention output */
  PLAN_VAE22_K,           /* a level's input for its shortcut, fp32 */
  PLAN_VAE22_SCORES,      /* attention scores (fp32) and probabilities */
  PLAN_VAE22_FRAMES,      /* video chunk (3, t, H, W) fp32: out (decoder), in (encoder) */
  PLAN_VAE22_CONV_WS,     /* cuDNN workspace */
  PLAN_VAE22_GEMM_WS,     /* cuBLASLt workspace */
  PLAN_VAE22_CACHE,       /* cache i: (frames_i, hw_i, c_i), index = run order */
  PLAN_VAE22_KINDS
} plan_vae22_buf;

/* One part's structure (from the VAE config), its size and the element
 * width. */
typedef struct plan_vae22_shape {
  int encoder;                              /* 1: the encoder, 0: the decoder */
  int64_t z_dim;                            /* latent channels (48) */
  int n_levels;                             /* 1..PLAN_VAE22_MAX_LEVELS */
  int64_t dim[PLAN_VAE22_MAX_LEVELS + 1];   /* the part's widths dims[0..n_levels] */
  int temporal[PLAN_VAE22_MAX_LEVELS];      /* level i's resample halves (encoder) or
                                               doubles (decoder) the frames */
  int64_t res_per_level;                    /* residual blocks per level */
  int64_t h, w;     /* decoder: the latent size; encoder: the patchified video (H/2, W/2) */
  int elem_bytes;   /* 2 (bf16) or 4 (fp32) */
  uint64_t weight_bytes; /* the converted weights, as the caller lays them */
} plan_vae22_shape;

typedef struct plan_vae22_buffer {
  plan_vae22_buf kind;
  int index;       /* cache index, else 0 */
  uint64_t offset; /* from the allocation's start, a multiple of PLAN_LAYOUT_ALIGN */
  uint64_t bytes;
} plan_vae22_buffer;

typedef struct plan_vae22_layout {
  int count;
  plan_vae22_buffer b[PLAN_VAE22_KINDS + PLAN_VAE22_MAX_CACHES];
  int n_cache;
  int64_t cache_c[PLAN_VAE22_MAX_CACHES];  /* channels of cache i */
  int64_t cache_hw[PLAN_VAE22_MAX_CACHES]; /* positions per frame of cache i */
  int cache_t[PLAN_VAE22_MAX_CACHES];      /* frames cache i keeps (2 or 1) */
  int64_t chunk_frames;                    /* video frames of a later chunk */
  int64_t out_h, out_w;                    /* latent size (encoder), patchified video (decoder) */
  int64_t score_rows;                      /* attention query rows per scores chunk */
  uint64_t elems[PLAN_VAE22_KINDS];        /* x, y, s, r, k, io, frames: elements of the role */
  uint64_t conv_ws_bytes;                  /* the cuDNN workspace */
  uint64_t total;                          /* bytes: the end of the last buffer */
} plan_vae22_layout;

/* What kind k holds, in a few words. */
const char *plan_vae22_buf_name(plan_vae22_buf k);

/* Lays the part out. PLAN_EINVAL (message in err) for a shape no VAE has:
 * sizes below 1, too many levels or caches, an encoder size that does not
 * halve evenly at every downsample, an element width other than 2 or 4, a
 * total that overflows. */
int plan_vae22_layout_make(const plan_vae22_shape *s, plan_vae22_layout *out, char *err,
                           size_t errlen);

/* The buffer of kind k and index i, NULL when the layout has none. */
const plan_vae22_buffer *plan_vae22_layout_find(const plan_vae22_layout *l, plan_vae22_buf kind,
                                                int index);

#ifdef __cplusplus
}
#endif

#endif
