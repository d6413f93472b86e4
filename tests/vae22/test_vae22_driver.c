/* The CPU Wan 2.2 VAE (ranks/nets/wan_vae22/wan_vae22.h), two ways.
 *
 * Without arguments (ctest): the tensor tables of the published config
 * (the counts and parameters I2V.md gives, sample keys and shapes, aligned
 * non-overlapping offsets, every typed field bound), bad configs and sizes
 * refused, and at the tiny widths a decode and an encode of random weights
 * that give the same bits twice (caches reset) and for 1, 2 and 3 threads;
 * the decoded video stays in [-1, 1] and reaches the clamp; latent frame 0
 * alone decodes to the video's frame 0 and video frame 0 alone encodes to
 * latent frame 0 (both causal), bit for bit.
 *
 * As the C side of tests/vae22/test_vae22_parity.sh:
 *   test_vae22_driver decode IN.h5 OUT.h5   dataset latents -> video
 *   test_vae22_driver encode IN.h5 OUT.h5   dataset video -> latents
 *   test_vae22_driver stats                 the 48 means and stds, one pair a line
 *   test_vae22_driver encode-file VAE IN.h5 OUT.h5
 *                                           dataset video -> latents through the
 *                                           driver's API (wan_vae22_run.h) with a
 *                                           VAE file or synth: spec, on the CPU
 * IN.h5: root attributes dim, dec_dim, z_dim, n_mult, dim_mult,
 * num_res_blocks, temporal_down (int64); the input dataset float32; one
 * float32 dataset per tensor of the part, /weights/<official key>. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hdf5.h>

#include "h5_util.h"
#include "log.h"
#include "sp_test.h"
#include "sp_test_vae.h"
#include "tensor_io.h"
#include "wan_vae22.h"
#include "wan_vae22_run.h"
#include "wan_vae22_schema.h"

/* ---------------------------------------------------------------- parity driver */

/* The part's weights from /weights/<key> of in, bound into *packed. */
static int read_weights(const char *in, const wan_vae22_config *c, wan_vae22_part part,
                        wan_vae22_weights *w, float **packed) {
  static wan_vae_table table;
  wan_vae22_table_make(c, part, w, &table);
  *packed = calloc((size_t)table.packed_floats, sizeof **packed);
  return *packed ? sp_test_vae_read_weights(in, &table, *packed) : -1;
}

static int write_out(const char *out, const char *name, const int64_t *dims, const float *v) {
  rank_outfile *o;
  if (rank_outfile_open(out, &o) != SP_OK) return 1;
  if (rank_outfile_put(o, name, 4, dims, v) != SP_OK) {
    rank_outfile_abort(o);
    return 1;
  }
  return rank_outfile_commit(o) != SP_OK;
}

static int run_part(const char *mode, const char *in, const char *out) {
  rank_h5_silence();
  const int enc = strcmp(mode, "encode") == 0;
  wan_vae22_config c;
  char err[200];
  if (sp_test_vae_read_config(in, &wan_vae22_schema, &c) != 0) return 1;
  if (wan_vae22_config_check(&c, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", in, err);
    return 1;
  }
  static wan_vae22_weights w;
  float *packed = NULL;
  rank_tensor x;
  wan_vae22_state *s = NULL;
  if (read_weights(in, &c, enc ? WAN_VAE22_ENCODER : WAN_VAE22_DECODER, &w, &packed) != 0 ||
      rank_tensor_read(in, enc ? "video" : "latents", 4, &x) != SP_OK)
    return 1;
  const int64_t sf = wan_vae22_space_factor(&c);
  int64_t dims[4];
  if (enc) {
    dims[0] = c.z_dim, dims[1] = wan_vae22_latent_frames(&c, x.dims[1]);
    dims[2] = x.dims[2] / sf, dims[3] = x.dims[3] / sf;
    if (wan_vae22_encoder_create(&c, x.dims[2], x.dims[3], &s) != SP_OK) return 1;
  } else {
    dims[0] = 3, dims[1] = wan_vae22_out_frames(&c, x.dims[1]);
    dims[2] = x.dims[2] * sf, dims[3] = x.dims[3] * sf;
    if (wan_vae22_decoder_create(&c, x.dims[2], x.dims[3], &s) != SP_OK) return 1;
  }
  float *y = malloc((size_t)(dims[0] * dims[1] * dims[2] * dims[3]) * sizeof *y);
  if (!y) return 1;
  int rc = 0;
  if (enc)
    rc = wan_vae22_encode(s, &w.enc, x.data, x.dims[1], y) != SP_OK;
  else
    wan_vae22_decode(s, &w.dec, x.data, x.dims[1], y);
  if (rc == 0) rc = write_out(out, enc ? "latents" : "video", dims, y);
  free(y);
  free(packed);
  wan_vae22_state_free(s);
  rank_tensor_free(&x);
  return rc;
}

/* The encode the command line drives: wan_vae22_encode_run on a model. */
static int run_encode_file(const char *vae, const char *in, const char *out) {
  rank_h5_silence();
  wan_vae22_model *m = NULL;
  rank_tensor x;
  int64_t ldims[4];
  if (wan_vae22_open(vae, 1, &m) != SP_OK) return 1;
  if (rank_tensor_read(in, "video", 4, &x) != SP_OK ||
      wan_vae22_check_video(m, in, x.ndim, x.dims, ldims) != SP_OK)
    return 2;
  float *z = malloc((size_t)(ldims[0] * ldims[1] * ldims[2] * ldims[3]) * sizeof *z);
  const wan_vae22_encode_opts o = {RANK_DEVICE_CPU, WAN_VAE_GPU_FP32, 0};
  wan_vae22_encode_stats st;
  int rc = !z || wan_vae22_encode_run(&o, m, x.data, x.dims, z, &st) != SP_OK;
  if (rc == 0) rc = write_out(out, "latents", st.dims, z);
  free(z);
  rank_tensor_free(&x);
  wan_vae22_close(m);
  return rc;
}

/* ---------------------------------------------------------------- self-contained checks */

static void check_table(wan_vae22_part part, int count, int64_t params,
                        const sp_test_vae_want *want, int nwant) {
  wan_vae22_config c;
  wan_vae22_config_published(&c);
  static wan_vae22_weights w;
  static wan_vae_table t;
  wan_vae22_table_make(&c, part, &w, &t);
  const char *pn = wan_vae22_part_name(part);
  char what[48];
  snprintf(what, sizeof what, "published %s", pn);
  CHECK(t.count == count && t.params == params, "published %s: %d tensors, %lld parameters; "
        "I2V.md: %d, %lld", pn, t.count, (long long)t.params, count, (long long)params);
  sp_test_vae_check_shapes(&t, want, nwant, what);
  snprintf(what, sizeof what, "%s table", pn);
  sp_test_vae_check_packing(&t, what);
  static float fake;
  wan_vae_table_bind(&t, &fake);
  for (int i = 0; i < t.count; i++)
    CHECK(*t.t[i].slot == &fake + t.t[i].offset, "%s table: %s not bound", pn, t.t[i].name);
}

static void check_published(void) {
  wan_vae22_config c;
  char err[200];
  wan_vae22_config_published(&c);
  CHECK(wan_vae22_config_check(&c, err, sizeof err) == 0, "published config refused: %s", err);
  /* I2V.md "The Wan 2.2 VAE": 110 decoder tensors (555,051,580 parameters)
   * and 86 encoder tensors (149,637,088), and its key shapes. */
  static const sp_test_vae_want dec[] = {
      {"conv2.weight", 5, {48, 48, 1, 1, 1}},
      {"decoder.conv1.weight", 5, {1024, 48, 3, 3, 3}},
      {"decoder.middle.1.to_qkv.weight", 4, {3072, 1024, 1, 1}},
      {"decoder.upsamples.0.upsamples.3.time_conv.weight", 5, {2048, 1024, 3, 1, 1}},
      {"decoder.upsamples.0.upsamples.3.resample.1.weight", 4, {1024, 1024, 3, 3}},
      {"decoder.upsamples.2.upsamples.0.shortcut.weight", 5, {512, 1024, 1, 1, 1}},
      {"decoder.upsamples.2.upsamples.3.resample.1.weight", 4, {512, 512, 3, 3}},
      {"decoder.upsamples.3.upsamples.2.residual.6.bias", 1, {256}},
      {"decoder.head.2.weight", 5, {12, 256, 3, 3, 3}},
  };
  static const sp_test_vae_want enc[] = {
      {"encoder.conv1.weight", 5, {160, 12, 3, 3, 3}},
      {"encoder.downsamples.0.downsamples.2.resample.1.weight", 4, {160, 160, 3, 3}},
      {"encoder.downsamples.1.downsamples.0.shortcut.weight", 5, {320, 160, 1, 1, 1}},
      {"encoder.downsamples.1.downsamples.2.time_conv.weight", 5, {320, 320, 3, 1, 1}},
      {"encoder.downsamples.3.downsamples.1.residual.6.weight", 5, {640, 640, 3, 3, 3}},
      {"encoder.middle.1.norm.gamma", 3, {640, 1, 1}},
      {"encoder.head.2.weight", 5, {96, 640, 3, 3, 3}},
      {"conv1.weight", 5, {96, 96, 1, 1, 1}},
  };
  check_table(WAN_VAE22_DECODER, 110, 555051580, dec, (int)(sizeof dec / sizeof dec[0]));
  check_table(WAN_VAE22_ENCODER, 86, 149637088, enc, (int)(sizeof enc / sizeof enc[0]));
  CHECK(wan_vae22_out_frames(&c, 31) == 121 && wan_vae22_latent_frames(&c, 121) == 31 &&
            wan_vae22_space_factor(&c) == 16 && wan_vae22_time_factor(&c) == 4,
        "published: 31 latent frames <-> 121 video frames, 16x in space");
}

static void check_refusals(void) {
  wan_vae22_config c;
  char err[200];
  wan_vae22_state *s;
  wan_vae22_config_published(&c);
  c.z_dim = 16;
  CHECK(wan_vae22_config_check(&c, err, sizeof err) != 0, "z_dim 16 accepted");
  wan_vae22_config_published(&c);
  c.temporal_down[0] = 1;
  CHECK(wan_vae22_config_check(&c, err, sizeof err) != 0, "3 temporal resamples accepted");
  wan_vae22_config_published(&c);
  c.num_res_blocks = 0;
  CHECK(wan_vae22_config_check(&c, err, sizeof err) != 0, "num_res_blocks 0 accepted");
  wan_vae22_config_published(&c);
  c.dim_mult[3] = 3; /* AvgDown3D 640 -> 480 of the last level does not divide */
  CHECK(wan_vae22_config_check(&c, err, sizeof err) != 0, "an uneven shortcut accepted");
  wan_vae22_config_published(&c);
  const int level = sp_log_level();
  sp_log_set_level(-1); /* the refusals below log, as they should */
  CHECK(wan_vae22_decoder_create(&c, 0, 4, &s) == SP_ERR_INPUT, "latent height 0 accepted");
  CHECK(wan_vae22_encoder_create(&c, 24, 32, &s) == SP_ERR_INPUT, "video height 24 accepted");
  CHECK(wan_vae22_encoder_create(&c, 16, 8, &s) == SP_ERR_INPUT, "video width 8 accepted");
  sp_log_set_level(level);
}

/* Random weights of the tiny preset's widths for part p, bound into w. */
static float *tiny_weights(const wan_vae22_config *c, wan_vae22_part p, wan_vae22_weights *w) {
  static wan_vae_table t;
  wan_vae22_table_make(c, p, w, &t);
  float *packed = sp_test_vae_new_weights(&t, SP_TEST_VAE_FP32);
  wan_vae_table_bind(&t, packed);
  return packed;
}

static void tiny_config(wan_vae22_config *c) {
  wan_vae22_config_published(c);
  c->dim = 8;
  c->dec_dim = 8;
}

static void check_decode(void) {
  wan_vae22_config c;
  tiny_config(&c);
  static wan_vae22_weights w;
  float *packed = tiny_weights(&c, WAN_VAE22_DECODER, &w);
  const int64_t F = 3, h = 2, wd = 3, T = wan_vae22_out_frames(&c, F), plane = 256 * h * wd;
  const int64_t n_out = 3 * T * plane, nz = 48 * F * h * wd;
  float *z = sp_test_alloc(nz), *v1 = sp_test_alloc(n_out), *v2 = sp_test_alloc(n_out);
  sp_rand_fill(z, nz, -2.0, 2.0);
  wan_vae22_state *d;
  if (wan_vae22_decoder_create(&c, h, wd, &d) != SP_OK) {
    CHECK(0, "decoder_create failed");
    return;
  }
  wan_vae22_decode(d, &w.dec, z, F, v1);
  CHECK(sp_test_guard_ok(v1, n_out), "decode wrote past the video");
  const int64_t ends = sp_test_vae_check_clamped(v1, n_out, "decode");
  const int nthreads = omp_get_max_threads();
  for (int th = 0; th <= 3; th++) {
    if (th) omp_set_num_threads(th);
    wan_vae22_decode(d, &w.dec, z, F, v2);
    CHECK(memcmp(v1, v2, (size_t)n_out * sizeof *v1) == 0, "decode: %s differs",
          th ? "a thread count" : "a rerun");
  }
  omp_set_num_threads(nthreads);
  /* latent frame 0 alone: video frame 0 (causal) */
  for (int64_t ch = 0; ch < 48; ch++)
    memmove(z + ch * h * wd, z + ch * F * h * wd, (size_t)(h * wd) * sizeof *z);
  wan_vae22_decode(d, &w.dec, z, 1, v2);
  int same = 1;
  for (int64_t ch = 0; ch < 3; ch++)
    same &= memcmp(v1 + ch * T * plane, v2 + ch * plane, (size_t)plane * sizeof *v1) == 0;
  CHECK(same, "decode: frame 0 depends on later latent frames");
  printf("decode tiny, F=%lld %lldx%lld -> 3x%lldx%lldx%lld: %.0f%% clamped, bit-identical "
         "for 1-3 threads and reruns, frame 0 causal; state %.1f MiB\n",
         (long long)F, (long long)h, (long long)wd, (long long)T, (long long)(16 * h),
         (long long)(16 * wd), 100.0 * (double)ends / (double)n_out,
         (double)wan_vae22_state_floats(d) * 4 / (1 << 20));
  wan_vae22_state_free(d);
  free(packed), free(z), free(v1), free(v2);
}

static void check_encode(void) {
  wan_vae22_config c;
  tiny_config(&c);
  static wan_vae22_weights w;
  float *packed = tiny_weights(&c, WAN_VAE22_ENCODER, &w);
  const int64_t T = 9, H = 32, W = 48, F = wan_vae22_latent_frames(&c, T), hw = 2 * 3;
  const int64_t n_in = 3 * T * H * W, nz = 48 * F * hw;
  float *v = sp_test_alloc(n_in), *z1 = sp_test_alloc(nz), *z2 = sp_test_alloc(nz);
  sp_rand_fill(v, n_in, -1.0, 1.0);
  wan_vae22_state *e;
  if (wan_vae22_encoder_create(&c, H, W, &e) != SP_OK) {
    CHECK(0, "encoder_create failed");
    return;
  }
  CHECK(wan_vae22_encode(e, &w.enc, v, T, z1) == SP_OK, "encode failed");
  CHECK(sp_test_guard_ok(z1, nz), "encode wrote past the latents");
  const int nthreads = omp_get_max_threads();
  for (int th = 0; th <= 3; th++) {
    if (th) omp_set_num_threads(th);
    CHECK(wan_vae22_encode(e, &w.enc, v, T, z2) == SP_OK, "encode failed");
    CHECK(memcmp(z1, z2, (size_t)nz * sizeof *z1) == 0, "encode: %s differs",
          th ? "a thread count" : "a rerun");
  }
  omp_set_num_threads(nthreads);
  /* video frame 0 alone: latent frame 0 (causal) */
  for (int64_t ch = 0; ch < 3; ch++)
    memmove(v + ch * H * W, v + ch * T * H * W, (size_t)(H * W) * sizeof *v);
  CHECK(wan_vae22_encode(e, &w.enc, v, 1, z2) == SP_OK, "encode of one frame failed");
  int same = 1;
  for (int64_t ch = 0; ch < 48; ch++)
    same &= memcmp(z1 + ch * F * hw, z2 + ch * hw, (size_t)hw * sizeof *z1) == 0;
  CHECK(same, "encode: latent frame 0 depends on later video frames");
  const int level = sp_log_level();
  sp_log_set_level(-1);
  CHECK(wan_vae22_encode(e, &w.enc, v, 4, z2) == SP_ERR_INPUT, "encode of 4 frames accepted");
  sp_log_set_level(level);
  printf("encode tiny, T=%lld %lldx%lld -> 48x%lldx2x3: bit-identical for 1-3 threads and "
         "reruns, frame 0 causal; state %.1f MiB\n",
         (long long)T, (long long)H, (long long)W, (long long)F,
         (double)wan_vae22_state_floats(e) * 4 / (1 << 20));
  wan_vae22_state_free(e);
  free(packed), free(v), free(z1), free(z2);
}

int main(int argc, char **argv) {
  if (argc == 4 && (strcmp(argv[1], "decode") == 0 || strcmp(argv[1], "encode") == 0))
    return run_part(argv[1], argv[2], argv[3]);
  if (argc == 5 && strcmp(argv[1], "encode-file") == 0)
    return run_encode_file(argv[2], argv[3], argv[4]);
  if (argc == 2 && strcmp(argv[1], "stats") == 0) {
    for (int i = 0; i < WAN_VAE22_Z_DIM; i++)
      printf("%.9g %.9g\n", wan_vae22_latent_mean[i], wan_vae22_latent_std[i]);
    return 0;
  }
  if (argc != 1) {
    fprintf(stderr, "usage: %s [decode|encode IN.h5 OUT.h5 | encode-file VAE IN.h5 OUT.h5 | "
            "stats]\n", argv[0]);
    return 2;
  }
  sp_test_begin("test_vae22_driver");
  check_published();
  check_refusals();
  check_decode();
  check_encode();
  return sp_test_end();
}
