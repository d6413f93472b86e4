/* The CUDA VAE decoder (ranks/nets/wan_vae/wan_vae_gpu.h) against the CPU decoder.
 *
 *   test_vae_gpu             every case below, bf16, fp32 and tf32
 *   test_vae_gpu --small     one tiny case (for compute-sanitizer)
 *   test_vae_gpu --bench H W F [--reps N] [--precision bf16|fp32|tf32|all]
 *                            times decodes of the published config at latent
 *                            H x W with F frames (synthetic weights from a
 *                            fixed seed) and prints one JSON line per
 *                            precision: seconds, device memory, per-op ms
 *   test_vae_gpu --algos [H W [F]] [--precision bf16|fp32|tf32] [--json PATH]
 *                            every cuDNN algorithm of every convolution shape
 *                            a decode at latent H x W (60 104) with F frames
 *                            (21) runs, in one precision (bf16), timed and
 *                            compared (tests/gpu/dev/vae_algo_bench.h)
 *   test_vae_gpu --engines [H W [F]] [--precision bf16|fp32|tf32] [--json PATH]
 *                            the same shapes through cuDNN's backend API:
 *                            the engine configurations of its heuristics
 *                            (modes A, B, fallback) and knob variants, timed
 *                            and compared with the legacy pick
 *                            (tests/gpu/dev/vae_engine_bench.h)
 *
 * Each case: a small config (dim 8-32, odd sizes, 1-5 latent frames; one
 * at the published widths, whose bf16 full-resolution convolutions run the
 * backend engine rule of kernels/cuda/cuda_vae_graph.cuh),
 * random weights scaled as tests/vae/test_vae_driver.c's, random latents;
 * the CPU decode (fp32) is the reference. Checks per precision:
 * - relative L2 of the whole video <= 3e-2 (bf16, see TOL_BF16), 1e-4
 *   (fp32) or SP_TEST_VAE_TOL_TF32 (tf32: 1e-2, from the CPU emulation of
 *   TF32's rounding, tests/vae/test_vae_tf32_emul.c); a tf32 row also
 *   prints its distance from the fp32 decode (0 would mean cuDNN ran no
 *   TF32 algorithm for this decoder's shapes);
 * - every value within [-1, 1];
 * - the callback gets the same (first frame, frame count) sequence as the
 *   CPU decoder's;
 * - a second decode with the same decoder gives the same bits (the caches
 *   are reset; the algorithms are kept);
 * - the largest case runs the attention in several chunks of query rows
 *   (fp32 and tf32, 6400 positions: its scores do not fit the scratch at
 *   once);
 * - the tiled cases decode in forced spatial tiles (wan_vae_tile.h) on both
 *   sides: the GPU decoder made for the tile size against the CPU decoder
 *   tiled the same way, within the same tolerances (tiling is exact
 *   arithmetic on the tiles' frames, so it adds nothing to the error).
 * Inputs are fresh random numbers each run; the seed is printed (SP_SEED=n
 * replays one). Exit 77 with one line when there is no CUDA device. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_vae_conv.h"
#include "log.h"
#include "vae_layout.h"
#include "wan_vae.h"
#include "wan_vae_cuda.h"
#include "wan_vae_gpu.h"
#include "wan_vae_tile.h"

#define SP_TEST_CUDA
#include "sp_test.h"
#include "sp_test_vae.h"
#include "vae_algo_bench.h"
#include "vae_engine_bench.h"

/* bf16: every activation stored in bf16 between ops (conv inputs and
 * outputs, norms, the residual stream), weights rounded to bf16, fp32
 * accumulation, as PyTorch's bf16 autocast runs the published decoder. A
 * host emulation of exactly that arithmetic (the kernels of
 * kern_cuda_vae.h written in C with bf16 rounding at every store) measured
 * 0.8e-2 to 2.0e-2 relative L2 against the fp32 CPU decoder on these
 * narrow random decoders (seeds 1-3 and 7), so bf16 itself sits at ~1e-2
 * here: 3e-2 leaves room for it, while a wrong tap, cache or channel gives
 * errors of order 1. fp32: the same emulation in fp32 gave 0.9e-6 to
 * 1.7e-6. */
#define TOL_BF16 3e-2
#define TOL_F32 1e-4

/* The precisions every case runs, in this order (fp32 before tf32: the
 * tf32 row compares with the fp32 decode), with their bounds. */
static const struct {
  wan_vae_gpu_precision p;
  double tol;
} precisions[] = {
    {WAN_VAE_GPU_BF16, TOL_BF16},
    {WAN_VAE_GPU_FP32, TOL_F32},
    {WAN_VAE_GPU_TF32, SP_TEST_VAE_TOL_TF32},
};
enum { N_PRECISIONS = (int)(sizeof precisions / sizeof precisions[0]) };

typedef struct vcase {
  int64_t dim, h, w, F;
  int n_mult;
  int64_t num_res;
  int temporal[3];
  int fp32_only; /* the attention-chunking case: only fp32 (and tf32) chunk at this size */
  wan_vae_tiling tile; /* th > 0: forced tiles on both sides */
} vcase;

static const vcase cases[] = {
    {8, 3, 5, 2, 4, 2, {1, 1, 0}, 0, {0, 0, 0}}, /* --small: the published structure, narrow */
    {16, 5, 3, 1, 4, 2, {1, 1, 0}, 0, {0, 0, 0}}, /* one latent frame: chunk 0 only */
    {8, 7, 9, 5, 4, 2, {1, 1, 0}, 0, {0, 0, 0}}, /* five chunks: the caches' steady state */
    {32, 3, 7, 2, 4, 2, {1, 1, 0}, 0, {0, 0, 0}}, /* wider */
    {16, 5, 5, 3, 3, 1, {0, 1, 0}, 0, {0, 0, 0}}, /* other structure: 3 levels, 2 blocks, late time up */
    {8, 64, 100, 2, 4, 2, {1, 1, 0}, 1, {0, 0, 0}}, /* attention over 6400 positions, in row chunks */
    {16, 9, 11, 3, 4, 2, {1, 1, 0}, 0, {5, 6, 2}}, /* 3 x 3 tiles, overlaps 2 and 3 */
    {8, 7, 6, 2, 4, 2, {1, 1, 0}, 0, {7, 3, 0}},   /* 1 x 2 tiles, hard seams */
    /* the published widths (96, 192, 384, 384): bf16's full-resolution 3x3x3
     * convolutions, 96 to 96 channels, take the backend engine rule
     * (cuda_vae_graph.cuh) */
    {96, 2, 3, 2, 4, 2, {1, 1, 0}, 0, {0, 0, 0}},
};

/* A tiled decode's decoder: the CPU's (with its weights) or the GPU's. */
typedef struct tile_dec {
  wan_vae_decoder *cpu;
  const wan_vae_weights *wt;
  wan_vae_gpu *gpu;
} tile_dec;

static int tile_decode(void *decoder, const float *lat, int64_t F, wan_vae_frames_fn fn,
                       void *user) {
  tile_dec *d = decoder;
  return d->gpu ? wan_vae_gpu_decode(d->gpu, lat, F, fn, user)
                : wan_vae_decode_stream(d->cpu, d->wt, lat, F, fn, user);
}

/* A case's decode with d: tiled when the case says so. */
static int case_decode(const vcase *k, const wan_vae_config *c, tile_dec *d, const float *z,
                       sp_test_vae_sink *out) {
  if (k->tile.th > 0)
    return wan_vae_decode_tiled(c, z, k->F, k->h, k->w, &k->tile, tile_decode, d,
                                sp_test_vae_sink_put, out);
  return tile_decode(d, z, k->F, sp_test_vae_sink_put, out);
}

/* Convolution shapes of g's decodes that ran the backend engine rule's
 * plan instead of the legacy algorithm (cuda_vae_conv_picks). */
static int rule_plans(const wan_vae_gpu *g) {
  static cuda_vae_conv_pick picks[128];
  kern_dtype dt;
  int tf32, n = 0;
  size_t ws;
  const int np = cuda_vae_conv_picks(wan_vae_gpu_kernels(g), picks, 128, &dt, &tf32, &ws);
  for (int i = 0; i < np && i < 128; i++) n += picks[i].engine >= 0;
  return n;
}

/* The current device is sm_90 (H100, H200). */
static int sm90(void) {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
    return 0;
  return major == 9 && minor == 0;
}

static void run_case(const vcase *k) {
  wan_vae_config c;
  sp_test_vae_config_narrow(&c, 0, k->dim, k->n_mult, k->num_res, k->temporal);
  static wan_vae_weights wt;
  static wan_vae_table t;
  wan_vae_table_make(&c, &wt, &t);
  float *packed = sp_test_vae_new_weights(&t, SP_TEST_VAE_FP32);
  wan_vae_table_bind(&t, packed);
  const int64_t hw = k->h * k->w, nz = 16 * k->F * hw;
  float *z = sp_test_alloc(nz);
  sp_rand_fill(z, nz, -2.0, 2.0);
  const int64_t T = wan_vae_out_frames(&c, k->F), s = wan_vae_out_scale(&c);
  const int64_t ohw = hw * s * s, nv = 3 * T * ohw;

  /* The reference: the CPU decoder. */
  sp_test_vae_sink ref = sp_test_vae_sink_new(3, T, ohw);
  /* the decoders' latent size: the tile's when tiled */
  const int64_t dh = k->tile.th > 0 && k->tile.th < k->h ? k->tile.th : k->h;
  const int64_t dw = k->tile.tw > 0 && k->tile.tw < k->w ? k->tile.tw : k->w;
  tile_dec cd = {NULL, &wt, NULL};
  if (wan_vae_decoder_create(&c, dh, dw, &cd.cpu) != SP_OK) {
    CHECK(0, "cpu decoder_create failed");
    return;
  }
  double t0 = sp_test_seconds();
  case_decode(k, &c, &cd, z, &ref);
  const double cpu_s = sp_test_seconds() - t0;
  wan_vae_decoder_free(cd.cpu);

  float *fp32_video = NULL; /* the fp32 decode, for the tf32 row's distance from it */
  for (int pi = 0; pi < N_PRECISIONS; pi++) {
    const wan_vae_gpu_precision p = precisions[pi].p;
    if (k->fp32_only && p == WAN_VAE_GPU_BF16) continue;
    const double tol = precisions[pi].tol;
    char name[160];
    snprintf(name, sizeof name, "dim %lld levels %d res %lld F %lld %lldx%lld%s %s",
             (long long)k->dim, k->n_mult, (long long)k->num_res, (long long)k->F,
             (long long)k->h, (long long)k->w, k->tile.th > 0 ? " tiled" : "",
             wan_vae_gpu_precision_name(p));
    wan_vae_gpu *g;
    if (wan_vae_gpu_create(&c, packed, dh, dw, p, &g) != SP_OK) {
      CHECK(0, "%s: gpu create failed", name);
      continue;
    }
    sp_test_vae_sink a = sp_test_vae_sink_new(3, T, ohw), b = sp_test_vae_sink_new(3, T, ohw);
    t0 = sp_test_seconds();
    tile_dec gd = {NULL, NULL, g};
    const int rc = case_decode(k, &c, &gd, z, &a);
    const double gpu_s = sp_test_seconds() - t0;
    case_decode(k, &c, &gd, z, &b);
    const double err = sp_test_rel_l2_f32(a.video, ref.video, nv);
    int inside = 1;
    for (int64_t i = 0; i < nv; i++) inside &= a.video[i] >= -1.0f && a.video[i] <= 1.0f;
    const int same_calls = sp_test_vae_sink_same_calls(&a, &ref);
    const int det = memcmp(a.video, b.video, (size_t)nv * sizeof *a.video) == 0;
    const int guard = sp_test_guard_ok(a.video, nv) && sp_test_guard_ok(b.video, nv);
    CHECK(rc == 0, "%s: decode returned %d", name, rc);
    CHECK(err <= tol, "%s: relative L2 %.3e > %.0e", name, err, tol);
    CHECK(inside, "%s: a value outside [-1, 1]", name);
    CHECK(same_calls, "%s: %d callback calls, the CPU decoder made %d (or their frames differ)",
          name, a.calls, ref.calls);
    CHECK(det, "%s: a second decode gives other bits", name);
    CHECK(guard, "%s: the callback wrote past the video", name);
    /* the engine rule's convolutions (cuda_vae_graph.cuh): on an sm_90 GPU,
     * where it was measured, the 96-channel bf16 ones must run it */
    const int ruled = rule_plans(g);
    CHECK(!(p == WAN_VAE_GPU_BF16 && k->dim == 96 && sm90()) || ruled > 0,
          "%s: no convolution ran the engine rule's plan on this sm_90 GPU", name);
    char vs32[48] = "";
    if (p == WAN_VAE_GPU_TF32 && fp32_video)
      snprintf(vs32, sizeof vs32, "  vs fp32 %.3e", sp_test_rel_l2_f32(a.video, fp32_video, nv));
    printf("  %-44s err %.3e (tol %.0e)  calls %d %s  rerun %s  cpu %.2fs gpu %.3fs  "
           "device %.1f MiB  engine-rule shapes %d  %s%s\n",
           name, err, tol, a.calls, same_calls ? "ok" : "BAD", det ? "same" : "DIFFERS", cpu_s,
           gpu_s, (double)wan_vae_gpu_peak_bytes(g) / (1 << 20), ruled,
           err <= tol && inside && same_calls && det && guard && rc == 0 ? "pass" : "FAIL", vs32);
    fflush(stdout);
    wan_vae_gpu_free(g);
    if (p == WAN_VAE_GPU_FP32) {
      fp32_video = a.video;
      a.video = NULL;
    }
    free(a.video);
    free(b.video);
  }
  free(fp32_video);
  free(ref.video);
  free(z);
  free(packed);
}

/* ---------------------------------------------------------------- bench */

typedef struct count_sink {
  int64_t frames;
} count_sink;

static int count_put(void *user, const float *frames, int64_t t0, int64_t n) {
  (void)frames, (void)t0;
  ((count_sink *)user)->frames += n;
  return 0;
}

static int run_bench(int64_t h, int64_t w, int64_t F, int reps, int which) {
  wan_vae_config c;
  wan_vae_config_published(&c);
  static wan_vae_weights wt;
  static wan_vae_table t;
  wan_vae_table_make(&c, &wt, &t);
  sp_rand_state_set(0x5eed5eedull); /* the same synthetic weights every run */
  float *packed = sp_test_vae_new_weights(&t, SP_TEST_VAE_FP32);
  const int64_t nz = 16 * F * h * w;
  float *z = sp_test_malloc((size_t)nz * sizeof *z);
  sp_rand_fill(z, nz, -2.0, 2.0);
  const int64_t T = wan_vae_out_frames(&c, F), s = wan_vae_out_scale(&c);
  for (int pi = 0; pi < N_PRECISIONS; pi++) {
    const wan_vae_gpu_precision p = precisions[pi].p;
    if (which >= 0 && which != (int)p) continue;
    size_t free0 = 0, total = 0, free1 = 0;
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaMemGetInfo(&free0, &total));
    wan_vae_gpu *g;
    double t0 = sp_test_seconds();
    if (wan_vae_gpu_create(&c, packed, h, w, p, &g) != SP_OK) {
      fprintf(stderr, "test_vae_gpu: bench: create failed (%s)\n",
              wan_vae_gpu_precision_name(p));
      return 1;
    }
    const double create_s = sp_test_seconds() - t0;
    count_sink cs = {0};
    t0 = sp_test_seconds();
    wan_vae_gpu_decode(g, z, F, count_put, &cs); /* warm-up: algorithms chosen here */
    const double warm_s = sp_test_seconds() - t0;
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaMemGetInfo(&free1, &total));
    double best = 1e30, sum = 0.0;
    char runs[512] = "";
    size_t rl = 0;
    for (int i = 0; i < reps; i++) {
      cs.frames = 0;
      t0 = sp_test_seconds();
      wan_vae_gpu_decode(g, z, F, count_put, &cs);
      const double dt = sp_test_seconds() - t0;
      CHECK(cs.frames == T, "bench: %lld frames, expected %lld", (long long)cs.frames,
            (long long)T);
      best = dt < best ? dt : best;
      sum += dt;
      if (rl + 16 < sizeof runs)
        rl += (size_t)snprintf(runs + rl, sizeof runs - rl, "%s%.4f", i ? "," : "", dt);
    }
    /* One more decode with every op timed by CUDA events (slower: not in
     * the times above). */
    wan_vae_gpu_profile(g, 1);
    cs.frames = 0;
    wan_vae_gpu_decode(g, z, F, count_put, &cs);
    double ms[WAN_VAE_GPU_OPS];
    wan_vae_gpu_profile_ms(g, ms);
    char ops[512];
    sp_test_vae_ops_json(ms, ops, sizeof ops);
    printf("{\"bench\":\"vae_gpu\",\"precision\":\"%s\",\"latent\":[%lld,%lld,%lld],"
           "\"video\":[%lld,%lld,%lld],\"reps\":%d,\"decode_s\":%.4f,\"decode_mean_s\":%.4f,"
           "\"runs_s\":[%s],\"warmup_s\":%.4f,\"create_s\":%.3f,\"layout_bytes\":%lld,"
           "\"layout_gib\":%.3f,\"used_gib\":%.3f,\"ops_ms\":{%s}}\n",
           wan_vae_gpu_precision_name(p), (long long)F, (long long)h, (long long)w, (long long)T,
           (long long)(s * h), (long long)(s * w), reps, best, sum / reps, runs, warm_s,
           create_s, (long long)wan_vae_gpu_peak_bytes(g),
           (double)wan_vae_gpu_peak_bytes(g) / (1 << 30), ((double)free0 - (double)free1) / (1 << 30),
           ops);
    fflush(stdout);
    wan_vae_gpu_free(g);
  }
  free(z);
  free(packed);
  return sp_test_failures() ? 1 : 0;
}

/* ---------------------------------------------------------------- algos */

/* One decode of F frames at h x w in p with the bench's synthetic weights,
 * then every convolution shape it ran through the algorithm benchmark
 * (engines 0: the legacy API's algorithms) or the engine sweep (1: the
 * backend API's). */
static int run_algos(int64_t h, int64_t w, int64_t F, wan_vae_gpu_precision p,
                     const char *json, int engines) {
  wan_vae_config c;
  wan_vae_config_published(&c);
  static wan_vae_weights wt;
  static wan_vae_table t;
  wan_vae_table_make(&c, &wt, &t);
  sp_rand_state_set(0x5eed5eedull);
  float *packed = sp_test_vae_new_weights(&t, SP_TEST_VAE_FP32);
  const int64_t nz = 16 * F * h * w;
  float *z = sp_test_malloc((size_t)nz * sizeof *z);
  sp_rand_fill(z, nz, -2.0, 2.0);
  wan_vae_gpu *g;
  if (wan_vae_gpu_create(&c, packed, h, w, p, &g) != SP_OK) {
    fprintf(stderr, "test_vae_gpu: algos: create failed (%s)\n", wan_vae_gpu_precision_name(p));
    free(z);
    free(packed);
    return 1;
  }
  count_sink cs = {0};
  const int rc = wan_vae_gpu_decode(g, z, F, count_put, &cs);
  vae_algo_shapes *shapes = rc == 0 ? vae_algo_shapes_take(wan_vae_gpu_kernels(g)) : NULL;
  /* the decoder's memory back before the benchmark allocates its own */
  wan_vae_gpu_free(g);
  free(z);
  free(packed);
  if (!shapes) {
    fprintf(stderr, "test_vae_gpu: algos: %s\n",
            rc ? "the decode failed" : "no host memory for the shapes");
    return 1;
  }
  const vae_algo_opts o = {h, w, F, wan_vae_gpu_precision_name(p), 0x5eed5eedull, json};
  const int failed = engines ? vae_engine_bench_run(shapes, &o) : vae_algo_bench_run(shapes, &o);
  vae_algo_shapes_free(shapes);
  return failed;
}

static const char usage[] =
    "usage: test_vae_gpu [--small]\n"
    "       test_vae_gpu --bench H W F [--reps N] [--precision bf16|fp32|tf32|all]\n"
    "       test_vae_gpu --algos [H W [F]] [--precision bf16|fp32|tf32] [--json PATH]\n"
    "       test_vae_gpu --engines [H W [F]] [--precision bf16|fp32|tf32] [--json PATH]\n";

/* --algos or --engines [H W [F]] [--precision P] [--json PATH]: their own
 * words (argv[1] is --algos or --engines). */
static int algos_main(int argc, char **argv) {
  const int engines = strcmp(argv[1], "--engines") == 0;
  int64_t n[3] = {60, 104, 21};
  int nn = 0;
  const char *prec = "bf16", *json = NULL;
  for (int i = 2; i < argc; i++) {
    char *end = NULL;
    const long long v = strtoll(argv[i], &end, 10);
    if (strcmp(argv[i], "--precision") == 0 && i + 1 < argc) {
      prec = argv[++i];
    } else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json = argv[++i];
    } else if (nn < 3 && end != argv[i] && *end == '\0' && v >= 1) {
      n[nn++] = v;
    } else {
      fputs(usage, stderr);
      return 2;
    }
  }
  wan_vae_gpu_precision p;
  if (nn == 1 || wan_vae_gpu_precision_parse(prec, &p) != SP_OK) {
    fputs(usage, stderr);
    return 2;
  }
  if (sp_test_no_cuda("test_vae_gpu")) return 77;
  sp_test_begin("test_vae_gpu");
  return run_algos(n[0], n[1], n[2], p, json, engines);
}

int main(int argc, char **argv) {
  if (argc > 1 && (strcmp(argv[1], "--algos") == 0 || strcmp(argv[1], "--engines") == 0))
    return algos_main(argc, argv);
  sp_test_vae_cli a;
  const int rc = sp_test_vae_cli_parse(argc, argv, 0, usage, &a);
  if (rc >= 0) return rc;
  int which = -1; /* --precision all, or not given */
  wan_vae_gpu_precision p;
  if (a.precision && strcmp(a.precision, "all") != 0) {
    if (wan_vae_gpu_precision_parse(a.precision, &p) != SP_OK) {
      fputs(usage, stderr);
      return 2;
    }
    which = (int)p;
  }
  if (a.bench && (a.h < 1 || a.w < 1 || a.n < 1 || a.reps < 1)) {
    fputs(usage, stderr);
    return 2;
  }
  if (sp_test_no_cuda("test_vae_gpu")) return 77;
  sp_test_begin("test_vae_gpu");
  if (a.bench) return run_bench(a.h, a.w, a.n, a.reps, which);
  printf("# relative L2 of the GPU video against the CPU decoder; calls: the callback's "
         "(first frame, count) sequence; rerun: bit-identical second decode\n");
  const int n = a.small ? 1 : (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < n; i++) run_case(&cases[i]);
  return sp_test_end();
}
