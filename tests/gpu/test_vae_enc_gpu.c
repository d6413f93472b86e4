/* The CUDA VAE encoder (ranks/nets/wan_vae/cuda/wan_vae_cuda.h) against the
 * CPU encoder.
 *
 *   test_vae_enc_gpu           every case below, bf16 and fp32
 *   test_vae_enc_gpu --small   one tiny case (for compute-sanitizer)
 *   test_vae_enc_gpu --bench H W T [--reps N] [--precision bf16|fp32|both]
 *                              times encodes of the published config of T
 *                              frames of H x W (synthetic weights from a
 *                              fixed seed) and prints one JSON line per
 *                              precision: seconds, device memory, per-op ms
 *
 * Each case: a small config (dim 8-32, odd sizes, T = 1, 5, 9), random
 * weights scaled as tests/vae/test_vae_enc_driver.c's, a random video in
 * [-1, 1]; the CPU encode (fp32) is the reference. Checks per precision:
 * - relative L2 of the latents <= 1e-2 (bf16) or 1e-4 (fp32);
 * - the callback gets the same (first latent frame, count) sequence as
 *   the CPU encoder's;
 * - a second encode with the same encoder gives the same bits (the caches
 *   are reset; the algorithms are kept);
 * - the encoder's one allocation is the planner's layout
 *   (wan_vae_gpu_enc_bytes), and the device memory it takes is that plus
 *   at most WAN_VAE_GPU_SLACK_BYTES (the handles);
 * - the image case makes its encoder for T = 1 (chunks of one frame);
 * - the largest case runs the middle attention in several chunks of query
 *   rows (fp32, a latent of 80 x 80).
 * Inputs are fresh random numbers each run; the seed is printed (SP_SEED=n
 * replays one). Exit 77 with one line when there is no CUDA device. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "vae_layout.h"
#include "wan_vae.h"
#include "wan_vae_cuda.h"
#include "wan_vae_enc.h"
#include "wan_vae_gpu.h"

#define SP_TEST_CUDA
#include "sp_test.h"
#include "sp_test_vae.h"

/* bf16: the CPU emulation of the CUDA encoder's bf16 stores and weights
 * (tests/vae/test_vae_enc_driver.c, check_bf16_emulation) measured 0.9e-3
 * to 1.3e-3 relative L2 against fp32 on these narrow random encoders:
 * 1e-2 leaves room for the GPU's own order of summation, while a wrong
 * tap, cache or channel gives errors of order 1. fp32 keeps to FMA math
 * (no TF32): its sums differ from the CPU's only in order. */
#define TOL_BF16 1e-2
#define TOL_F32 1e-4

typedef struct ecase {
  int64_t dim, T, H, W;
  int n_mult;
  int64_t num_res;
  int temporal[3]; /* the config's temporal_up: the encoder's flags reversed */
  int fp32_only;   /* the attention-chunking case */
} ecase;

static const ecase cases[] = {
    {8, 5, 9, 13, 4, 2, {1, 1, 0}, 0},    /* --small: the published structure, narrow */
    {16, 1, 17, 10, 4, 2, {1, 1, 0}, 0},  /* an image: an encoder made for one frame */
    {8, 9, 33, 47, 4, 2, {1, 1, 0}, 0},   /* three chunks: the caches' steady state */
    {32, 5, 16, 24, 4, 2, {1, 1, 0}, 0},  /* wider */
    {16, 9, 12, 10, 3, 1, {1, 0, 0}, 0},  /* 3 levels, 1 block, one temporal downsample */
    {8, 1, 640, 640, 4, 2, {1, 1, 0}, 1}, /* attention over 6400 positions, in row chunks */
    /* the published widths: bf16's full-resolution 3x3x3 convolutions, 96 to
     * 96 channels, take the backend engine rule (cuda_vae_graph.cuh) */
    {96, 5, 16, 24, 4, 2, {1, 1, 0}, 0},
};

static size_t free_bytes(void) {
  size_t f = 0, total = 0;
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemGetInfo(&f, &total));
  return f;
}

/* One precision of a case against the CPU's ref (latents: ch z, T the
 * latent frames, ohw the latent positions). */
static void run_gpu(const ecase *k, const wan_vae_config *c, const float *packed,
                    const float *video, const sp_test_vae_sink *ref, int pi, double cpu_s) {
  const wan_vae_gpu_precision p = pi ? WAN_VAE_GPU_FP32 : WAN_VAE_GPU_BF16;
  const double tol = pi ? TOL_F32 : TOL_BF16;
  const int64_t nl = ref->ch * ref->T * ref->ohw;
  char name[160];
  snprintf(name, sizeof name, "dim %lld levels %d res %lld T %lld %lldx%lld %s",
           (long long)k->dim, k->n_mult, (long long)k->num_res, (long long)k->T, (long long)k->H,
           (long long)k->W, pi ? "fp32" : "bf16");
  const size_t free0 = free_bytes();
  wan_vae_enc_gpu *g;
  if (wan_vae_enc_gpu_create(c, packed, k->T, k->H, k->W, p, &g) != SP_OK) {
    CHECK(0, "%s: gpu create failed", name);
    return;
  }
  const int64_t layout = wan_vae_gpu_enc_bytes(c, k->T, k->H, k->W, p);
  sp_test_vae_sink a = sp_test_vae_sink_new(ref->ch, ref->T, ref->ohw);
  sp_test_vae_sink b = sp_test_vae_sink_new(ref->ch, ref->T, ref->ohw);
  const double t0 = sp_test_seconds();
  const int rc = wan_vae_enc_gpu_encode(g, video, k->T, sp_test_vae_sink_put, &a);
  const double gpu_s = sp_test_seconds() - t0;
  wan_vae_enc_gpu_encode(g, video, k->T, sp_test_vae_sink_put, &b);
  const int64_t used = (int64_t)free0 - (int64_t)free_bytes();
  const double err = sp_test_rel_l2_f32(a.video, ref->video, nl);
  const int same_calls = sp_test_vae_sink_same_calls(&a, ref);
  const int det = memcmp(a.video, b.video, (size_t)nl * sizeof *a.video) == 0;
  const int arena = wan_vae_enc_gpu_peak_bytes(g) == layout && used >= layout &&
                    used <= layout + WAN_VAE_GPU_SLACK_BYTES;
  CHECK(rc == 0, "%s: encode returned %d", name, rc);
  CHECK(err <= tol, "%s: relative L2 %.3e > %.0e", name, err, tol);
  CHECK(same_calls, "%s: %d callback calls, the CPU encoder made %d (or their frames differ)",
        name, a.calls, ref->calls);
  CHECK(det, "%s: a second encode gives other bits", name);
  CHECK(arena, "%s: arena %lld bytes, layout %lld, device memory taken %lld", name,
        (long long)wan_vae_enc_gpu_peak_bytes(g), (long long)layout, (long long)used);
  CHECK(sp_test_guard_ok(a.video, nl) && sp_test_guard_ok(b.video, nl),
        "%s: the callback wrote past the latents", name);
  printf("  %-48s err %.3e (tol %.0e)  calls %d %s  rerun %s  cpu %.2fs gpu %.3fs  "
         "arena %.1f MiB (taken %.1f)  %s\n",
         name, err, tol, a.calls, same_calls ? "ok" : "BAD", det ? "same" : "DIFFERS", cpu_s,
         gpu_s, (double)layout / (1 << 20), (double)used / (1 << 20),
         err <= tol && same_calls && det && arena && rc == 0 ? "pass" : "FAIL");
  fflush(stdout);
  wan_vae_enc_gpu_free(g);
  free(a.video);
  free(b.video);
}

static void run_case(const ecase *k) {
  wan_vae_config c;
  sp_test_vae_config_narrow(&c, 1, k->dim, k->n_mult, k->num_res, k->temporal);
  static wan_vae_enc_weights wt;
  static wan_vae_table t;
  wan_vae_enc_table_make(&c, &wt, &t);
  float *packed = sp_test_vae_new_weights(&t, SP_TEST_VAE_FP32);
  wan_vae_table_bind(&t, packed);
  const int64_t nv = 3 * k->T * k->H * k->W;
  float *video = sp_test_alloc(nv);
  sp_rand_fill(video, nv, -1.0, 1.0);
  wan_vae_encoder *e;
  if (wan_vae_encoder_create(&c, k->H, k->W, &e) != SP_OK) {
    CHECK(0, "cpu encoder_create failed");
    return;
  }
  sp_test_vae_sink ref =
      sp_test_vae_sink_new(c.z_dim, wan_vae_enc_latent_frames(&c, k->T), e->h * e->w);
  const double t0 = sp_test_seconds();
  wan_vae_encode_stream(e, &wt, video, k->T, sp_test_vae_sink_put, &ref);
  const double cpu_s = sp_test_seconds() - t0;
  wan_vae_encoder_free(e);
  for (int pi = 0; pi < 2; pi++)
    if (!k->fp32_only || pi == 1) run_gpu(k, &c, packed, video, &ref, pi, cpu_s);
  free(ref.video);
  free(video);
  free(packed);
}

/* ---------------------------------------------------------------- bench */

static int count_put(void *user, const float *lat, int64_t f0, int64_t n) {
  (void)lat, (void)f0;
  *(int64_t *)user += n;
  return 0;
}

/* One precision of the bench: create, a warm-up, reps timed encodes, one
 * profiled; one JSON line. */
static void bench_one(const wan_vae_config *c, const float *packed, const float *video,
                      const int64_t *thw, int reps, int pi) {
  const wan_vae_gpu_precision p = pi ? WAN_VAE_GPU_FP32 : WAN_VAE_GPU_BF16;
  const int64_t T = thw[0], H = thw[1], W = thw[2], F = wan_vae_enc_latent_frames(c, T);
  const size_t free0 = free_bytes();
  wan_vae_enc_gpu *g;
  double t0 = sp_test_seconds();
  if (wan_vae_enc_gpu_create(c, packed, T, H, W, p, &g) != SP_OK) {
    CHECK(0, "bench: create failed (%s)", pi ? "fp32" : "bf16");
    return;
  }
  const double create_s = sp_test_seconds() - t0;
  int64_t frames = 0;
  t0 = sp_test_seconds();
  wan_vae_enc_gpu_encode(g, video, T, count_put, &frames); /* warm-up: algorithms chosen */
  const double warm_s = sp_test_seconds() - t0;
  const size_t free1 = free_bytes();
  double best = 1e30, sum = 0.0;
  for (int i = 0; i < reps; i++) {
    frames = 0;
    t0 = sp_test_seconds();
    wan_vae_enc_gpu_encode(g, video, T, count_put, &frames);
    const double dt = sp_test_seconds() - t0;
    CHECK(frames == F, "bench: %lld latent frames, expected %lld", (long long)frames,
          (long long)F);
    best = dt < best ? dt : best;
    sum += dt;
  }
  wan_vae_enc_gpu_profile(g, 1);
  wan_vae_enc_gpu_encode(g, video, T, count_put, &frames);
  double ms[WAN_VAE_GPU_OPS];
  wan_vae_enc_gpu_profile_ms(g, ms);
  char ops[512];
  sp_test_vae_ops_json(ms, ops, sizeof ops);
  printf("{\"bench\":\"vae_enc_gpu\",\"precision\":\"%s\",\"video\":[%lld,%lld,%lld],"
         "\"latent\":[%lld,%lld,%lld],\"reps\":%d,\"encode_s\":%.4f,\"encode_mean_s\":%.4f,"
         "\"warmup_s\":%.4f,\"create_s\":%.3f,\"layout_gib\":%.3f,\"used_gib\":%.3f,"
         "\"ops_ms\":{%s}}\n",
         pi ? "fp32" : "bf16", (long long)T, (long long)H, (long long)W, (long long)F,
         (long long)wan_vae_enc_latent_side(c, H), (long long)wan_vae_enc_latent_side(c, W),
         reps, best, sum / reps, warm_s, create_s,
         (double)wan_vae_enc_gpu_peak_bytes(g) / (1 << 30),
         ((double)free0 - (double)free1) / (1 << 30), ops);
  fflush(stdout);
  wan_vae_enc_gpu_free(g);
}

static int run_bench(int64_t H, int64_t W, int64_t T, int reps, int which) {
  wan_vae_config c;
  wan_vae_config_published(&c);
  c.encoder = 1;
  static wan_vae_enc_weights wt;
  static wan_vae_table t;
  wan_vae_enc_table_make(&c, &wt, &t);
  sp_rand_state_set(0x5eed5eedull); /* the same synthetic weights every run */
  float *packed = sp_test_vae_new_weights(&t, SP_TEST_VAE_FP32);
  const int64_t nv = 3 * T * H * W;
  float *video = sp_test_malloc((size_t)nv * sizeof *video);
  sp_rand_fill(video, nv, -1.0, 1.0);
  const int64_t thw[3] = {T, H, W};
  for (int pi = 0; pi < 2; pi++)
    if (which < 0 || which == pi) bench_one(&c, packed, video, thw, reps, pi);
  free(video);
  free(packed);
  return sp_test_failures() ? 1 : 0;
}

static const char usage[] =
    "usage: test_vae_enc_gpu [--small]\n"
    "       test_vae_enc_gpu --bench H W T [--reps N] [--precision bf16|fp32|both]\n";

int main(int argc, char **argv) {
  sp_test_vae_cli a;
  const int rc = sp_test_vae_cli_parse(argc, argv, 0, usage, &a);
  if (rc >= 0) return rc;
  const char *v = a.precision ? a.precision : "both";
  const int which = !strcmp(v, "bf16") ? 0 : !strcmp(v, "fp32") ? 1 : !strcmp(v, "both") ? -1 : -2;
  if (which == -2 ||
      (a.bench && (a.h < 8 || a.w < 8 || a.n < 1 || (a.n - 1) % 4 != 0 || a.reps < 1))) {
    fputs(usage, stderr);
    return 2;
  }
  if (sp_test_no_cuda("test_vae_enc_gpu")) return 77;
  sp_test_begin("test_vae_enc_gpu");
  if (a.bench) return run_bench(a.h, a.w, a.n, a.reps, which);
  printf("# relative L2 of the GPU latents against the CPU encoder; calls: the callback's "
         "(first latent frame, count) sequence; rerun: bit-identical second encode; arena: "
         "the layout's bytes and the device memory the encoder took\n");
  const int n = a.small ? 1 : (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < n; i++) run_case(&cases[i]);
  return sp_test_end();
}
