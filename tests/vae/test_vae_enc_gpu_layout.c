/* The CUDA VAE encoder's device layout (planner/vae_layout.h
 * plan_vae_enc_layout_make through ranks/nets/wan_vae/wan_vae_gpu_layout.h),
 * on the CPU:
 * - the published config at 480x832, chunks of 4 frames: the role sizes
 *   and the caches worked out by hand from the encoder's walk (below), 22
 *   two-frame caches and 2 one-frame caches;
 * - for the published config and random small ones, both precisions,
 *   videos and single images: buffers 256-byte aligned, in order, not
 *   overlapping, total = the end of the last = wan_vae_gpu_enc_bytes; the
 *   latent size and frames per chunk; an image's layout below a video's;
 *   the weights between the parameter bytes and that plus the alignment
 *   and conv1's padded input channels;
 * - bytes monotone in H and in W;
 * - refusals: no encoder, widths not a multiple of 8, sizes the encoder
 *   refuses, bad shapes given to the planner directly;
 * and prints the device bytes at 480x832 and 720x1280. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "log.h"
#include "sp_test.h"
#include "sp_test_vae.h"
#include "vae_layout.h"
#include "wan_vae.h"
#include "wan_vae_enc.h"
#include "wan_vae_gpu.h"
#include "wan_vae_gpu_layout.h"

static plan_vae_layout lay;

static void published(wan_vae_config *c) {
  wan_vae_config_published(c);
  c->encoder = 1;
}

static void check_published_480p(void) {
  wan_vae_config c;
  published(&c);
  CHECK(wan_vae_gpu_enc_layout(&c, 81, 480, 832, WAN_VAE_GPU_BF16, &lay) == SP_OK,
        "published refused");
  /* By hand: conv1 and level 0 at t = 4, 480x832, 96 wide; level 1 at
   * 240x416 (96 -> 192), level 2 at 120x208 and t = 2 (192 -> 384),
   * level 3, the middle and the head at 60x104 and t = 1 (384). x and y:
   * conv1's output (4, 480, 832, 96); s: a level-0 conv's input with its 2
   * cached frames (6, 480, 832, 96); r: level 1's shortcut (4, 240, 416,
   * 192). */
  const uint64_t HW = 480 * 832;
  CHECK(lay.elems[PLAN_VAE_X] == 4 * HW * 96, "x %llu", (unsigned long long)lay.elems[PLAN_VAE_X]);
  CHECK(lay.elems[PLAN_VAE_Y] == 4 * HW * 96, "y %llu", (unsigned long long)lay.elems[PLAN_VAE_Y]);
  CHECK(lay.elems[PLAN_VAE_S] == 6 * HW * 96, "s %llu", (unsigned long long)lay.elems[PLAN_VAE_S]);
  CHECK(lay.elems[PLAN_VAE_R] == 4 * HW / 4 * 192, "r %llu",
        (unsigned long long)lay.elems[PLAN_VAE_R]);
  /* caches: conv1, 2 per residual block (2 per level, 4 levels, 2 + 2 in
   * the middle), the head: 22 of 2 frames; the two downsample3d: 1 frame */
  int two = 0, one = 0;
  uint64_t cache = 0;
  for (int i = 0; i < lay.n_cache; i++) {
    two += lay.cache_t[i] == 2;
    one += lay.cache_t[i] == 1;
    cache += (uint64_t)lay.cache_t[i] * (uint64_t)lay.cache_c[i] * (uint64_t)lay.cache_hw[i];
  }
  CHECK(lay.n_cache == 24 && two == 22 && one == 2, "%d caches (%d of 2 frames, %d of 1)",
        lay.n_cache, two, one);
  /* 2 x 8 x HW (conv1) + 2 x 4 x 96 x HW (level 0) + 2 x (96 + 3 x 192) x
   * HW / 4 (level 1) + 192 x HW / 16 (its downsample3d) + 2 x (192 + 3 x
   * 384) x HW / 16 (level 2) + 384 x HW / 64 (its downsample3d) + 2 x 9 x
   * 384 x HW / 64 (level 3, the middle, the head) */
  const uint64_t want = 2 * 8 * HW + 2 * 4 * 96 * HW + 2 * 672 * HW / 4 + 192 * HW / 16 +
                        2 * 1344 * HW / 16 + 384 * HW / 64 + 2 * 9 * 384 * HW / 64;
  CHECK(cache == want, "cache elements %llu, by hand %llu", (unsigned long long)cache,
        (unsigned long long)want);
  CHECK(lay.frames_per_chunk == 1 && lay.out_h == 60 && lay.out_w == 104,
        "chunk %lld latent frames of %lldx%lld", (long long)lay.frames_per_chunk,
        (long long)lay.out_h, (long long)lay.out_w);
  CHECK(plan_vae_layout_find(&lay, PLAN_VAE_FRAMES, 0)->bytes == 3 * 4 * HW * 4 &&
            plan_vae_layout_find(&lay, PLAN_VAE_LATENT, 0)->bytes == 16 * 60 * 104 * 4,
        "frames and latent bytes");
  sp_test_vae_check_layout(&lay, 2, "published 480x832 bf16");
}

static void check_weights(const wan_vae_config *c, wan_vae_gpu_precision p, const char *what) {
  static wan_vae_enc_weights w;
  static wan_vae_table t;
  wan_vae_enc_table_make(c, &w, &t);
  /* conv1's 5 padded input channels */
  sp_test_vae_check_weight_form(&t, p, 5 * 27 * 4 * (uint64_t)wan_vae_enc_level_dim(c, -1), what);
}

static void check_config(const wan_vae_config *c, int64_t H, int64_t W, const char *what) {
  for (int pi = 0; pi < 2; pi++) {
    const wan_vae_gpu_precision p = pi ? WAN_VAE_GPU_FP32 : WAN_VAE_GPU_BF16;
    char name[160];
    snprintf(name, sizeof name, "%s %lldx%lld %s", what, (long long)H, (long long)W,
             pi ? "fp32" : "bf16");
    if (wan_vae_gpu_enc_layout(c, 1, H, W, p, &lay) != SP_OK) {
      CHECK(0, "%s: image refused", name);
      continue;
    }
    sp_test_vae_check_layout(&lay, wan_vae_gpu_elem_bytes(p), name);
    const uint64_t image = lay.total;
    CHECK((int64_t)image == wan_vae_gpu_enc_bytes(c, 1, H, W, p) && lay.frames_per_chunk == 1,
          "%s: image bytes() differs or not one latent frame", name);
    if (wan_vae_gpu_enc_layout(c, 5, H, W, p, &lay) != SP_OK) {
      CHECK(0, "%s: video refused", name);
      continue;
    }
    sp_test_vae_check_layout(&lay, wan_vae_gpu_elem_bytes(p), name);
    CHECK((int64_t)lay.total == wan_vae_gpu_enc_bytes(c, 9, H, W, p), "%s: bytes() differs",
          name);
    CHECK(lay.total > image, "%s: a video's layout %llu not above an image's %llu", name,
          (unsigned long long)lay.total, (unsigned long long)image);
    CHECK(lay.out_h == wan_vae_enc_latent_side(c, H) && lay.out_w == wan_vae_enc_latent_side(c, W) &&
              lay.frames_per_chunk == WAN_VAE_ENC_CHUNK / wan_vae_enc_time_factor(c),
          "%s: latent %lldx%lld, %lld per chunk", name, (long long)lay.out_h,
          (long long)lay.out_w, (long long)lay.frames_per_chunk);
    check_weights(c, p, name);
  }
}

static void random_config(wan_vae_config *c) {
  memset(c, 0, sizeof *c);
  c->z_dim = 16;
  c->encoder = 1;
  c->dim = 8 * sp_rand_int(1, 4);
  c->n_mult = (int)sp_rand_int(1, 4);
  for (int i = 0; i < c->n_mult; i++) c->dim_mult[i] = 2 * sp_rand_int(1, 3);
  c->num_res_blocks = sp_rand_int(1, 2);
  for (int i = 0; i + 1 < c->n_mult && i < 2; i++) c->temporal_up[i] = (int)sp_rand_int(0, 1);
}

/* A 5-frame video's bytes (sp_test_vae_check_monotone). */
static int64_t video_bytes(const wan_vae_config *c, int64_t H, int64_t W,
                           wan_vae_gpu_precision p) {
  return wan_vae_gpu_enc_bytes(c, 5, H, W, p);
}

static void check_refusals(void) {
  wan_vae_config c;
  int level = sp_log_level();
  sp_log_set_level(-1); /* the refusals log, as they should */
  wan_vae_config_published(&c);
  CHECK(wan_vae_gpu_enc_layout(&c, 1, 16, 16, WAN_VAE_GPU_BF16, &lay) == SP_ERR_INPUT,
        "a config without the encoder accepted");
  published(&c);
  c.dim = 12;
  CHECK(wan_vae_gpu_enc_bytes(&c, 1, 16, 16, WAN_VAE_GPU_BF16) == -1, "dim 12 accepted");
  published(&c);
  CHECK(wan_vae_gpu_enc_layout(&c, 3, 16, 16, WAN_VAE_GPU_BF16, &lay) == SP_ERR_INPUT,
        "3 frames accepted");
  CHECK(wan_vae_gpu_enc_layout(&c, 1, 4, 16, WAN_VAE_GPU_BF16, &lay) == SP_ERR_INPUT,
        "4 rows accepted");
  sp_log_set_level(level);
  plan_vae_enc_shape s = {.z_dim = 16, .in_dim = 8, .n_levels = 1, .level_dim = {8},
                          .res_per_level = 1, .chunk_t = 4, .h = 2, .w = 2, .elem_bytes = 3};
  char err[300];
  CHECK(plan_vae_enc_layout_make(&s, &lay, err, sizeof err) != 0, "3-byte elements accepted");
  s.elem_bytes = 2;
  s.chunk_t = 2;
  CHECK(plan_vae_enc_layout_make(&s, &lay, err, sizeof err) != 0, "chunks of 2 accepted");
  s.chunk_t = 4;
  s.res_per_level = 0;
  CHECK(plan_vae_enc_layout_make(&s, &lay, err, sizeof err) != 0, "no residual blocks accepted");
  s.res_per_level = 1;
  CHECK(plan_vae_enc_layout_make(&s, &lay, err, sizeof err) == 0, "a valid shape refused: %s",
        err);
}

static void print_published(void) {
  wan_vae_config c;
  published(&c);
  static const int64_t sizes[2][2] = {{480, 832}, {720, 1280}};
  for (int i = 0; i < 2; i++)
    for (int pi = 0; pi < 2; pi++) {
      const wan_vae_gpu_precision p = pi ? WAN_VAE_GPU_FP32 : WAN_VAE_GPU_BF16;
      if (wan_vae_gpu_enc_layout(&c, 81, sizes[i][0], sizes[i][1], p, &lay) != SP_OK) continue;
      uint64_t cache = 0;
      for (int k = 0; k < lay.count; k++)
        if (lay.b[k].kind == PLAN_VAE_CACHE) cache += lay.b[k].bytes;
      const int64_t image = wan_vae_gpu_enc_bytes(&c, 1, sizes[i][0], sizes[i][1], p);
      printf("published encoder %lldx%lld %s: %.2f GiB on the device for a video (caches %.2f, "
             "s %.2f, x %.2f, y %.2f GiB), %.2f GiB for an image\n",
             (long long)sizes[i][0], (long long)sizes[i][1], pi ? "fp32" : "bf16",
             (double)lay.total / (1 << 30), (double)cache / (1 << 30),
             (double)plan_vae_layout_find(&lay, PLAN_VAE_S, 0)->bytes / (1 << 30),
             (double)plan_vae_layout_find(&lay, PLAN_VAE_X, 0)->bytes / (1 << 30),
             (double)plan_vae_layout_find(&lay, PLAN_VAE_Y, 0)->bytes / (1 << 30),
             (double)image / (1 << 30));
    }
}

int main(void) {
  sp_test_begin("test_vae_enc_gpu_layout");
  check_published_480p();
  wan_vae_config c;
  published(&c);
  check_config(&c, 480, 832, "published");
  check_config(&c, 17, 29, "published");
  check_config(&c, 8, 8, "published");
  sp_test_vae_check_monotone(&c, WAN_VAE_GPU_BF16, (int64_t)1 << (c.n_mult - 1), video_bytes);
  for (int i = 0; i < 12; i++) {
    random_config(&c);
    char what[96];
    snprintf(what, sizeof what, "random dim %lld levels %d res %lld", (long long)c.dim, c.n_mult,
             (long long)c.num_res_blocks);
    const int64_t least = (int64_t)1 << (c.n_mult - 1);
    check_config(&c, least + sp_rand_int(0, 20), least + sp_rand_int(0, 20), what);
    sp_test_vae_check_monotone(&c, i % 2 ? WAN_VAE_GPU_FP32 : WAN_VAE_GPU_BF16, least,
                               video_bytes);
  }
  check_refusals();
  print_published();
  return sp_test_end();
}
