/* The CUDA Wan 2.2 VAE (ranks/nets/wan_vae22/cuda/wan_vae22_cuda.h), encoder
 * and decoder, against the CPU coders (wan_vae22.h).
 *
 *   test_vae22_gpu             every case below, bf16 and fp32
 *   test_vae22_gpu --small     one tiny case of each part (for compute-sanitizer)
 *   test_vae22_gpu --bench H W F [--reps N] [--precision bf16|fp32|both]
 *                  [--part decoder|encoder]
 *                              times the published config (synthetic weights
 *                              from a fixed seed): decodes of random latents
 *                              F x H x W, or encodes of a random video of
 *                              1 + 4 (F - 1) frames of 16H x 16W; after a
 *                              warm-up, the best of N; one JSON line per
 *                              precision: seconds, device memory, per-op ms
 *
 * Each case: a small config (widths 8-32, odd latent sizes, 1-3 latent
 * frames or 1-9 video frames), random weights (tests/common/sp_test_vae.h)
 * and inputs; the CPU coder (fp32) is the reference, run on the same
 * weights the GPU holds (for bf16: every convolution weight rounded to
 * bf16, as the CUDA coders store them, so the comparison measures the
 * bf16 activations). Checks per precision:
 * - relative L2 of the whole output <= 1e-2 (bf16) or 1e-4 (fp32);
 * - the decoder's video within [-1, 1], the callback's (first frame,
 *   count) sequence the CPU decoder's;
 * - a second run with the same coder gives the same bits (caches reset);
 * - the coder's one allocation is the planner's layout: its bytes equal
 *   wan_vae22_gpu_bytes (the count every build makes), and the device's
 *   free memory drops by at least that much at create. (Every use of a
 *   role inside the coder is checked against the layout's size of it.)
 * Inputs are fresh random numbers each run; the seed is printed (SP_SEED=n
 * replays one). Exit 77 with one line when there is no CUDA device. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "wan_vae22.h"
#include "wan_vae22_cuda.h"
#include "wan_vae22_gpu.h"

#define SP_TEST_CUDA
#include "sp_test.h"
#include "sp_test_vae.h"

/* bf16: a host emulation of the CUDA coders' bf16 stores (the CPU coders
 * with every conv output, norm + SiLU output, attention store, upsampled or
 * padded input and the patchified video rounded to bf16, the residual
 * stream in fp32, the weights of the bf16 case) measured 4.5e-3 to 6.9e-3
 * relative L2 for decoders and 1.5e-3 to 2.2e-3 for encoders of widths 8
 * to 32 against the fp32 CPU coders: 1e-2 holds the bf16 arithmetic, while
 * a wrong tap, cache or channel gives errors of order 1. */
#define TOL_BF16 1e-2
#define TOL_F32 1e-4

typedef struct vcase {
  int encoder;
  int64_t dim, dec_dim, num_res;
  int temporal[3];
  int64_t n, h, w; /* decoder: F latent frames of h x w; encoder: T frames of h x w pixels */
} vcase;

static const vcase cases[] = {
    {0, 8, 8, 2, {0, 1, 1}, 2, 3, 5},     /* --small: the published structure, narrow */
    {1, 8, 8, 2, {0, 1, 1}, 5, 48, 16},   /* --small */
    {0, 8, 16, 2, {0, 1, 1}, 1, 5, 3},    /* one latent frame: chunk 0 only */
    {0, 16, 8, 2, {0, 1, 1}, 3, 7, 9},    /* three chunks: the caches' steady state */
    {0, 8, 32, 1, {1, 0, 1}, 3, 3, 3},    /* other structure, wider */
    {1, 8, 8, 2, {0, 1, 1}, 1, 16, 32},   /* the image alone (TI2V) */
    {1, 16, 8, 2, {0, 1, 1}, 9, 32, 48},  /* three chunks */
    {1, 8, 8, 1, {1, 0, 1}, 9, 16, 16},   /* other structure */
};

static void make_config(const vcase *k, wan_vae22_config *c) {
  wan_vae22_config_published(c);
  c->dim = k->dim;
  c->dec_dim = k->dec_dim;
  c->num_res_blocks = k->num_res;
  for (int i = 0; i < 3; i++) c->temporal_down[i] = k->temporal[i];
}

/* The part's weights for precision pi (1: fp32; 0: bf16-rounded convs),
 * the same random numbers for both (state saved by the caller). */
static float *case_weights(const wan_vae22_config *c, wan_vae22_part part, int round,
                           uint64_t state, wan_vae22_weights *w) {
  static wan_vae_table t;
  wan_vae22_table_make(c, part, w, &t);
  sp_rand_state_set(state);
  float *packed = sp_test_vae_new_weights(&t, round ? SP_TEST_VAE_BF16 : SP_TEST_VAE_FP32);
  wan_vae_table_bind(&t, packed);
  return packed;
}

/* The output of one run (CPU when g is NULL) into out (n floats). */
static int run_once(const vcase *k, const wan_vae22_config *c, wan_vae22_gpu *g,
                    wan_vae22_state *s, const wan_vae22_weights *w, const float *in,
                    sp_test_vae_sink *out, float *lat) {
  if (k->encoder)
    return g ? wan_vae22_gpu_encode(g, in, k->n, lat) : wan_vae22_encode(s, &w->enc, in, k->n,
                                                                         lat);
  (void)c;
  return g ? wan_vae22_gpu_decode(g, in, k->n, sp_test_vae_sink_put, out)
           : wan_vae22_decode_stream(s, &w->dec, in, k->n, sp_test_vae_sink_put, out);
}

/* One precision of a case: the CPU reference on the weights the GPU holds,
 * the GPU twice, the checks. */
static void run_precision(const vcase *k, const wan_vae22_config *c, int pi, const float *in,
                          uint64_t wstate) {
  const wan_vae22_part part = k->encoder ? WAN_VAE22_ENCODER : WAN_VAE22_DECODER;
  const wan_vae_gpu_precision p = pi ? WAN_VAE_GPU_FP32 : WAN_VAE_GPU_BF16;
  const double tol = pi ? TOL_F32 : TOL_BF16;
  static wan_vae22_weights w;
  float *packed = case_weights(c, part, !pi, wstate, &w);
  const int64_t sf = wan_vae22_space_factor(c);
  /* the output: the encoder's latents (z_dim, F, h w / sf^2), the
   * decoder's video (3, T, h w sf^2) */
  const int64_t ch = k->encoder ? c->z_dim : 3;
  const int64_t T = k->encoder ? wan_vae22_latent_frames(c, k->n) : wan_vae22_out_frames(c, k->n);
  const int64_t ohw = k->encoder ? (k->h / sf) * (k->w / sf) : k->h * k->w * sf * sf;
  const int64_t n = ch * T * ohw;
  sp_test_vae_sink ref = sp_test_vae_sink_new(ch, T, ohw);
  sp_test_vae_sink a = sp_test_vae_sink_new(ch, T, ohw), b = sp_test_vae_sink_new(ch, T, ohw);
  wan_vae22_state *s = NULL;
  const int rc_s = k->encoder ? wan_vae22_encoder_create(c, k->h, k->w, &s)
                              : wan_vae22_decoder_create(c, k->h, k->w, &s);
  char name[160];
  snprintf(name, sizeof name, "%s dim %lld/%lld res %lld n %lld %lldx%lld %s",
           k->encoder ? "encoder" : "decoder", (long long)k->dim, (long long)k->dec_dim,
           (long long)k->num_res, (long long)k->n, (long long)k->h, (long long)k->w,
           pi ? "fp32" : "bf16");
  double t0 = sp_test_seconds();
  if (rc_s != SP_OK || run_once(k, c, NULL, s, &w, in, &ref, ref.video) != 0) {
    CHECK(0, "%s: the CPU run failed", name);
    return;
  }
  const double cpu_s = sp_test_seconds() - t0;
  wan_vae22_state_free(s);
  size_t free0 = 0, free1 = 0, total = 0;
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemGetInfo(&free0, &total));
  wan_vae22_gpu *g;
  if (wan_vae22_gpu_create(c, part, packed, k->h, k->w, p, &g) != SP_OK) {
    CHECK(0, "%s: gpu create failed", name);
    return;
  }
  CHECK_CUDA(cudaMemGetInfo(&free1, &total));
  const int64_t laid = wan_vae22_gpu_bytes(c, part, k->h, k->w, p);
  const int arena = wan_vae22_gpu_peak_bytes(g) == laid &&
                    (int64_t)wan_vae22_gpu_layout_of(g)->total == laid &&
                    (int64_t)free0 - (int64_t)free1 >= laid;
  t0 = sp_test_seconds();
  const int rc = run_once(k, c, g, NULL, &w, in, &a, a.video);
  const double gpu_s = sp_test_seconds() - t0;
  run_once(k, c, g, NULL, &w, in, &b, b.video);
  const double err = sp_test_rel_l2_f32(a.video, ref.video, n);
  int inside = 1;
  const int same_calls = sp_test_vae_sink_same_calls(&a, &ref);
  for (int64_t i = 0; !k->encoder && i < n; i++)
    inside &= a.video[i] >= -1.0f && a.video[i] <= 1.0f;
  const int det = memcmp(a.video, b.video, (size_t)n * sizeof *a.video) == 0;
  const int guard = sp_test_guard_ok(a.video, n) && sp_test_guard_ok(b.video, n);
  CHECK(rc == 0, "%s: run returned %d", name, rc);
  CHECK(err <= tol, "%s: relative L2 %.3e > %.0e", name, err, tol);
  CHECK(inside && same_calls, "%s: a value outside [-1, 1], or the callback's calls differ",
        name);
  CHECK(det, "%s: a second run gives other bits", name);
  CHECK(guard, "%s: wrote past the output", name);
  CHECK(arena, "%s: the allocation %lld bytes, the layout %lld, the count %lld, free memory "
        "dropped by %lld", name, (long long)wan_vae22_gpu_peak_bytes(g),
        (long long)wan_vae22_gpu_layout_of(g)->total, (long long)laid,
        (long long)free0 - (long long)free1);
  printf("  %-50s err %.3e (tol %.0e)  rerun %s  arena %s  cpu %.2fs gpu %.3fs  device %.1f "
         "MiB  %s\n", name, err, tol, det ? "same" : "DIFFERS", arena ? "= layout" : "BAD",
         cpu_s, gpu_s, (double)laid / (1 << 20),
         err <= tol && inside && same_calls && det && guard && arena && rc == 0 ? "pass"
                                                                               : "FAIL");
  fflush(stdout);
  wan_vae22_gpu_free(g);
  free(ref.video), free(a.video), free(b.video), free(packed);
}

static void run_case(const vcase *k) {
  wan_vae22_config c;
  make_config(k, &c);
  const int64_t n = k->encoder ? 3 * k->n * k->h * k->w : c.z_dim * k->n * k->h * k->w;
  float *in = sp_test_alloc(n);
  sp_rand_fill(in, n, k->encoder ? -1.0 : -2.0, k->encoder ? 1.0 : 2.0);
  const uint64_t wstate = sp_rand_u64();
  for (int pi = 0; pi < 2; pi++) run_precision(k, &c, pi, in, wstate);
  free(in);
}

/* ---------------------------------------------------------------- bench */

static int count_put(void *user, const float *frames, int64_t t0, int64_t n) {
  (void)frames, (void)t0;
  *(int64_t *)user += n;
  return 0;
}

/* One timed run of g (decode of z, or encode of video into lat). */
static double bench_once(wan_vae22_gpu *g, int enc, const float *in, int64_t n, float *lat) {
  int64_t frames = 0;
  const double t0 = sp_test_seconds();
  if (enc)
    wan_vae22_gpu_encode(g, in, n, lat);
  else
    wan_vae22_gpu_decode(g, in, n, count_put, &frames);
  return sp_test_seconds() - t0;
}

/* One bench result: the part, the precision, the latent, the times. */
typedef struct bench_row {
  int enc, pi, reps;
  int64_t F, h, w;
  double best, mean, used_gib;
} bench_row;

static void bench_print(wan_vae22_gpu *g, const bench_row *b) {
  double ms[WAN_VAE22_GPU_OPS];
  wan_vae22_gpu_profile_ms(g, ms);
  char ops[640] = "";
  size_t ol = 0;
  for (int i = 0; i < WAN_VAE22_GPU_OPS && ol + 40 < sizeof ops; i++)
    ol += (size_t)snprintf(ops + ol, sizeof ops - ol, "%s\"%s\":%.2f", i ? "," : "",
                           wan_vae22_gpu_op_name((wan_vae22_gpu_op)i), ms[i]);
  printf("{\"bench\":\"vae22_gpu\",\"part\":\"%s\",\"precision\":\"%s\",\"latent\":[%lld,%lld,"
         "%lld],\"video\":[%lld,%lld,%lld],\"reps\":%d,\"%s_s\":%.4f,\"mean_s\":%.4f,"
         "\"layout_gib\":%.3f,\"used_gib\":%.3f,\"ops_ms\":{%s}}\n",
         b->enc ? "encoder" : "decoder", b->pi ? "fp32" : "bf16", (long long)b->F,
         (long long)b->h, (long long)b->w, (long long)(1 + 4 * (b->F - 1)), (long long)(16 * b->h),
         (long long)(16 * b->w), b->reps, b->enc ? "encode" : "decode", b->best, b->mean,
         (double)wan_vae22_gpu_peak_bytes(g) / (1 << 30), b->used_gib, ops);
  fflush(stdout);
}

static int run_bench(int64_t h, int64_t w, int64_t F, int reps, int which, int enc) {
  wan_vae22_config c;
  wan_vae22_config_published(&c);
  const wan_vae22_part part = enc ? WAN_VAE22_ENCODER : WAN_VAE22_DECODER;
  static wan_vae22_weights wt;
  float *packed = case_weights(&c, part, 0, 0x5eed5eedull, &wt);
  const int64_t T = 1 + 4 * (F - 1);
  const int64_t n_in = enc ? 3 * T * 256 * h * w : c.z_dim * F * h * w;
  float *in = sp_test_malloc((size_t)n_in * sizeof *in), *lat = NULL;
  sp_rand_fill(in, n_in, enc ? -1.0 : -2.0, enc ? 1.0 : 2.0);
  if (enc) lat = sp_test_malloc((size_t)(c.z_dim * F * h * w) * sizeof *lat);
  for (int pi = 0; pi < 2; pi++) {
    if (which >= 0 && which != pi) continue;
    size_t free0 = 0, free1 = 0, total = 0;
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaMemGetInfo(&free0, &total));
    wan_vae22_gpu *g;
    if (wan_vae22_gpu_create(&c, part, packed, enc ? 16 * h : h, enc ? 16 * w : w,
                             pi ? WAN_VAE_GPU_FP32 : WAN_VAE_GPU_BF16, &g) != SP_OK) {
      fprintf(stderr, "test_vae22_gpu: bench: create failed\n");
      return 1;
    }
    bench_once(g, enc, in, enc ? T : F, lat); /* warm-up: the algorithms chosen here */
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaMemGetInfo(&free1, &total));
    double best = 1e30, sum = 0.0;
    for (int i = 0; i < reps; i++) {
      const double dt = bench_once(g, enc, in, enc ? T : F, lat);
      best = dt < best ? dt : best;
      sum += dt;
    }
    wan_vae22_gpu_profile(g, 1); /* one more run with every op timed (not in the times) */
    bench_once(g, enc, in, enc ? T : F, lat);
    const bench_row row = {enc, pi, reps, F, h, w, best, sum / reps,
                           ((double)free0 - (double)free1) / (1 << 30)};
    bench_print(g, &row);
    wan_vae22_gpu_free(g);
  }
  free(in), free(lat), free(packed);
  return sp_test_failures() ? 1 : 0;
}

static const char usage[] =
    "usage: test_vae22_gpu [--small]\n"
    "       test_vae22_gpu --bench H W F [--reps N] [--precision bf16|fp32|both]\n"
    "                      [--part decoder|encoder]\n";

int main(int argc, char **argv) {
  sp_test_vae_cli a;
  const int rc = sp_test_vae_cli_parse(argc, argv, 1, usage, &a);
  if (rc >= 0) return rc;
  const char *v = a.precision ? a.precision : "both", *part = a.part ? a.part : "decoder";
  const int which = !strcmp(v, "bf16") ? 0 : !strcmp(v, "fp32") ? 1 : !strcmp(v, "both") ? -1 : -2;
  const int enc = !strcmp(part, "encoder") ? 1 : !strcmp(part, "decoder") ? 0 : -1;
  if (which == -2 || enc < 0 || (a.bench && (a.h < 1 || a.w < 1 || a.n < 1 || a.reps < 1))) {
    fputs(usage, stderr);
    return 2;
  }
  if (sp_test_no_cuda("test_vae22_gpu")) return 77;
  sp_test_begin("test_vae22_gpu");
  if (a.bench) return run_bench(a.h, a.w, a.n, a.reps, which, enc);
  printf("# relative L2 of the GPU output against the CPU coder on the same weights; rerun: "
         "bit-identical second run; arena: the allocation is the planner's layout\n");
  const int n = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < (a.small ? 2 : n); i++) run_case(&cases[i]);
  return sp_test_end();
}
