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
#define MAX_CALLS 64

/* Whole latents assembled from an encode's chunks, with the calls seen. */
typedef struct sink {
  float *lat;
  int64_t z, F, hw;
  int calls;
  int64_t f0[MAX_CALLS], n[MAX_CALLS];
} sink;

static int sink_put(void *user, const float *lat, int64_t f0, int64_t n) {
  sink *s = user;
  if (s->calls < MAX_CALLS) {
    s->f0[s->calls] = f0;
    s->n[s->calls] = n;
  }
  s->calls++;
  if (f0 < 0 || n < 1 || f0 + n > s->F) return 0; /* recorded; the check reports it */
  for (int64_t ch = 0; ch < s->z; ch++)
    memcpy(s->lat + (ch * s->F + f0) * s->hw, lat + ch * n * s->hw,
           (size_t)(n * s->hw) * sizeof *s->lat);
  return 0;
}

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
};

static void make_config(const ecase *k, wan_vae_config *c) {
  wan_vae_config_published(c);
  c->encoder = 1;
  c->dim = k->dim;
  c->n_mult = k->n_mult;
  static const int64_t mult4[4] = {1, 2, 4, 4}, mult3[3] = {1, 2, 2};
  for (int i = 0; i < k->n_mult; i++) c->dim_mult[i] = k->n_mult == 4 ? mult4[i] : mult3[i];
  c->num_res_blocks = k->num_res;
  for (int i = 0; i < 3; i++) c->temporal_up[i] = i + 1 < k->n_mult ? k->temporal[i] : 0;
}

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t free_bytes(void) {
  size_t f = 0, total = 0;
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemGetInfo(&f, &total));
  return f;
}

/* One precision of a case against the CPU's ref. */
static void run_gpu(const ecase *k, const wan_vae_config *c, const float *packed,
                    const float *video, const sink *ref, int pi, double cpu_s) {
  const wan_vae_gpu_precision p = pi ? WAN_VAE_GPU_FP32 : WAN_VAE_GPU_BF16;
  const double tol = pi ? TOL_F32 : TOL_BF16;
  const int64_t nl = ref->z * ref->F * ref->hw;
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
  sink a = {.lat = sp_test_alloc(nl), .z = ref->z, .F = ref->F, .hw = ref->hw};
  sink b = a;
  b.lat = sp_test_alloc(nl);
  const double t0 = seconds();
  const int rc = wan_vae_enc_gpu_encode(g, video, k->T, sink_put, &a);
  const double gpu_s = seconds() - t0;
  wan_vae_enc_gpu_encode(g, video, k->T, sink_put, &b);
  const int64_t used = (int64_t)free0 - (int64_t)free_bytes();
  const double err = sp_test_rel_l2_f32(a.lat, ref->lat, nl);
  int same_calls = a.calls == ref->calls && a.calls <= MAX_CALLS;
  for (int i = 0; same_calls && i < a.calls; i++)
    same_calls = a.f0[i] == ref->f0[i] && a.n[i] == ref->n[i];
  const int det = memcmp(a.lat, b.lat, (size_t)nl * sizeof *a.lat) == 0;
  const int arena = wan_vae_enc_gpu_peak_bytes(g) == layout && used >= layout &&
                    used <= layout + WAN_VAE_GPU_SLACK_BYTES;
  CHECK(rc == 0, "%s: encode returned %d", name, rc);
  CHECK(err <= tol, "%s: relative L2 %.3e > %.0e", name, err, tol);
  CHECK(same_calls, "%s: %d callback calls, the CPU encoder made %d (or their frames differ)",
        name, a.calls, ref->calls);
  CHECK(det, "%s: a second encode gives other bits", name);
  CHECK(arena, "%s: arena %lld bytes, layout %lld, device memory taken %lld", name,
        (long long)wan_vae_enc_gpu_peak_bytes(g), (long long)layout, (long long)used);
  CHECK(sp_test_guard_ok(a.lat, nl) && sp_test_guard_ok(b.lat, nl),
        "%s: the callback wrote past the latents", name);
  printf("  %-48s err %.3e (tol %.0e)  calls %d %s  rerun %s  cpu %.2fs gpu %.3fs  "
         "arena %.1f MiB (taken %.1f)  %s\n",
         name, err, tol, a.calls, same_calls ? "ok" : "BAD", det ? "same" : "DIFFERS", cpu_s,
         gpu_s, (double)layout / (1 << 20), (double)used / (1 << 20),
         err <= tol && same_calls && det && arena && rc == 0 ? "pass" : "FAIL");
  fflush(stdout);
  wan_vae_enc_gpu_free(g);
  free(a.lat);
  free(b.lat);
}

static void run_case(const ecase *k) {
  wan_vae_config c;
  make_config(k, &c);
  static wan_vae_enc_weights wt;
  static wan_vae_table t;
  wan_vae_enc_table_make(&c, &wt, &t);
  float *packed = sp_test_malloc((size_t)t.packed_floats * sizeof *packed);
  memset(packed, 0, (size_t)t.packed_floats * sizeof *packed);
  sp_test_vae_fill_weights(&t, packed, 0);
  wan_vae_table_bind(&t, packed);
  const int64_t nv = 3 * k->T * k->H * k->W;
  float *video = sp_test_alloc(nv);
  sp_rand_fill(video, nv, -1.0, 1.0);
  wan_vae_encoder *e;
  if (wan_vae_encoder_create(&c, k->H, k->W, &e) != SP_OK) {
    CHECK(0, "cpu encoder_create failed");
    return;
  }
  sink ref = {.z = c.z_dim, .F = wan_vae_enc_latent_frames(&c, k->T), .hw = e->h * e->w};
  ref.lat = sp_test_alloc(ref.z * ref.F * ref.hw);
  const double t0 = seconds();
  wan_vae_encode_stream(e, &wt, video, k->T, sink_put, &ref);
  const double cpu_s = seconds() - t0;
  wan_vae_encoder_free(e);
  for (int pi = 0; pi < 2; pi++)
    if (!k->fp32_only || pi == 1) run_gpu(k, &c, packed, video, &ref, pi, cpu_s);
  free(ref.lat);
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
  double t0 = seconds();
  if (wan_vae_enc_gpu_create(c, packed, T, H, W, p, &g) != SP_OK) {
    CHECK(0, "bench: create failed (%s)", pi ? "fp32" : "bf16");
    return;
  }
  const double create_s = seconds() - t0;
  int64_t frames = 0;
  t0 = seconds();
  wan_vae_enc_gpu_encode(g, video, T, count_put, &frames); /* warm-up: algorithms chosen */
  const double warm_s = seconds() - t0;
  const size_t free1 = free_bytes();
  double best = 1e30, sum = 0.0;
  for (int i = 0; i < reps; i++) {
    frames = 0;
    t0 = seconds();
    wan_vae_enc_gpu_encode(g, video, T, count_put, &frames);
    const double dt = seconds() - t0;
    CHECK(frames == F, "bench: %lld latent frames, expected %lld", (long long)frames,
          (long long)F);
    best = dt < best ? dt : best;
    sum += dt;
  }
  wan_vae_enc_gpu_profile(g, 1);
  wan_vae_enc_gpu_encode(g, video, T, count_put, &frames);
  double ms[WAN_VAE_GPU_OPS];
  wan_vae_enc_gpu_profile_ms(g, ms);
  char ops[512] = "";
  size_t ol = 0;
  for (int i = 0; i < WAN_VAE_GPU_OPS && ol + 40 < sizeof ops; i++)
    ol += (size_t)snprintf(ops + ol, sizeof ops - ol, "%s\"%s\":%.2f", i ? "," : "",
                           wan_vae_gpu_op_name((wan_vae_gpu_op)i), ms[i]);
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
  float *packed = sp_test_malloc((size_t)t.packed_floats * sizeof *packed);
  memset(packed, 0, (size_t)t.packed_floats * sizeof *packed);
  sp_rand_state_set(0x5eed5eedull); /* the same synthetic weights every run */
  sp_test_vae_fill_weights(&t, packed, 0);
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

static void usage(FILE *f) {
  fprintf(f, "usage: test_vae_enc_gpu [--small]\n"
             "       test_vae_enc_gpu --bench H W T [--reps N] [--precision bf16|fp32|both]\n");
}

int main(int argc, char **argv) {
  int small = 0, bench = 0, reps = 3, which = -1;
  int64_t bh = 0, bw = 0, bT = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--small") == 0) {
      small = 1;
    } else if (strcmp(argv[i], "--bench") == 0 && i + 3 < argc) {
      bench = 1;
      bh = atoll(argv[i + 1]);
      bw = atoll(argv[i + 2]);
      bT = atoll(argv[i + 3]);
      i += 3;
    } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--precision") == 0 && i + 1 < argc) {
      const char *v = argv[++i];
      which = strcmp(v, "bf16") == 0 ? 0 : strcmp(v, "fp32") == 0 ? 1 : strcmp(v, "both") == 0 ? -1 : -2;
      if (which == -2) {
        usage(stderr);
        return 2;
      }
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (bench && (bh < 8 || bw < 8 || bT < 1 || (bT - 1) % 4 != 0 || reps < 1)) {
    usage(stderr);
    return 2;
  }
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    printf("test_vae_enc_gpu: skipped: no CUDA device (cudaGetDeviceCount: %s, %d devices)\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "ok", ndev);
    return 77;
  }
  sp_test_begin("test_vae_enc_gpu");
  if (bench) return run_bench(bh, bw, bT, reps, which);
  printf("# relative L2 of the GPU latents against the CPU encoder; calls: the callback's "
         "(first latent frame, count) sequence; rerun: bit-identical second encode; arena: "
         "the layout's bytes and the device memory the encoder took\n");
  const int n = small ? 1 : (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < n; i++) run_case(&cases[i]);
  return sp_test_end();
}
