/* The CUDA Wan 2.2 VAE's device layout (planner/vae22_layout.h through
 * ranks/nets/wan_vae22/wan_vae22_gpu.h), in every build:
 * - the caches of the published decoder (latent 44 x 80, TI2V-5B's 720p)
 *   and encoder (704 x 1280 pixels) against an enumeration of the
 *   published modules in run order, written out here: each causal conv's
 *   input channels and size, 2 frames; each downsample3d's 1 frame;
 * - the residual stream's role against the largest activation worked out
 *   by hand from the published widths (decoder: the last level's first
 *   block, 512 channels of 4 frames of 352 x 640; encoder: level 0's 160
 *   channels of 4 frames of 352 x 640);
 * - every buffer 256-byte aligned, none overlapping, the total the end of
 *   the last; the weights' bytes the device forms' (bf16 half of fp32 for
 *   the convolutions); bf16 smaller than fp32;
 * - the description's layout function (net.h) is this one;
 * - refused: an encoder size that does not halve at a downsample, a width
 *   the CUDA coders cannot take, 3 bytes an element. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "log.h"
#include "sp_test.h"
#include "vae22_layout.h"
#include "wan_vae22.h"
#include "wan_vae22_gpu.h"

typedef struct want_cache {
  int64_t c, hw;
  int t;
} want_cache;

/* The published decoder's caches at latent h x w, in run order: conv1 on
 * z, the middle's two blocks, each level's 3 blocks (their two convs) and
 * upsample3d's time conv at levels 0 and 1, the head. */
static int decoder_caches(int64_t hw, want_cache *out) {
  const int64_t dims[5] = {1024, 1024, 1024, 512, 256};
  int n = 0;
  out[n++] = (want_cache){48, hw, 2};
  for (int i = 0; i < 4; i++) out[n++] = (want_cache){1024, hw, 2};
  for (int l = 0; l < 4; l++) {
    int64_t in = dims[l];
    for (int b = 0; b < 3; b++) {
      out[n++] = (want_cache){in, hw, 2};
      out[n++] = (want_cache){dims[l + 1], hw, 2};
      in = dims[l + 1];
    }
    if (l < 2) out[n++] = (want_cache){dims[l + 1], hw, 2};
    if (l < 3) hw *= 4;
  }
  out[n++] = (want_cache){256, hw, 2};
  return n;
}

/* The published encoder's caches for the patchified size hw: conv1 on the
 * 16 (12 padded) channels, each level's 2 blocks, downsample3d's kept frame
 * at levels 1 and 2 (after the spatial step), the middle, the head. */
static int encoder_caches(int64_t hw, want_cache *out) {
  const int64_t dims[5] = {160, 160, 320, 640, 640};
  int n = 0;
  out[n++] = (want_cache){PLAN_VAE22_IMG_CH, hw, 2};
  for (int l = 0; l < 4; l++) {
    int64_t in = dims[l];
    for (int b = 0; b < 2; b++) {
      out[n++] = (want_cache){in, hw, 2};
      out[n++] = (want_cache){dims[l + 1], hw, 2};
      in = dims[l + 1];
    }
    if (l < 3) hw /= 4;
    if (l == 1 || l == 2) out[n++] = (want_cache){dims[l + 1], hw, 1};
  }
  for (int i = 0; i < 4; i++) out[n++] = (want_cache){640, hw, 2};
  out[n++] = (want_cache){640, hw, 2};
  return n;
}

static void check_buffers(const plan_vae22_layout *l, const char *what) {
  uint64_t end = 0;
  for (int i = 0; i < l->count; i++) {
    const plan_vae22_buffer *b = &l->b[i];
    CHECK(b->offset % PLAN_LAYOUT_ALIGN == 0 && b->offset >= end, "%s: %s %d at %llu, after %llu",
          what, plan_vae22_buf_name(b->kind), b->index, (unsigned long long)b->offset,
          (unsigned long long)end);
    end = b->offset + b->bytes;
  }
  CHECK(end == l->total, "%s: total %llu, the last buffer ends at %llu", what,
        (unsigned long long)l->total, (unsigned long long)end);
}

static void check_caches(const plan_vae22_layout *l, const want_cache *want, int n, int E,
                         const char *what) {
  CHECK(l->n_cache == n, "%s: %d caches, the published modules have %d", what, l->n_cache, n);
  for (int i = 0; i < n && i < l->n_cache; i++) {
    CHECK(l->cache_c[i] == want[i].c && l->cache_hw[i] == want[i].hw &&
              l->cache_t[i] == want[i].t,
          "%s: cache %d is %lld x %lld x %d, want %lld x %lld x %d", what, i,
          (long long)l->cache_c[i], (long long)l->cache_hw[i], l->cache_t[i],
          (long long)want[i].c, (long long)want[i].hw, want[i].t);
    const plan_vae22_buffer *b = plan_vae22_layout_find(l, PLAN_VAE22_CACHE, i);
    CHECK(b && b->bytes == (uint64_t)(want[i].t * want[i].hw * want[i].c * E),
          "%s: cache %d's bytes", what, i);
  }
}

static void check_published(void) {
  wan_vae22_config c;
  wan_vae22_config_published(&c);
  static plan_vae22_layout l16, l32;
  static want_cache want[64];
  /* the decoder at TI2V-5B's 1280 x 704: latent 44 x 80 */
  CHECK(wan_vae22_gpu_layout(&c, WAN_VAE22_DECODER, 44, 80, WAN_VAE_GPU_BF16, &l16) == SP_OK &&
            wan_vae22_gpu_layout(&c, WAN_VAE22_DECODER, 44, 80, WAN_VAE_GPU_FP32, &l32) == SP_OK,
        "published decoder layout refused");
  check_buffers(&l16, "decoder bf16");
  check_buffers(&l32, "decoder fp32");
  check_caches(&l16, want, decoder_caches(44 * 80, want), 2, "decoder bf16");
  check_caches(&l32, want, decoder_caches(44 * 80, want), 4, "decoder fp32");
  const uint64_t x = 4ull * 352 * 640 * 512;
  CHECK(l16.elems[PLAN_VAE22_X] == x && l32.elems[PLAN_VAE22_X] == x,
        "decoder: residual stream %llu elements, want %llu",
        (unsigned long long)l16.elems[PLAN_VAE22_X], (unsigned long long)x);
  CHECK(l16.chunk_frames == 4 && l16.out_h == 704 && l16.out_w == 1280,
        "decoder: %lld frames a chunk of %lldx%lld", (long long)l16.chunk_frames,
        (long long)l16.out_h, (long long)l16.out_w);
  CHECK(l16.total < l32.total, "decoder: bf16 not smaller than fp32");
  const uint64_t w16 = plan_vae22_layout_find(&l16, PLAN_VAE22_WEIGHTS, 0)->bytes;
  const uint64_t w32 = plan_vae22_layout_find(&l32, PLAN_VAE22_WEIGHTS, 0)->bytes;
  CHECK(w16 < w32 && w32 >= 555051580ull * 4 && w16 >= 555051580ull * 2,
        "decoder weights: bf16 %llu, fp32 %llu bytes for 555,051,580 parameters",
        (unsigned long long)w16, (unsigned long long)w32);
  /* the encoder of a 704 x 1280 video */
  CHECK(wan_vae22_gpu_layout(&c, WAN_VAE22_ENCODER, 704, 1280, WAN_VAE_GPU_BF16, &l16) == SP_OK,
        "published encoder layout refused");
  check_buffers(&l16, "encoder bf16");
  check_caches(&l16, want, encoder_caches(352 * 640, want), 2, "encoder");
  CHECK(l16.elems[PLAN_VAE22_X] == 4ull * 352 * 640 * 160,
        "encoder: residual stream %llu elements", (unsigned long long)l16.elems[PLAN_VAE22_X]);
  CHECK(l16.out_h == 44 && l16.out_w == 80, "encoder: latent %lldx%lld", (long long)l16.out_h,
        (long long)l16.out_w);
  CHECK(l16.elems[PLAN_VAE22_FRAMES] == 3ull * 4 * 704 * 1280, "encoder: the video chunk");
  printf("published at 720p: decoder %.2f GiB bf16, %.2f GiB fp32; encoder %.2f GiB bf16\n",
         (double)wan_vae22_gpu_bytes(&c, WAN_VAE22_DECODER, 44, 80, WAN_VAE_GPU_BF16) / (1 << 30),
         (double)l32.total / (1 << 30), (double)l16.total / (1 << 30));
}

static void check_description(void) {
  wan_vae22_config c;
  wan_vae22_config_published(&c);
  static plan_vae22_layout a, b;
  wan_vae22_gpu_layout(&c, WAN_VAE22_DECODER, 5, 7, WAN_VAE_GPU_BF16, &a);
  plan_vae22_shape s = {0};
  s.encoder = 0;
  s.z_dim = 48;
  s.n_levels = 4;
  for (int i = 0; i <= 4; i++) s.dim[i] = wan_vae22_dec_dim(&c, i);
  s.temporal[0] = s.temporal[1] = 1;
  s.res_per_level = 3;
  s.h = 5;
  s.w = 7;
  s.elem_bytes = 2;
  s.weight_bytes = plan_vae22_layout_find(&a, PLAN_VAE22_WEIGHTS, 0)->bytes;
  char err[200];
  CHECK(wan_vae22_net()->layout(&s, &b, err, sizeof err) == 0 && b.total == a.total,
        "the description's layout is not the counted one: %s", err);
}

static void check_refusals(void) {
  wan_vae22_config c;
  wan_vae22_config_published(&c);
  static plan_vae22_layout l;
  const int level = sp_log_level();
  sp_log_set_level(-1);
  CHECK(wan_vae22_gpu_layout(&c, WAN_VAE22_ENCODER, 24, 32, WAN_VAE_GPU_BF16, &l) != SP_OK,
        "encoder video of 24 rows accepted");
  CHECK(wan_vae22_gpu_bytes(&c, WAN_VAE22_DECODER, 0, 8, WAN_VAE_GPU_FP32) < 0,
        "latent of 0 rows accepted");
  c.dim = 12; /* AvgDown3D splits evenly, but 12 channels are not a multiple of 8 */
  CHECK(wan_vae22_gpu_bytes(&c, WAN_VAE22_ENCODER, 32, 32, WAN_VAE_GPU_FP32) < 0,
        "encoder width 12 accepted");
  sp_log_set_level(level);
  plan_vae22_shape s = {0};
  s.z_dim = 48;
  s.n_levels = 2;
  s.dim[0] = s.dim[1] = s.dim[2] = 8;
  s.res_per_level = 1;
  s.h = s.w = 4;
  s.elem_bytes = 3;
  char err[200];
  CHECK(plan_vae22_layout_make(&s, &l, err, sizeof err) != 0, "3-byte elements accepted");
  s.elem_bytes = 2;
  s.encoder = 1;
  s.h = 3;
  CHECK(plan_vae22_layout_make(&s, &l, err, sizeof err) != 0, "an odd encoder size accepted");
}

int main(void) {
  sp_test_begin("test_vae22_layout");
  check_published();
  check_description();
  check_refusals();
  return sp_test_end();
}
