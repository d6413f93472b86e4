/* The CPU VAE encoder (ranks/nets/wan_vae/wan_vae_enc.h), two ways.
 *
 * Without arguments (ctest): the encoder's tensor table of the published
 * config (86 tensors and 53,596,928 parameters, as tests/ref/
 * wan_vae_enc_ref.py derives them from the published Encoder3d; sample
 * keys and shapes from I2V.md's table; aligned offsets; every typed field
 * bound), the size rules and refusals, and an encode of random weights at
 * a small width: the same bits twice and for 1, 2 and 3 threads, frame 0
 * encoded alone is latent frame 0 of the video bit for bit, and a change
 * of the video after frame 4j leaves latent frames 0..j unchanged
 * (causality); the CUDA encoder's bf16 stores and its tf32 mode emulated
 * on the CPU against fp32 (the errors its GPU tests' tolerances cover).
 *
 * As the C side of tests/vae/test_vae_enc_parity.sh:
 *   test_vae_enc_driver encode IN.h5 OUT.h5
 * IN.h5: root attributes dim, z_dim, n_mult, dim_mult, num_res_blocks,
 * temporal_up (int64, the decoder's order); dataset video (3, T, H, W)
 * float32; one float32 dataset per encoder tensor, /weights/<official
 * key>. OUT.h5: dataset latents. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5_util.h"
#include "kern_dtype.h"
#include "log.h"
#include "sp_test.h"
#include "sp_test_vae.h"
#include "tensor_io.h"
#include "wan_vae_enc.h"
#include "wan_vae_gpu_layout.h"
#include "wan_vae_schema.h"

/* ---------------------------------------------------------------- parity driver */

static int encode_to(const wan_vae_config *c, const wan_vae_enc_weights *w, const char *in,
                     const char *out) {
  rank_tensor v;
  char err[200];
  if (rank_tensor_read(in, "video", 4, &v) != SP_OK) return 1;
  const int64_t T = v.dims[1], H = v.dims[2], W = v.dims[3];
  if (v.dims[0] != 3 || wan_vae_enc_size_check(c, T, H, W, err, sizeof err) != 0) {
    fprintf(stderr, "%s: video (%lld, %lld, %lld, %lld): %s\n", in, (long long)v.dims[0],
            (long long)T, (long long)H, (long long)W, v.dims[0] != 3 ? "not 3 channels" : err);
    return 1;
  }
  wan_vae_encoder *e;
  if (wan_vae_encoder_create(c, H, W, &e) != SP_OK) return 1;
  int64_t dims[4] = {c->z_dim, wan_vae_enc_latent_frames(c, T), e->h, e->w};
  float *lat = malloc((size_t)(dims[0] * dims[1] * dims[2] * dims[3]) * sizeof *lat);
  if (!lat) return 1;
  wan_vae_encode(e, w, v.data, T, lat);
  rank_outfile *o;
  int rc = rank_outfile_open(out, &o) != SP_OK;
  if (!rc && rank_outfile_put(o, "latents", 4, dims, lat) != SP_OK) {
    rank_outfile_abort(o);
    rc = 1;
  }
  if (!rc) rc = rank_outfile_commit(o) != SP_OK;
  free(lat);
  wan_vae_encoder_free(e);
  rank_tensor_free(&v);
  return rc;
}

static int run_encode(const char *in, const char *out) {
  rank_h5_silence();
  wan_vae_config c;
  char err[200];
  if (sp_test_vae_read_config(in, &wan_vae_schema, &c) != 0) return 1;
  c.encoder = 1;
  if (wan_vae_config_check(&c, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", in, err);
    return 1;
  }
  static wan_vae_enc_weights w;
  static wan_vae_table table;
  wan_vae_enc_table_make(&c, &w, &table);
  float *packed = calloc((size_t)table.packed_floats, sizeof *packed);
  if (!packed || sp_test_vae_read_weights(in, &table, packed) != 0) return 1;
  int rc = encode_to(&c, &w, in, out);
  free(packed);
  return rc;
}

/* ---------------------------------------------------------------- self-contained checks */

static int unbound_fields(const wan_vae_enc_weights *w) {
  int unbound = !w->conv1_w || !w->conv1_b || !w->mid_attn.qkv_w || !w->mid0.conv1_w ||
                !w->mid2.conv2_w || !w->head_gamma || !w->head_w || !w->quant_w || !w->quant_b;
  for (int i = 0; i < w->n_levels; i++) {
    const wan_vae_enc_level *l = &w->level[i];
    for (int r = 0; r < l->n_res; r++) {
      const wan_vae_resblock *rb = &l->res[r];
      unbound |= !rb->norm1_gamma || !rb->conv1_w || !rb->conv1_b || !rb->norm2_gamma ||
                 !rb->conv2_w || !rb->conv2_b || ((rb->in_dim != rb->out_dim) && !rb->shortcut_w);
    }
    if (l->has_down)
      unbound |= !l->down.conv_w || !l->down.conv_b || (l->down.temporal && !l->down.time_w);
  }
  return unbound;
}

static void check_published_table(void) {
  wan_vae_config c;
  wan_vae_config_published(&c);
  c.encoder = 1;
  char err[200];
  CHECK(wan_vae_config_check(&c, err, sizeof err) == 0, "published config refused: %s", err);
  static wan_vae_enc_weights w;
  static wan_vae_table t;
  wan_vae_enc_table_make(&c, &w, &t);
  CHECK(t.count == 86, "published encoder table: %d tensors, expected 86", t.count);
  CHECK(t.params == 53596928, "published encoder table: %lld parameters, expected 53596928",
        (long long)t.params);
  static const sp_test_vae_want want[] = {
      {"encoder.conv1.weight", 5, {96, 3, 3, 3, 3}},
      {"encoder.downsamples.0.residual.0.gamma", 4, {96, 1, 1, 1}},
      {"encoder.downsamples.2.resample.1.weight", 4, {96, 96, 3, 3}},
      {"encoder.downsamples.3.shortcut.weight", 5, {192, 96, 1, 1, 1}},
      {"encoder.downsamples.5.resample.1.weight", 4, {192, 192, 3, 3}},
      {"encoder.downsamples.5.time_conv.weight", 5, {192, 192, 3, 1, 1}},
      {"encoder.downsamples.6.shortcut.weight", 5, {384, 192, 1, 1, 1}},
      {"encoder.downsamples.8.time_conv.bias", 1, {384}},
      {"encoder.downsamples.10.residual.6.weight", 5, {384, 384, 3, 3, 3}},
      {"encoder.middle.1.to_qkv.weight", 4, {1152, 384, 1, 1}},
      {"encoder.middle.2.residual.3.gamma", 4, {384, 1, 1, 1}},
      {"encoder.head.0.gamma", 4, {384, 1, 1, 1}},
      {"encoder.head.2.weight", 5, {32, 384, 3, 3, 3}},
      {"conv1.weight", 5, {32, 32, 1, 1, 1}},
      {"conv1.bias", 1, {32}},
  };
  sp_test_vae_check_shapes(&t, want, (int)(sizeof want / sizeof want[0]),
                           "published encoder table");
  CHECK(wan_vae_table_find(&t, "encoder.downsamples.2.time_conv.weight") < 0 &&
            wan_vae_table_find(&t, "encoder.downsamples.0.shortcut.weight") < 0 &&
            wan_vae_table_find(&t, "encoder.downsamples.11.residual.0.gamma") < 0,
        "published encoder table: a tensor the published encoder does not have");
  sp_test_vae_check_packing(&t, "encoder table");
  static float fake;
  wan_vae_table_bind(&t, &fake);
  CHECK(!unbound_fields(&w), "published encoder table: a typed field left unbound");
  CHECK(wan_vae_enc_time_factor(&c) == 4 && wan_vae_enc_latent_frames(&c, 81) == 21 &&
            wan_vae_enc_latent_side(&c, 480) == 60 && wan_vae_enc_latent_side(&c, 17) == 2,
        "published: 81 frames -> 21 latent frames, 480 -> 60, 17 -> 2");
  const int64_t gib = wan_vae_encoder_floats(&c, 480, 832) * 4 >> 30;
  printf("published encoder table: %d tensors, %lld parameters; encoder state at 480x832: "
         "%lld GiB\n", t.count, (long long)t.params, (long long)gib);
}

static void check_refusals(void) {
  wan_vae_config c;
  char err[200];
  wan_vae_config_published(&c);
  c.encoder = 1;
  CHECK(wan_vae_enc_size_check(&c, 5, 8, 8, err, sizeof err) == 0, "5 frames of 8x8 refused");
  CHECK(wan_vae_enc_size_check(&c, 2, 16, 16, err, sizeof err) != 0, "2 frames accepted");
  CHECK(wan_vae_enc_size_check(&c, 7, 16, 16, err, sizeof err) != 0, "7 frames accepted");
  CHECK(wan_vae_enc_size_check(&c, 1, 7, 16, err, sizeof err) != 0, "7 rows accepted");
  CHECK(wan_vae_enc_size_check(&c, 1, 16, 9000, err, sizeof err) != 0, "9000 columns accepted");
  c.num_res_blocks = 0;
  CHECK(wan_vae_config_check(&c, err, sizeof err) != 0, "an encoder of 0 residual blocks accepted");
  c.encoder = 0;
  CHECK(wan_vae_config_check(&c, err, sizeof err) == 0, "a decoder of 0 residual blocks refused");
  wan_vae_config_published(&c);
  c.encoder = 1;
  c.temporal_up[2] = 1;
  CHECK(wan_vae_config_check(&c, err, sizeof err) != 0, "3 temporal downsamples accepted");
  c.encoder = 2;
  CHECK(wan_vae_config_check(&c, err, sizeof err) != 0, "encoder = 2 accepted");
  wan_vae_config_published(&c);
  c.encoder = 1;
  wan_vae_encoder *e;
  int level = sp_log_level();
  sp_log_set_level(-1); /* the refusals below log, as they should */
  CHECK(wan_vae_encoder_create(&c, 4, 16, &e) == SP_ERR_INPUT, "video height 4 accepted");
  sp_log_set_level(level);
}

static int same_frames(const float *a, int64_t Fa, const float *b, int64_t Fb, int64_t z,
                       int64_t frames, int64_t hw) {
  for (int64_t ch = 0; ch < z; ch++)
    if (memcmp(a + ch * Fa * hw, b + ch * Fb * hw, (size_t)(frames * hw) * sizeof *a) != 0)
      return 0;
  return 1;
}

/* The published encoder at width dim into c, its table t and random fp32
 * weights (sp_test_vae.h), bound in w; returns the packed weights. */
static float *published_encoder(int64_t dim, wan_vae_config *c, wan_vae_enc_weights *w,
                                wan_vae_table *t) {
  wan_vae_config_published(c);
  c->dim = dim;
  c->encoder = 1;
  wan_vae_enc_table_make(c, w, t);
  float *packed = sp_test_vae_new_weights(t, SP_TEST_VAE_FP32);
  wan_vae_table_bind(t, packed);
  return packed;
}

static void check_encode(void) {
  wan_vae_config c;
  static wan_vae_enc_weights w;
  static wan_vae_table t;
  float *packed = published_encoder(8, &c, &w, &t);
  const int64_t T = 9, H = 17, W = 22, F = wan_vae_enc_latent_frames(&c, T);
  wan_vae_encoder *e;
  if (wan_vae_encoder_create(&c, H, W, &e) != SP_OK) {
    CHECK(0, "encoder_create failed");
    return;
  }
  const int64_t hw = e->h * e->w, n_in = 3 * T * H * W, n_out = 16 * F * hw;
  float *v = sp_test_alloc(n_in), *l1 = sp_test_alloc(n_out), *l2 = sp_test_alloc(n_out);
  sp_rand_fill(v, n_in, -1.0, 1.0);
  wan_vae_encode(e, &w, v, T, l1);
  CHECK(sp_test_guard_ok(l1, n_out), "encode wrote past the latents");
  double ss = 0;
  int finite = 1;
  for (int64_t i = 0; i < n_out; i++) {
    finite &= isfinite(l1[i]) != 0;
    ss += (double)l1[i] * l1[i];
  }
  CHECK(finite && ss > 0, "encode: latents not finite or all zero");
  wan_vae_encode(e, &w, v, T, l2);
  CHECK(memcmp(l1, l2, (size_t)n_out * sizeof *l1) == 0, "encode twice: the bits differ");
  const int nthreads = omp_get_max_threads();
  for (int th = 1; th <= 3; th++) {
    omp_set_num_threads(th);
    wan_vae_encode(e, &w, v, T, l2);
    CHECK(memcmp(l1, l2, (size_t)n_out * sizeof *l1) == 0, "encode: %d threads differ", th);
  }
  omp_set_num_threads(nthreads);
  /* Frame 0 alone: latent frame 0 of the whole encode. */
  float *v0 = sp_test_alloc(3 * H * W);
  for (int64_t ch = 0; ch < 3; ch++)
    memcpy(v0 + ch * H * W, v + ch * T * H * W, (size_t)(H * W) * sizeof *v0);
  wan_vae_encode(e, &w, v0, 1, l2);
  CHECK(same_frames(l1, F, l2, 1, 16, 1, hw), "encode: latent frame 0 depends on later frames");
  /* Frames after 4 changed: latent frames 0 and 1 keep their bits, 2 does not. */
  for (int64_t ch = 0; ch < 3; ch++)
    for (int64_t i = 5 * H * W; i < T * H * W; i++) v[ch * T * H * W + i] *= -0.5f;
  wan_vae_encode(e, &w, v, T, l2);
  CHECK(same_frames(l1, F, l2, F, 16, 2, hw), "encode: latent frames 0, 1 depend on frames > 4");
  CHECK(!same_frames(l1 + 2 * hw, F, l2 + 2 * hw, F, 16, 1, hw),
        "encode: latent frame 2 does not depend on frames 5..8");
  printf("encode dim 8, T=%lld %lldx%lld -> 16x%lldx%lldx%lld: bit-identical for 1-3 threads "
         "and reruns, causal\n", (long long)T, (long long)H, (long long)W, (long long)F,
         (long long)e->h, (long long)e->w);
  wan_vae_encoder_free(e);
  free(packed), free(v), free(v0), free(l1), free(l2);
}

/* The CUDA encoder's bf16 arithmetic emulated on the CPU
 * (wan_vae_encoder_round: every store the CUDA encoder keeps in bf16,
 * WAN_VAE_ROUND_CUDA_BF16, and its conv weights rounded to bf16 as it
 * holds them) against the fp32 encode: the error tests/gpu/
 * test_vae_enc_gpu.c's bf16 tolerance (1e-2) has to cover. */
static void check_bf16_emulation(int64_t dim, int64_t T, int64_t H, int64_t W) {
  wan_vae_config c;
  static wan_vae_enc_weights w;
  static wan_vae_table t;
  float *packed = published_encoder(dim, &c, &w, &t);
  wan_vae_encoder *e;
  if (wan_vae_encoder_create(&c, H, W, &e) != SP_OK) {
    CHECK(0, "encoder_create failed");
    return;
  }
  const int64_t F = wan_vae_enc_latent_frames(&c, T), n_in = 3 * T * H * W;
  const int64_t n_out = 16 * F * e->h * e->w;
  float *v = sp_test_alloc(n_in), *l32 = sp_test_alloc(n_out), *l16 = sp_test_alloc(n_out);
  sp_rand_fill(v, n_in, -1.0, 1.0);
  wan_vae_encode(e, &w, v, T, l32);
  for (int i = 0; i < t.count; i++) /* the device form of the weights */
    if (wan_vae_gpu_is_conv(&t.t[i]))
      for (int64_t k = 0; k < t.t[i].numel; k++)
        packed[t.t[i].offset + k] = kern_bf16_to_f32(kern_f32_to_bf16(packed[t.t[i].offset + k]));
  wan_vae_encoder_round(e, WAN_VAE_ROUND_CUDA_BF16);
  wan_vae_encode(e, &w, v, T, l16);
  const double err = sp_test_rel_l2_f32(l16, l32, n_out);
  CHECK(err <= 5e-3, "bf16 emulation dim %lld T %lld %lldx%lld: rel L2 %.2e", (long long)dim,
        (long long)T, (long long)H, (long long)W, err);
  printf("bf16 emulated (the CUDA encoder's stores and weights) against fp32, dim %lld, "
         "T=%lld %lldx%lld: rel L2 %.2e\n", (long long)dim, (long long)T, (long long)H,
         (long long)W, err);
  wan_vae_encoder_free(e);
  free(packed), free(v), free(l32), free(l16);
}

/* The CUDA encoder's tf32 mode emulated on the CPU (wan_vae_encoder_tf32:
 * every cuDNN convolution's input, cache and the attention's q, k, v
 * rounded to TF32, the conv weights too; mode 1 to nearest, 2 by
 * truncation, as test_vae_tf32_emul.c runs the decoder's) against the
 * fp32 encode: at most half of SP_TEST_VAE_TOL_TF32, the bound
 * tests/gpu/test_gpu_encode.sh holds the GPU's tf32 latents to (the
 * reasoning is test_vae_tf32_emul.c's: the GPU also rounds the attention's
 * probabilities and sums in another order), and above 1e-5 (the rounding
 * happened); mode OFF with the fp32 weights gives the fp32 bits again. */
static void check_tf32_emulation(int64_t dim, int64_t T, int64_t H, int64_t W, int mode) {
  wan_vae_config c;
  static wan_vae_enc_weights w;
  static wan_vae_table t;
  float *packed = published_encoder(dim, &c, &w, &t);
  float *fp32 = calloc((size_t)t.packed_floats, sizeof *fp32);
  memcpy(fp32, packed, (size_t)t.packed_floats * sizeof *fp32);
  wan_vae_encoder *e;
  if (wan_vae_encoder_create(&c, H, W, &e) != SP_OK) {
    CHECK(0, "encoder_create failed");
    free(packed), free(fp32);
    return;
  }
  const int64_t F = wan_vae_enc_latent_frames(&c, T), n_in = 3 * T * H * W;
  const int64_t n_out = 16 * F * e->h * e->w;
  float *v = sp_test_alloc(n_in), *l32 = sp_test_alloc(n_out), *lt = sp_test_alloc(n_out);
  sp_rand_fill(v, n_in, -1.0, 1.0);
  wan_vae_encode(e, &w, v, T, l32);
  for (int i = 0; i < t.count; i++) /* the weights' TF32 products */
    if (wan_vae_gpu_is_conv(&t.t[i]))
      for (int64_t k = 0; k < t.t[i].numel; k++)
        packed[t.t[i].offset + k] =
            kern_f32_round_tf32(packed[t.t[i].offset + k], mode == WAN_VAE_TF32_TRUNCATE);
  wan_vae_encoder_tf32(e, mode);
  wan_vae_encode(e, &w, v, T, lt);
  const double err = sp_test_rel_l2_f32(lt, l32, n_out);
  const char *how = mode == WAN_VAE_TF32_TRUNCATE ? "truncated" : "to nearest";
  CHECK(err <= SP_TEST_VAE_TOL_TF32 / 2 && err > 1e-5,
        "tf32 emulation (%s) dim %lld T %lld %lldx%lld: rel L2 %.2e", how, (long long)dim,
        (long long)T, (long long)H, (long long)W, err);
  printf("tf32 emulated (%s: the CUDA encoder's conv and attention inputs and weights) "
         "against fp32, dim %lld, T=%lld %lldx%lld: rel L2 %.2e\n", how, (long long)dim,
         (long long)T, (long long)H, (long long)W, err);
  memcpy(packed, fp32, (size_t)t.packed_floats * sizeof *fp32);
  wan_vae_encoder_tf32(e, WAN_VAE_TF32_OFF);
  wan_vae_encode(e, &w, v, T, lt);
  CHECK(memcmp(lt, l32, (size_t)n_out * sizeof *lt) == 0,
        "tf32 emulation off: not the fp32 encode's bits");
  wan_vae_encoder_free(e);
  free(packed), free(fp32), free(v), free(l32), free(lt);
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "encode") == 0) return run_encode(argv[2], argv[3]);
  if (argc != 1) {
    fprintf(stderr, "usage: %s [encode IN.h5 OUT.h5]\n", argv[0]);
    return 2;
  }
  sp_test_begin("test_vae_enc_driver");
  check_published_table();
  check_refusals();
  check_encode();
  check_bf16_emulation(8, 5, 33, 47);
  check_bf16_emulation(32, 5, 24, 40);
  for (int mode = WAN_VAE_TF32_NEAREST; mode <= WAN_VAE_TF32_TRUNCATE; mode++) {
    check_tf32_emulation(8, 5, 33, 47, mode);
    check_tf32_emulation(32, 5, 24, 40, mode);
  }
  return sp_test_end();
}
