/* The CUDA VAE decoder's device layout (planner/vae_layout.h through
 * ranks/nets/wan_vae/wan_vae_gpu_layout.h), on the CPU:
 * - the published config at 480x832 (latent 60x104): the role sizes and
 *   the caches worked out by hand from VAE.md's walk (below), 32 caches;
 * - for the published config and random small ones, both precisions:
 *   buffers 256-byte aligned, in order, not overlapping, total = the end of
 *   the last = wan_vae_gpu_bytes; the attention's row chunk within its cap
 *   and as large as the cap allows; the weights between the parameter
 *   bytes and that plus the alignment;
 * - bytes monotone in h and in w;
 * - refusals: widths not a multiple of 8, sizes outside 1..WAN_VAE_MAX_SIDE,
 *   bad shapes given to the planner directly;
 * and prints the device bytes at 60x104 and 90x160 (480p and 720p). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "log.h"
#include "sp_test.h"
#include "sp_test_vae.h"
#include "vae_layout.h"
#include "wan_vae.h"
#include "wan_vae_gpu.h"
#include "wan_vae_gpu_layout.h"

static plan_vae_layout lay;

static void check_published_480p(void) {
  wan_vae_config c;
  wan_vae_config_published(&c);
  CHECK(wan_vae_gpu_layout(&c, 60, 104, WAN_VAE_GPU_BF16, &lay) == SP_OK, "published refused");
  /* By hand (VAE.md): levels at t = 1 (60x104, 384), 2 (120x208, 384),
   * 4 (240x416, 192), 4 (480x832, 96). x: level 3's (4, 480, 832, 96);
   * y: level 3's conv output, the same; s: the upsampled input of the last
   * resample's conv (4, 480, 832, 192); r: level 1's first shortcut
   * (2, 120, 208, 384). */
  CHECK(lay.elems[PLAN_VAE_X] == 153354240ull, "x %llu", (unsigned long long)lay.elems[PLAN_VAE_X]);
  CHECK(lay.elems[PLAN_VAE_Y] == 153354240ull, "y %llu", (unsigned long long)lay.elems[PLAN_VAE_Y]);
  CHECK(lay.elems[PLAN_VAE_S] == 306708480ull, "s %llu", (unsigned long long)lay.elems[PLAN_VAE_S]);
  CHECK(lay.elems[PLAN_VAE_R] == 19169280ull, "r %llu", (unsigned long long)lay.elems[PLAN_VAE_R]);
  /* caches: conv1, 2 x 2 middle, 3 x 2 per level, 2 time convs, head */
  CHECK(lay.n_cache == 32, "%d caches", lay.n_cache);
  /* 2 frames each: 16 x 6240 + 11 x 384 x 6240 (middle, level 0, time
   * conv 0) + (192 + 5 x 384) x 24960 (level 1, time conv 1) + 6 x 192 x
   * 99840 + 7 x 96 x 399360 (level 3, head) */
  uint64_t cache = 0;
  for (int i = 0; i < lay.n_cache; i++)
    cache += 2 * (uint64_t)lay.cache_c[i] * (uint64_t)lay.cache_hw[i];
  CHECK(cache == 944286720ull, "cache elements %llu", (unsigned long long)cache);
  CHECK(lay.frames_per_chunk == 4 && lay.out_h == 480 && lay.out_w == 832,
        "chunk %lld frames of %lldx%lld", (long long)lay.frames_per_chunk,
        (long long)lay.out_h, (long long)lay.out_w);
  /* 64 MiB of fp32 scores and bf16 probabilities, 6240 x (4 + 2) bytes a
   * row: 67108864 / 37440 = 1792.4 rows. */
  CHECK(lay.score_rows == 1792, "attention rows per chunk %lld (64 MiB / 37440 B a row)",
        (long long)lay.score_rows);
  CHECK(plan_vae_layout_find(&lay, PLAN_VAE_FRAMES, 0)->bytes == 3ull * 4 * 480 * 832 * 4,
        "frames bytes");
  sp_test_vae_check_layout(&lay, 2, "published 60x104 bf16");
}

static void check_weights(const wan_vae_config *c, wan_vae_gpu_precision p, const char *what) {
  static wan_vae_weights w;
  static wan_vae_table t;
  wan_vae_table_make(c, &w, &t);
  /* the head padded to 8 rows */
  sp_test_vae_check_weight_form(
      &t, p, (PLAN_VAE_HEAD_CO - 3) * 4 * (uint64_t)(wan_vae_level_dim(c, c->n_mult - 1) * 27 + 1),
      what);
}

static void check_config(const wan_vae_config *c, int64_t h, int64_t w, const char *what) {
  for (int pi = 0; pi < 2; pi++) {
    const wan_vae_gpu_precision p = pi ? WAN_VAE_GPU_FP32 : WAN_VAE_GPU_BF16;
    char name[160];
    snprintf(name, sizeof name, "%s %lldx%lld %s", what, (long long)h, (long long)w,
             pi ? "fp32" : "bf16");
    if (wan_vae_gpu_layout(c, h, w, p, &lay) != SP_OK) {
      CHECK(0, "%s: refused", name);
      continue;
    }
    sp_test_vae_check_layout(&lay, wan_vae_gpu_elem_bytes(p), name);
    CHECK((int64_t)lay.total == wan_vae_gpu_bytes(c, h, w, p), "%s: bytes() differs", name);
    const int e = wan_vae_gpu_elem_bytes(p);
    const int64_t hw = h * w;
    CHECK((lay.score_rows == 1 ||
           plan_vae_scores_bytes(lay.score_rows, hw, e) <= PLAN_VAE_SCORES_CAP) &&
              (lay.score_rows == hw ||
               plan_vae_scores_bytes(lay.score_rows + 1, hw, e) > PLAN_VAE_SCORES_CAP),
          "%s: %lld attention rows per chunk", name, (long long)lay.score_rows);
    CHECK(plan_vae_layout_find(&lay, PLAN_VAE_SCORES, 0)->bytes ==
              plan_vae_scores_bytes(lay.score_rows, hw, e),
          "%s: scores buffer", name);
    check_weights(c, p, name);
  }
}

static void random_config(wan_vae_config *c) {
  memset(c, 0, sizeof *c);
  c->z_dim = 16;
  c->dim = 8 * sp_rand_int(1, 4);
  c->n_mult = (int)sp_rand_int(1, 4);
  for (int i = 0; i < c->n_mult; i++) c->dim_mult[i] = 2 * sp_rand_int(1, 3);
  c->num_res_blocks = sp_rand_int(0, 2);
  for (int i = 0; i + 1 < c->n_mult; i++) c->temporal_up[i] = (int)sp_rand_int(0, 1);
}

static void check_refusals(void) {
  wan_vae_config c;
  int level = sp_log_level();
  sp_log_set_level(-1); /* the refusals log, as they should */
  wan_vae_config_published(&c);
  c.dim = 12; /* level 3 is 12 wide */
  CHECK(wan_vae_gpu_layout(&c, 4, 4, WAN_VAE_GPU_BF16, &lay) == SP_ERR_INPUT, "dim 12 accepted");
  CHECK(wan_vae_gpu_bytes(&c, 4, 4, WAN_VAE_GPU_BF16) == -1, "bytes of dim 12 not -1");
  wan_vae_config_published(&c);
  c.dim = 8;
  c.dim_mult[0] = 1; /* 8 wide, resampled: its half 4 */
  c.dim_mult[3] = 1;
  CHECK(wan_vae_gpu_layout(&c, 4, 4, WAN_VAE_GPU_FP32, &lay) == SP_ERR_INPUT,
        "a 4-wide half accepted");
  wan_vae_config_published(&c);
  CHECK(wan_vae_gpu_layout(&c, 0, 4, WAN_VAE_GPU_BF16, &lay) == SP_ERR_INPUT, "h 0 accepted");
  CHECK(wan_vae_gpu_layout(&c, 4, WAN_VAE_MAX_SIDE + 1, WAN_VAE_GPU_BF16, &lay) == SP_ERR_INPUT,
        "w over the limit accepted");
  CHECK(wan_vae_gpu_layout(&c, 4, 4, (wan_vae_gpu_precision)7, &lay) == SP_ERR_INPUT,
        "precision 7 accepted");
  sp_log_set_level(level);
  plan_vae_shape s = {.z_dim = 16, .mid_dim = 32, .n_levels = 1, .level_dim = {32},
                      .res_per_level = 1, .h = 2, .w = 2, .elem_bytes = 3};
  char err[200];
  CHECK(plan_vae_layout_make(&s, &lay, err, sizeof err) != 0, "3-byte elements accepted");
  s.elem_bytes = 2;
  s.n_levels = 5;
  CHECK(plan_vae_layout_make(&s, &lay, err, sizeof err) != 0, "5 levels accepted");
  s.n_levels = 1;
  CHECK(plan_vae_layout_make(&s, &lay, err, sizeof err) == 0, "a valid shape refused: %s", err);
}

int main(void) {
  sp_test_begin("test_vae_gpu_layout");
  check_published_480p();
  wan_vae_config c;
  wan_vae_config_published(&c);
  check_config(&c, 60, 104, "published");
  check_config(&c, 90, 160, "published");
  check_config(&c, 3, 5, "published");
  sp_test_vae_check_monotone(&c, WAN_VAE_GPU_BF16, 1, wan_vae_gpu_bytes);
  for (int i = 0; i < 12; i++) {
    random_config(&c);
    char what[96];
    snprintf(what, sizeof what, "random dim %lld levels %d res %lld", (long long)c.dim, c.n_mult,
             (long long)c.num_res_blocks);
    check_config(&c, sp_rand_int(1, 17), sp_rand_int(1, 17), what);
    sp_test_vae_check_monotone(&c, i % 2 ? WAN_VAE_GPU_FP32 : WAN_VAE_GPU_BF16, 1,
                               wan_vae_gpu_bytes);
  }
  check_refusals();
  wan_vae_config_published(&c);
  static const int64_t sizes[2][2] = {{60, 104}, {90, 160}};
  for (int i = 0; i < 2; i++)
    for (int pi = 0; pi < 2; pi++) {
      const wan_vae_gpu_precision p = pi ? WAN_VAE_GPU_FP32 : WAN_VAE_GPU_BF16;
      if (wan_vae_gpu_layout(&c, sizes[i][0], sizes[i][1], p, &lay) != SP_OK) continue;
      uint64_t cache = 0;
      for (int k = 0; k < lay.count; k++)
        if (lay.b[k].kind == PLAN_VAE_CACHE) cache += lay.b[k].bytes;
      printf("published latent %lldx%lld (%lldx%lld) %s: %.2f GiB on the device (caches %.2f, "
             "s %.2f, x %.2f, y %.2f GiB)\n",
             (long long)sizes[i][0], (long long)sizes[i][1], (long long)lay.out_h,
             (long long)lay.out_w, pi ? "fp32" : "bf16", (double)lay.total / (1 << 30),
             (double)cache / (1 << 30),
             (double)plan_vae_layout_find(&lay, PLAN_VAE_S, 0)->bytes / (1 << 30),
             (double)plan_vae_layout_find(&lay, PLAN_VAE_X, 0)->bytes / (1 << 30),
             (double)plan_vae_layout_find(&lay, PLAN_VAE_Y, 0)->bytes / (1 << 30));
    }
  return sp_test_end();
}
