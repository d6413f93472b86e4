/* The parts every Wan VAE's tests share (the Wan 2.1 decoder and encoder,
 * the Wan 2.2 parts; CPU and CUDA): random weights from one filler, scaled
 * as tests/ref/wan_vae_ref.py's and wan_vae22_ref.py's random_weights, so
 * that every VAE test draws the same weights from the same seed; the
 * narrow configs; the drivers' table checks and inputs; the CUDA coders'
 * output sink and command line; the device layouts' checks. */
#ifndef SP_TEST_VAE_H
#define SP_TEST_VAE_H

#include <stddef.h>
#include <stdint.h>

#include "net_schema.h"
#include "vae_layout.h"
#include "wan_vae.h"
#include "wan_vae_gpu.h"

/* Fills each tensor of table t at packed + its offset from the test
 * generator (sp_test.h): gammas U[0.5, 1.5), biases U[-0.2, 0.2), the rest
 * U[-a, a) with a = 1/sqrt(fan_in), the head conv 2a wide so that some
 * outputs reach the clamp. round_convs (SP_TEST_VAE_*) rounds every conv
 * weight but conv2's and conv1's: to bf16, as the CUDA decoder and encoder
 * store them in bf16, or to TF32 (nearest or truncated), as their tf32
 * mode multiplies them. Leaves the padding between tensors untouched.
 * Takes any Wan VAE's table (wan_vae_table.h). */
enum {
  SP_TEST_VAE_FP32 = 0,
  SP_TEST_VAE_BF16 = 1,
  SP_TEST_VAE_TF32_NEAREST = 2,
  SP_TEST_VAE_TF32_TRUNCATE = 3
};
void sp_test_vae_fill_weights(const wan_vae_table *t, float *packed, int round_convs);
/* A packed buffer of t->packed_floats zeros (sp_test_malloc), filled by
 * sp_test_vae_fill_weights from the generator's current state; the caller
 * frees it. */
float *sp_test_vae_new_weights(const wan_vae_table *t, int round_convs);

/* The narrow Wan 2.1 VAEs of the tests: the published config (the encoder
 * with it when encoder is 1) at width dim with n_mult levels (dim_mult
 * 1, 2, 4, 4 for four, else 1, 2, 2), num_res residual blocks a level and
 * temporal[i] the config's temporal_up[i] (0 where i + 1 >= n_mult). */
void sp_test_vae_config_narrow(wan_vae_config *c, int encoder, int64_t dim, int n_mult,
                               int64_t num_res, const int temporal[3]);

/* The table checks of every VAE's driver test: each tensor of want (n of
 * them) in t with its shape; t packed at WAN_VAE_ALIGN_FLOATS in order,
 * without overlaps or a key twice, within packed_floats. what names the
 * table in the failures. */
typedef struct sp_test_vae_want {
  const char *name;
  int ndim;
  int64_t shape[5];
} sp_test_vae_want;
void sp_test_vae_check_shapes(const wan_vae_table *t, const sp_test_vae_want *want, int n,
                              const char *what);
void sp_test_vae_check_packing(const wan_vae_table *t, const char *what);
/* A decoded video of n values: all in [-1, 1], more than a quarter inside
 * (-1, 1) and some at the clamp (the weights make some outputs reach it).
 * Returns how many are at the clamp. */
int64_t sp_test_vae_check_clamped(const float *v, int64_t n, const char *what);

/* The CUDA coders' tests (tests/gpu): a whole output ((3, T, H W) video or
 * (c, T, h w) latents) assembled from a coder's chunks, with the calls
 * seen; sp_test_vae_sink_put is its wan_vae_frames_fn (user the sink).
 * Calls past SP_TEST_VAE_MAX_CALLS are counted, not recorded; a chunk
 * outside [0, T) is recorded but not copied. sp_test_vae_sink_new: one
 * with its ch * T * ohw floats (sp_test_alloc, guarded; free(s.video)). */
#define SP_TEST_VAE_MAX_CALLS 64
typedef struct sp_test_vae_sink {
  float *video; /* (ch, T, ohw) */
  int64_t ch, T, ohw;
  int calls;
  int64_t t0[SP_TEST_VAE_MAX_CALLS], n[SP_TEST_VAE_MAX_CALLS];
} sp_test_vae_sink;
sp_test_vae_sink sp_test_vae_sink_new(int64_t ch, int64_t T, int64_t ohw);
int sp_test_vae_sink_put(void *user, const float *frames, int64_t t0, int64_t n);
/* 1 when a saw the same calls (first frame and count each) as ref. */
int sp_test_vae_sink_same_calls(const sp_test_vae_sink *a, const sp_test_vae_sink *ref);

/* The command line of the CUDA coders' tests (tests/gpu/test_vae*_gpu.c):
 * --small, --bench H W N, --reps N (default 3), --precision P and, when
 * parts is 1, --part P (P kept as given, NULL when absent; each test
 * reads its own words). Returns -1 to run, else the exit status after
 * printing usage (the test's text): 0 for -h or --help (on stdout), 2
 * for anything else (on stderr). */
typedef struct sp_test_vae_cli {
  int small, bench, reps;
  int64_t h, w, n;
  const char *precision, *part;
} sp_test_vae_cli;
int sp_test_vae_cli_parse(int argc, char **argv, int parts, const char *usage,
                          sp_test_vae_cli *c);
/* "name":ms,... of the Wan 2.1 CUDA coders' per-op profile (ms: one value
 * per wan_vae_gpu_op) into buf, for the benches' JSON lines. */
void sp_test_vae_ops_json(const double *ms, char *buf, size_t size);

/* The CUDA coders' device layouts (tests/vae/test_vae*_gpu_layout.c), on
 * the CPU: the buffers of l 256-byte aligned, in order, not overlapping,
 * total = the end of the last; every role present; each cache there with
 * its frames x positions x channels of e bytes. */
void sp_test_vae_check_layout(const plan_vae_layout *l, int e, const char *what);
/* bytes(c, h, w, p) > 0 and not falling as h or w grows, both from least
 * to least + 39 in steps of 3 (bytes: a coder's device bytes at that
 * size, e.g. wan_vae_gpu_bytes). */
typedef int64_t (*sp_test_vae_bytes_fn)(const wan_vae_config *c, int64_t h, int64_t w,
                                        wan_vae_gpu_precision p);
void sp_test_vae_check_monotone(const wan_vae_config *c, wan_vae_gpu_precision p, int64_t least,
                                sp_test_vae_bytes_fn bytes);
/* The device form of table t's weights in precision p: between the
 * parameter bytes and every parameter in fp32 plus the alignment of each
 * tensor and pad bytes (the coder's padding of a conv); each weight
 * aligned and before the next. */
void sp_test_vae_check_weight_form(const wan_vae_table *t, wan_vae_gpu_precision p, uint64_t pad,
                                   const char *what);

/* The parity drivers' inputs (tests/vae, tests/vae22: IN.h5 written by
 * their Python side). The config from the root attributes of path, one
 * int64 attribute per attribute of schema s (an array's length from its
 * count attribute; an optional one, when absent, its default) into config
 * (s->config_size bytes, zeroed first); and each tensor of table t from
 * the dataset weights/<key> of path into packed + its offset, shapes
 * checked, then t bound to packed. Each 0, or -1 with a line on stderr. */
int sp_test_vae_read_config(const char *path, const net_schema *s, void *config);
int sp_test_vae_read_weights(const char *path, const wan_vae_table *t, float *packed);

/* The CUDA decoder's tf32 mode against the CPU decoder in fp32, relative
 * L2 of a video: tests/vae/test_vae_tf32_emul.c measures the CPU emulation
 * of that mode (conv inputs, caches, attention operands and conv weights
 * rounded to TF32, both roundings) and checks it stays within half of
 * this bound; tests/gpu/test_vae_gpu.c holds the GPU to it. The value and
 * what it rests on: that test's head comment. */
#define SP_TEST_VAE_TOL_TF32 1e-2

#endif
