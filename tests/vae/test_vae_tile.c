/* Spatial tiling of the VAE decode (ranks/nets/wan_vae/wan_vae_tile.h, the
 * planner's tile grid and tile choice in planner/vae_layout.h):
 * - the grid, for random sizes, against its definition: one tile when it
 *   covers the axis, else the first at 0, the last ending at n, neighbours
 *   overlapping by at least the overlap, and no fewer tiles could do that;
 * - the choice from a budget, published config in bf16: no tiling when the
 *   whole layout fits (and exactly at its bytes), tiles when a budget
 *   forces them, each tile's bytes (wan_vae_gpu_bytes) within the budget,
 *   no grid of fewer tiles fitting (brute force), a budget below the least
 *   tile refused;
 * - the blending, with a stand-in decoder whose output at a pixel is a
 *   known function of the latent under it (so any tile gives the same value
 *   there): the blended video equals that function of the whole latent, for
 *   random sizes, tiles and overlaps (the weights sum to 1 everywhere and
 *   every tile lands in its place);
 * - the real CPU decoder (synth:wan2.1-vae-tiny): tiled with one tile equal
 *   to the latent is the untiled decode bit for bit; 2 x 2 tiles
 *   overlapping by 8 stay within TILED_TOL of the untiled decode, and hard
 *   seams (overlap 0, same tile count) are at least twice as far off;
 * - bad tilings refused by wan_vae_tiling_check. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sp_test.h"
#include "vae_file.h"
#include "vae_layout.h"
#include "wan_vae.h"
#include "wan_vae_gpu.h"
#include "wan_vae_gpu_layout.h"
#include "wan_vae_tile.h"

/* Relative L2 of a 2 x 2 tiling (tiles 10x12 of a 12x16 latent, overlap 8)
 * against the untiled decode of the tiny synthetic VAE, 2 latent
 * frames. Measured 0.10-0.16 over seeds (VAE.md "Tiling"): the decoder's
 * receptive field (about 17 latent positions each way, VAE.md) is wider
 * than the tiles and the middle attention spans the whole frame, so the
 * tiles differ from the whole decode everywhere, not only at the seams. */
#define TILED_TOL 0.25

/* ---------------------------------------------------------------- grid */

static void check_grid(void) {
  for (int it = 0; it < 2000; it++) {
    const int64_t n = sp_rand_int(1, 200), t = sp_rand_int(1, 220), o = sp_rand_int(0, 30);
    const int64_t k = plan_vae_tile_count(n, t, o);
    if (t >= n) {
      CHECK(k == 1, "n %lld t %lld o %lld: %lld tiles, expected 1", (long long)n, (long long)t,
            (long long)o, (long long)k);
      continue;
    }
    if (o >= t) {
      CHECK(k == 0, "n %lld t %lld o %lld: overlap >= tile accepted", (long long)n,
            (long long)t, (long long)o);
      continue;
    }
    int ok = k >= 2 && plan_vae_tile_start(n, t, k, 0) == 0 &&
             plan_vae_tile_start(n, t, k, k - 1) + t == n;
    for (int64_t i = 0; ok && i + 1 < k; i++) {
      const int64_t a = plan_vae_tile_start(n, t, k, i), b = plan_vae_tile_start(n, t, k, i + 1);
      ok = b >= a && a + t - b >= o;
    }
    /* fewer tiles overlapping by o reach at most (k - 1) t - (k - 2) o */
    ok = ok && (k - 1) * t - (k - 2) * o < n;
    CHECK(ok, "n %lld t %lld o %lld: grid of %lld tiles wrong", (long long)n, (long long)t,
          (long long)o, (long long)k);
  }
}

/* ---------------------------------------------------------------- choice */

/* The least tile side covering n with k tiles overlapping by o, by search. */
static int64_t least_tile(int64_t n, int64_t k, int64_t o) {
  int64_t t = 1;
  while (k * t - (k - 1) * o < n) t++;
  return t;
}

static void check_pick(void) {
  wan_vae_config c;
  wan_vae_config_published(&c);
  const wan_vae_gpu_precision p = WAN_VAE_GPU_BF16;
  plan_vae_tiles t;
  const int64_t whole = wan_vae_gpu_bytes(&c, 60, 104, p);
  CHECK(wan_vae_gpu_tiles(&c, 60, 104, p, (uint64_t)whole, &t) == SP_OK && t.ny == 1 &&
            t.nx == 1 && t.th == 60 && t.tw == 104,
        "480p with its own bytes: tiled %lldx%lld", (long long)t.ny, (long long)t.nx);
  CHECK(wan_vae_gpu_tiles(&c, 60, 104, p, (uint64_t)whole - 1, &t) == SP_OK &&
            t.ny * t.nx > 1 && t.bytes <= (uint64_t)whole - 1,
        "480p with a byte less: not tiled");
  const uint64_t budgets[] = {(uint64_t)4 << 30, (uint64_t)3 << 30, (uint64_t)5 << 29};
  for (int b = 0; b < 3; b++) {
    const int64_t h = 90, w = 160, o = PLAN_VAE_TILE_OVERLAP;
    if (wan_vae_gpu_tiles(&c, h, w, p, budgets[b], &t) != SP_OK) {
      CHECK(0, "720p in %.2f GiB: refused", (double)budgets[b] / (1 << 30));
      continue;
    }
    const int64_t got = wan_vae_gpu_bytes(&c, t.th, t.tw, p);
    CHECK(t.ny * t.nx > 1 && got >= 0 && (uint64_t)got <= budgets[b] &&
              (uint64_t)got == t.bytes && plan_vae_tile_count(h, t.th, o) == t.ny &&
              plan_vae_tile_count(w, t.tw, o) == t.nx,
          "720p in %.2f GiB: %lldx%lld tiles of %lldx%lld, %lld bytes",
          (double)budgets[b] / (1 << 30), (long long)t.ny, (long long)t.nx, (long long)t.th,
          (long long)t.tw, (long long)got);
    for (int64_t ky = 1; ky <= h; ky++)
      for (int64_t kx = 1; kx <= w && ky * kx < t.ny * t.nx; kx++) {
        const int64_t th = least_tile(h, ky, o), tw = least_tile(w, kx, o);
        if ((ky > 1 && th <= o) || (kx > 1 && tw <= o)) continue;
        const int64_t by = wan_vae_gpu_bytes(&c, th, tw, p);
        CHECK(by < 0 || (uint64_t)by > budgets[b],
              "720p in %.2f GiB: %lldx%lld tiles (%lldx%lld) fit but %lldx%lld were chosen",
              (double)budgets[b] / (1 << 30), (long long)ky, (long long)kx, (long long)th,
              (long long)tw, (long long)t.ny, (long long)t.nx);
      }
    printf("720p (latent 90x160) bf16 in %.2f GiB: %lld x %lld tiles of %lldx%lld, %.2f GiB "
           "each (untiled %.2f GiB)\n",
           (double)budgets[b] / (1 << 30), (long long)t.ny, (long long)t.nx, (long long)t.th,
           (long long)t.tw, (double)t.bytes / (1 << 30),
           (double)wan_vae_gpu_bytes(&c, h, w, p) / (1 << 30));
  }
  CHECK(wan_vae_gpu_tiles(&c, 90, 160, p, (uint64_t)64 << 20, &t) == SP_ERR_INPUT,
        "720p in 64 MiB: not refused");
}

/* ---------------------------------------------------------------- blending */

/* A stand-in decoder: chunk f's frames at pixel (y, x) are
 * known(channel, f, latent under the pixel, frame in the chunk). */
typedef struct fake_dec {
  const wan_vae_config *c;
  int64_t th, tw;
  float *frames;
} fake_dec;

static float known(int64_t ch, int64_t k, float z) { return 0.3f * z + 0.1f * (float)(ch - k); }

static int fake_decode(void *decoder, const float *lat, int64_t F, wan_vae_frames_fn fn,
                       void *user) {
  fake_dec *d = decoder;
  const int64_t s = wan_vae_out_scale(d->c), ph = d->th * s, pw = d->tw * s;
  int64_t t0 = 0;
  for (int64_t f = 0; f < F; f++) {
    const int64_t n = f == 0 ? 1 : wan_vae_out_frames(d->c, 2) - 1;
    for (int64_t ch = 0; ch < 3; ch++)
      for (int64_t k = 0; k < n; k++)
        for (int64_t y = 0; y < ph; y++)
          for (int64_t x = 0; x < pw; x++)
            d->frames[((ch * n + k) * ph + y) * pw + x] =
                known(ch, k, lat[((ch * F + f) * d->th + y / s) * d->tw + x / s]);
    int rc = fn(user, d->frames, t0, n);
    if (rc) return rc;
    t0 += n;
  }
  return 0;
}

typedef struct video_sink {
  float *v;
  int64_t T, ohw;
} video_sink;

static int video_put(void *user, const float *frames, int64_t t0, int64_t n) {
  video_sink *k = user;
  for (int64_t ch = 0; ch < 3; ch++)
    memcpy(k->v + (ch * k->T + t0) * k->ohw, frames + ch * n * k->ohw,
           (size_t)(n * k->ohw) * sizeof *k->v);
  return 0;
}

static void check_blend(void) {
  wan_vae_config c;
  wan_vae_config_published(&c);
  c.n_mult = 2; /* scale 2, one temporal resample: small videos */
  c.temporal_up[0] = 1;
  const int64_t s = wan_vae_out_scale(&c);
  for (int it = 0; it < 200; it++) {
    const int64_t h = sp_rand_int(1, 40), w = sp_rand_int(1, 40), F = sp_rand_int(1, 3);
    wan_vae_tiling t = {sp_rand_int(1, h + 2), sp_rand_int(1, w + 2), 0};
    int64_t max_o = 5; /* any overlap when no side is split */
    if (t.th < h) max_o = t.th - 1;
    if (t.tw < w && t.tw - 1 < max_o) max_o = t.tw - 1;
    t.overlap = sp_rand_int(0, max_o);
    char err[320];
    if (wan_vae_tiling_check(h, w, &t, err, sizeof err) != 0) {
      CHECK(0, "valid tiling refused: %s", err);
      continue;
    }
    const int64_t T = wan_vae_out_frames(&c, F), ohw = h * w * s * s;
    float *z = sp_test_malloc((size_t)(16 * F * h * w) * sizeof(float));
    float *v = sp_test_alloc(3 * T * ohw);
    sp_rand_fill(z, 16 * F * h * w, -2.0, 2.0);
    fake_dec d = {&c, t.th < h ? t.th : h, t.tw < w ? t.tw : w, NULL};
    d.frames = sp_test_malloc((size_t)(3 * 2 * d.th * d.tw * s * s) * sizeof(float));
    video_sink k = {v, T, ohw};
    CHECK(wan_vae_decode_tiled(&c, z, F, h, w, &t, fake_decode, &d, video_put, &k) == 0,
          "tiled decode failed");
    double e = 0;
    int64_t t0 = 0;
    for (int64_t f = 0; f < F; f++) {
      const int64_t n = f == 0 ? 1 : 2;
      for (int64_t ch = 0; ch < 3; ch++)
        for (int64_t kk = 0; kk < n; kk++)
          for (int64_t p = 0; p < ohw; p++) {
            const int64_t y = p / (w * s), x = p % (w * s);
            const float want = known(ch, kk, z[((ch * F + f) * h + y / s) * w + x / s]);
            const double dlt = (double)v[(ch * T + t0 + kk) * ohw + p] - want;
            if (dlt * dlt > e) e = dlt * dlt;
          }
      t0 += n;
    }
    /* Each pixel is a float sum of its tiles' weighted values (weights
     * summing to 1 in double, rounded to float): up to (covering tiles +
     * 3) roundings of a value at most 1 in size. */
    const double cy = t.th < h ? ceil((double)t.th / (double)(t.th - t.overlap)) : 1;
    const double cx = t.tw < w ? ceil((double)t.tw / (double)(t.tw - t.overlap)) : 1;
    const double tol = 2.0 * (cy * cx + 3.0) * FLT_EPSILON;
    CHECK(sqrt(e) <= tol && sp_test_guard_ok(v, 3 * T * ohw),
          "latent %lldx%lld F %lld, tiles %lldx%lld overlap %lld: blended off by %.3g (bound %.3g)",
          (long long)h, (long long)w, (long long)F, (long long)t.th, (long long)t.tw,
          (long long)t.overlap, sqrt(e), tol);
    free(z), free(v), free(d.frames);
  }
}

/* ---------------------------------------------------------------- real decoder */

typedef struct cpu_dec {
  wan_vae_decoder *d;
  const wan_vae_weights *wt;
} cpu_dec;

static int cpu_decode(void *decoder, const float *lat, int64_t F, wan_vae_frames_fn fn,
                      void *user) {
  cpu_dec *d = decoder;
  return wan_vae_decode_stream(d->d, d->wt, lat, F, fn, user);
}

/* The tiled decode of z (16, F, h, w) into v. */
static void decode_tiles(const wan_vae_config *c, const wan_vae_weights *wt, const float *z,
                         int64_t F, int64_t h, int64_t w, wan_vae_tiling t, float *v) {
  cpu_dec d = {NULL, wt};
  if (wan_vae_decoder_create(c, t.th < h ? t.th : h, t.tw < w ? t.tw : w, &d.d) != SP_OK) {
    CHECK(0, "decoder for tiles %lldx%lld refused", (long long)t.th, (long long)t.tw);
    return;
  }
  video_sink k = {v, wan_vae_out_frames(c, F), h * w * 64};
  CHECK(wan_vae_decode_tiled(c, z, F, h, w, &t, cpu_decode, &d, video_put, &k) == 0,
        "tiled decode failed");
  wan_vae_decoder_free(d.d);
}

static void check_real(void) {
  char spec[64];
  snprintf(spec, sizeof spec, "synth:wan2.1-vae-tiny:%llu",
           (unsigned long long)(sp_rand_u64() % 1000000));
  vae_model *m = NULL;
  if (vae_model_open(spec, 1, &m) != SP_OK) {
    CHECK(0, "%s: not opened", spec);
    return;
  }
  const wan_vae_config c = vae_model_get_info(m)->config;
  static wan_vae_weights wt;
  static wan_vae_table tab;
  wan_vae_table_make(&c, &wt, &tab);
  float *packed = sp_test_malloc((size_t)tab.packed_floats * sizeof(float));
  CHECK(vae_model_read(m, packed, tab.packed_floats) == SP_OK, "weights not read");
  wan_vae_table_bind(&tab, packed);
  const int64_t F = 2, h = 12, w = 16, n = 3 * wan_vae_out_frames(&c, F) * h * w * 64;
  float *z = sp_test_malloc((size_t)(16 * F * h * w) * sizeof(float));
  for (int64_t i = 0; i < 16 * F * h * w; i++) z[i] = (float)sp_rand_normal();
  float *ref = sp_test_alloc(n), *one = sp_test_alloc(n), *ov = sp_test_alloc(n),
        *hard = sp_test_alloc(n);
  wan_vae_decoder *d;
  if (wan_vae_decoder_create(&c, h, w, &d) != SP_OK) {
    CHECK(0, "decoder refused");
    return;
  }
  wan_vae_decode(d, &wt, z, F, ref);
  wan_vae_decoder_free(d);
  decode_tiles(&c, &wt, z, F, h, w, (wan_vae_tiling){h, w, 4}, one);
  decode_tiles(&c, &wt, z, F, h, w, (wan_vae_tiling){10, 12, 8}, ov);
  decode_tiles(&c, &wt, z, F, h, w, (wan_vae_tiling){6, 8, 0}, hard);
  CHECK(memcmp(one, ref, (size_t)n * sizeof *ref) == 0, "one tile: not the untiled bits");
  const double e_ov = sp_test_rel_l2_f32(ov, ref, n), e_hard = sp_test_rel_l2_f32(hard, ref, n);
  CHECK(e_ov <= TILED_TOL, "2 x 2 tiles 10x12, overlap 8: relative L2 %.4f > %.2f", e_ov,
        TILED_TOL);
  CHECK(e_hard >= 2.0 * e_ov, "hard seams (6x8, overlap 0) %.4f not twice blended %.4f",
        e_hard, e_ov);
  CHECK(sp_test_guard_ok(one, n) && sp_test_guard_ok(ov, n) && sp_test_guard_ok(hard, n),
        "tiled decode wrote past the video");
  int64_t outside = 0;
  for (int64_t i = 0; i < n; i++) outside += !(ov[i] >= -1.0f && ov[i] <= 1.0f);
  CHECK(outside == 0, "2 x 2 tiles: %lld values outside [-1, 1] (the blend must clamp)",
        (long long)outside);
  printf("%s, latent 2x12x16: one tile bit-identical; 2 x 2 tiles relative L2 %.4f with "
         "overlap 8 (10x12), %.4f with hard seams (6x8)\n",
         spec, e_ov, e_hard);
  free(packed), free(z), free(ref), free(one), free(ov), free(hard);
  vae_model_close(m);
}

static void check_refusals(void) {
  char err[320];
  const struct {
    int64_t h, w, th, tw, o;
  } bad[] = {{12, 16, 0, 8, 0}, {12, 16, 8, -1, 0}, {12, 16, 8, 8, -1},
             {12, 16, 6, 20, 6}, {12, 16, 20, 8, 8}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const wan_vae_tiling t = {bad[i].th, bad[i].tw, bad[i].o};
    CHECK(wan_vae_tiling_check(bad[i].h, bad[i].w, &t, err, sizeof err) != 0 &&
              strchr(err, '\n') == NULL,
          "tile %lldx%lld overlap %lld of %lldx%lld accepted", (long long)t.th,
          (long long)t.tw, (long long)t.overlap, (long long)bad[i].h, (long long)bad[i].w);
  }
  const wan_vae_tiling whole = {20, 20, 50}; /* no side split: any overlap */
  CHECK(wan_vae_tiling_check(12, 16, &whole, err, sizeof err) == 0, "unsplit tile refused");
}

int main(void) {
  sp_test_begin("test_vae_tile");
  check_grid();
  check_pick();
  check_blend();
  check_refusals();
  check_real();
  return sp_test_end();
}
