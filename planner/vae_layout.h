/* The device layout of the CUDA VAE decoder (ranks/nets/wan_vae/wan_vae_gpu.h):
 * every buffer of its one device allocation, with what it holds, its
 * offset and its bytes, for a decoder structure, a latent size and an
 * element width. wan_vae_gpu_bytes reports this layout's total and the
 * CUDA decoder carves its pointers at these offsets: one layout, two users.
 *
 * Pure C11 like the rest of planner/: plain sizes in, offsets out. The
 * caller (ranks/nets/wan_vae/wan_vae_gpu_layout.c) derives the shape from the VAE
 * config and counts the converted weights' bytes.
 *
 * Activations are channels-last, (T, H, W, C), in the decoder's precision
 * (2 or 4 bytes), the residual stream x in fp32. Per chunk the decoder
 * uses five roles, each one buffer sized for the largest use over the
 * whole decode (a later chunk's frame counts; chunk 0 has one frame
 * everywhere and needs less):
 *   x       the current activation, the residual stream (a block's input,
 *           updated in place to its output); fp32 in both precisions
 *           (4-byte elements), since rounding it to bf16 at every block
 *           costs more than any other store (VAE.md)
 *   y       a convolution's raw output (no bias yet), the qkv of the
 *           attention, the time conv's 2C channels, a resample's 2-D conv
 *           output, the head's output
 *   s       a cached convolution's input: WAN_VAE_CACHE_T = 2 frames copied
 *           from its cache, then the chunk's frames written by the producer
 *           (norm, SiLU) right behind them, so the convolution runs without
 *           time padding; also the normed attention input, the projection
 *           output and the upsampled input of a resample's 2-D conv
 *   r       the shortcut's output, the attention output
 *   scores  the attention's fp32 scores and softmax probabilities for a
 *           chunk of query rows (plan_vae_scores_bytes)
 * plus the weights, the latent frame (fp32), the clamped output frames
 * (fp32, (3, t, H, W)), the cuDNN and cuBLASLt workspaces, and one cache
 * (2 frames of the conv's input channels) per cached convolution, in the
 * order the convolutions run. */
#ifndef PLAN_VAE_LAYOUT_H
#define PLAN_VAE_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PLAN_VAE_MAX_LEVELS 4
#define PLAN_VAE_MAX_CACHES 64
#define PLAN_VAE_CACHE_T 2 /* frames a cached conv keeps (WAN_VAE_CACHE_T) */
/* cuDNN convolution workspace: at least this, or a multiple of the bytes
 * of the largest activation (x) when more; algorithms needing more are not
 * chosen. cuDNN 9.14 has only implicit_precomp_gemm for fp32 channels-last
 * convolutions, and its workspace grows with the input: measured on an
 * H200 at 480p, 614 MB for the 3x3x3 conv on (3, 480, 832, 96) and 923 MB
 * for the 3x3 conv on (4, 240, 416, 384): 1.0 and 1.5 times the bytes of
 * their inputs. The largest input of a convolution is the upsampled
 * tensor (s) or x: fp32 takes 2 x the larger of the two, bf16 (whose
 * algorithms need far less) 9/8 x. */
#define PLAN_VAE_CONV_WS_MIN ((uint64_t)256 << 20)
/* cuBLASLt workspace of the attention GEMMs. */
#define PLAN_VAE_GEMM_WS_BYTES ((uint64_t)32 << 20)
/* At most this many bytes of scores and probabilities at once: the query
 * rows of an attention chunk are as many as fit (at least one). The
 * middle attention is under 1% of a decode or an encode (6 of 702 ms of
 * the bf16 encode at 480p on an H100), so the chunks are kept small: the
 * scratch is part of the peak (480p in bf16: 6,240 keys, 1,792 query rows
 * a chunk, 4 chunks). */
#define PLAN_VAE_SCORES_CAP ((uint64_t)64 << 20)
/* Output channels of the head conv as stored on the device: the 3 RGB
 * channels padded with zero filters, so the conv's channel count suits
 * tensor-core kernels. */
#define PLAN_VAE_HEAD_CO 8

typedef enum plan_vae_buf {
  PLAN_VAE_WEIGHTS = 0, /* converted weights (caller's bytes) */
  PLAN_VAE_LATENT,      /* (z_dim, h w) fp32: one latent frame */
  PLAN_VAE_X,           /* activation */
  PLAN_VAE_Y,           /* conv output */
  PLAN_VAE_S,           /* conv input with its 2 cache frames in front; upsampled */
  PLAN_VAE_R,           /* shortcut / attention output */
  PLAN_VAE_SCORES,      /* attention scores (fp32) and probabilities */
  PLAN_VAE_FRAMES,      /* (3, t, H, W) fp32 clamped output of a chunk */
  PLAN_VAE_CONV_WS,     /* cuDNN workspace */
  PLAN_VAE_GEMM_WS,     /* cuBLASLt workspace */
  PLAN_VAE_CACHE,       /* cache i: (2, hw_i, c_i), index = run order */
  PLAN_VAE_KINDS
} plan_vae_buf;

/* The decoder's structure (from wan_vae_config), the latent size and the
 * element width. */
typedef struct plan_vae_shape {
  int64_t z_dim;                          /* latent channels (16) */
  int64_t mid_dim;                        /* dims[0]: conv1, middle */
  int n_levels;                           /* 1..PLAN_VAE_MAX_LEVELS */
  int64_t level_dim[PLAN_VAE_MAX_LEVELS]; /* output width of level i (dims[i + 1]) */
  int64_t res_per_level;                  /* residual blocks per level (num_res_blocks + 1) */
  int temporal_up[PLAN_VAE_MAX_LEVELS - 1]; /* resample i doubles the frames */
  int64_t h, w;                           /* latent size */
  int elem_bytes;                         /* 2 (bf16) or 4 (fp32) */
  uint64_t weight_bytes;                  /* the converted weights, as the caller lays them */
} plan_vae_shape;

typedef struct plan_vae_buffer {
  plan_vae_buf kind;
  int index;       /* cache index, else 0 */
  uint64_t offset; /* from the allocation's start, a multiple of PLAN_LAYOUT_ALIGN */
  uint64_t bytes;
} plan_vae_buffer;

typedef struct plan_vae_layout {
  int count;
  plan_vae_buffer b[PLAN_VAE_KINDS + PLAN_VAE_MAX_CACHES];
  int n_cache;
  int64_t cache_c[PLAN_VAE_MAX_CACHES];  /* channels of cache i */
  int64_t cache_hw[PLAN_VAE_MAX_CACHES]; /* positions per frame of cache i */
  int cache_t[PLAN_VAE_MAX_CACHES];      /* frames of cache i: PLAN_VAE_CACHE_T, or 1 for the
                                          * encoder's downsample3d */
  int64_t frames_per_chunk;              /* video frames of a later chunk (the encoder's:
                                          * latent frames) */
  int64_t out_h, out_w;                  /* video size (the encoder's: latent size) */
  int64_t score_rows;                    /* attention query rows per scores chunk */
  uint64_t elems[PLAN_VAE_KINDS];        /* x, y, s, r: elements of the role */
  uint64_t conv_ws_bytes;                /* the cuDNN workspace (PLAN_VAE_CONV_WS_MIN) */
  uint64_t total;                        /* bytes: the end of the last buffer */
} plan_vae_layout;

/* Bytes of fp32 scores and probabilities (elem_bytes each) for `rows`
 * query rows against hw keys, each row padded to 8 elements, the two parts
 * PLAN_LAYOUT_ALIGN aligned. 0 for sizes below 1. */
uint64_t plan_vae_scores_bytes(int64_t rows, int64_t hw, int elem_bytes);
/* Keys per row as stored (hw padded to 8). */
int64_t plan_vae_scores_ld(int64_t hw);
/* Where the probabilities start in that scratch: after the scores. */
uint64_t plan_vae_scores_p_offset(int64_t rows, int64_t hw);

/* The steps of every Wan VAE layout's walk and allocation (this file's
 * and vae22_layout.h's). */
/* a b c, or 0 with *over set when the product overflows. */
uint64_t plan_vae_mul3(int *over, uint64_t a, uint64_t b, uint64_t c);
/* Query rows of an attention scores chunk over hw keys (elem_bytes e
 * probabilities): as many as PLAN_VAE_SCORES_CAP holds (the alignment
 * makes the exact count a little below cap / bytes per row), at least
 * one, at most hw. */
int64_t plan_vae_score_rows(int64_t hw, int e);
/* The cuDNN workspace (PLAN_VAE_CONV_WS_MIN) for the largest x and s of
 * x_bytes and s_bytes in elements of e bytes. */
uint64_t plan_vae_conv_ws_bytes(uint64_t x_bytes, uint64_t s_bytes, int e);
/* The offset of the next buffer of bytes in a bump allocation ending at
 * *total (the next multiple of PLAN_LAYOUT_ALIGN), *total moved past it;
 * 0 with *over set when it overflows. */
uint64_t plan_vae_bump(uint64_t *total, uint64_t bytes, int *over);

/* What kind k holds, in a few words. */
const char *plan_vae_buf_name(plan_vae_buf k);

/* Lays the decoder out. PLAN_EINVAL (message in err) for a shape no decoder
 * has: sizes below 1, too many levels or caches, an element width other
 * than 2 or 4, a total that overflows. */
int plan_vae_layout_make(const plan_vae_shape *s, plan_vae_layout *out, char *err,
                         size_t errlen);

/* The buffer of kind k and index i, NULL when the layout has none. */
const plan_vae_buffer *plan_vae_layout_find(const plan_vae_layout *l, plan_vae_buf kind,
                                            int index);

/* ------------------------------------------------------------ the encoder
 *
 * The CUDA VAE encoder (ranks/nets/wan_vae/cuda/wan_vae_enc_gpu.c) in the
 * same kinds of buffers, walked as it runs a chunk of chunk_t frames (4,
 * or 1 for a single image):
 *   FRAMES  the chunk's frames as the host holds them, (3, t, H, W) fp32
 *   S       also the downsamples' zero-padded input (t, h + 1, w + 1, c),
 *           and downsample3d's time conv input (its cached frame, then the
 *           spatial step's t frames)
 *   LATENT  the chunk's normalised latents (z_dim, t', h', w') fp32
 *   CACHE   one per causal conv (2 frames) and per downsample3d (1 frame:
 *           the last of its spatial output), in run order
 * conv1 takes the RGB channels padded with zeros to PLAN_VAE_ENC_IN_CH. */

#define PLAN_VAE_ENC_IN_CH 8 /* the encoder's 3 input channels as stored on the device */
#define PLAN_VAE_ENC_CHUNK 4 /* frames of a later chunk (WAN_VAE_ENC_CHUNK) */

typedef struct plan_vae_enc_shape {
  int64_t z_dim;                          /* latent channels (16); the head gives 2 z_dim */
  int64_t in_dim;                         /* dims[0]: conv1's width */
  int n_levels;                           /* 1..PLAN_VAE_MAX_LEVELS */
  int64_t level_dim[PLAN_VAE_MAX_LEVELS]; /* output width of level i (dims[i + 1]) */
  int64_t res_per_level;                  /* residual blocks per level (num_res_blocks) */
  int temporal_down[PLAN_VAE_MAX_LEVELS - 1]; /* resample i halves the frames */
  int64_t chunk_t;                        /* frames of the largest chunk: 4, or 1 (an image) */
  int64_t h, w;                           /* video size */
  int elem_bytes;                         /* 2 (bf16) or 4 (fp32) */
  uint64_t weight_bytes;                  /* the converted weights, as the caller lays them */
} plan_vae_enc_shape;

/* Lays the encoder out. PLAN_EINVAL (message in err) for a shape no
 * encoder has: sizes below the downsamples' 2 pixels, a chunk other than 1
 * or 4 frames, too many levels, caches or temporal halvings, an element
 * width other than 2 or 4, a total that overflows. */
int plan_vae_enc_layout_make(const plan_vae_enc_shape *s, plan_vae_layout *out, char *err,
                             size_t errlen);

/* ------------------------------------------------------------ tiling
 *
 * A latent too large for the device is decoded in overlapping spatial
 * tiles, each through the whole decoder (ranks/nets/wan_vae/wan_vae_tile.c, VAE.md
 * "Tiling"). Along an axis of n latent positions, tiles of t positions
 * overlapping by at least o: count = 1 when t >= n, else
 * 1 + ceil((n - t) / (t - o)); tile i starts at floor(i (n - t) / (count - 1)),
 * so all tiles have the same size (one decoder for all), the first starts
 * at 0, the last ends at n, and neighbours overlap by o or more. */

/* Latent overlap of tiles chosen from a budget: 8 latent positions (64
 * pixels), the overlap of the published tiled decoders. */
#define PLAN_VAE_TILE_OVERLAP 8

typedef struct plan_vae_tiles {
  int64_t th, tw;    /* tile size, latent positions */
  int64_t ny, nx;    /* tiles down and across */
  int64_t overlap;   /* least overlap of neighbours, latent positions */
  uint64_t bytes;    /* the layout total of one tile */
} plan_vae_tiles;

/* Tiles along an axis of n for tile t and overlap o (0 <= o < t, or
 * t >= n); 0 for arguments outside that. */
int64_t plan_vae_tile_count(int64_t n, int64_t t, int64_t o);
/* Start of tile i of count along an axis of n, tile t. */
int64_t plan_vae_tile_start(int64_t n, int64_t t, int64_t count, int64_t i);

/* The tiling of s's latent (s->h x s->w) whose tile layout fits budget
 * bytes: no tiling (1 x 1, the whole latent) when the whole layout fits;
 * else the fewest tiles, and among as many tiles the largest, each tile
 * at least overlap + 1 per tiled side. PLAN_EINVAL (message in err) when
 * the shape is bad or not even the smallest tiles fit. */
int plan_vae_tiles_pick(const plan_vae_shape *s, int64_t overlap, uint64_t budget,
                        plan_vae_tiles *out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
