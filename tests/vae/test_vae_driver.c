/* The CPU VAE decoder (ranks/nets/wan_vae/wan_vae.h), two ways.
 *
 * Without arguments (ctest): the tensor table of the published config
 * (count, parameters, sample keys and shapes, aligned non-overlapping
 * offsets, every typed field bound), bad configs and sizes refused, and a
 * decode of random weights at a small width that stays in [-1, 1], gives the
 * same bits twice (caches reset) and for 1, 2 and 3 threads.
 *
 * As the C side of tests/vae/test_vae_parity.sh:
 *   test_vae_driver decode IN.h5 OUT.h5
 * IN.h5: root attributes dim, z_dim, n_mult, dim_mult, num_res_blocks,
 * temporal_up (int64); dataset latents (z_dim, F, h, w) float32; one float32
 * dataset per tensor, /weights/<official key>. OUT.h5: dataset video.
 * (A VAE model file is decoded by `staticpipe decode` itself:
 * tests/vae/vae_convert.py.) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hdf5.h>
#include <omp.h>

#include "h5_util.h"
#include "log.h"
#include "tensor_io.h"
#include "vae_file.h"
#include "sp_test.h"
#include "sp_test_vae.h"
#include "wan_vae.h"
#include "wan_vae_schema.h"

/* ---------------------------------------------------------------- parity driver */

/* Decodes dataset latents of in with bound weights w into dataset video of out. */
static int decode_to(const wan_vae_config *cp, const wan_vae_weights *w, const char *in,
                     const char *out) {
  const wan_vae_config c = *cp;
  rank_tensor z;
  if (rank_tensor_read(in, "latents", 4, &z) != SP_OK) return 1;
  if (z.dims[0] != c.z_dim) {
    fprintf(stderr, "%s: latents have %lld channels\n", in, (long long)z.dims[0]);
    return 1;
  }
  wan_vae_decoder *d;
  if (wan_vae_decoder_create(&c, z.dims[2], z.dims[3], &d) != SP_OK) return 1;
  const int64_t F = z.dims[1], s = wan_vae_out_scale(&c);
  int64_t dims[4] = {3, wan_vae_out_frames(&c, F), s * z.dims[2], s * z.dims[3]};
  float *video = malloc((size_t)(dims[0] * dims[1] * dims[2] * dims[3]) * sizeof *video);
  if (!video) return 1;
  wan_vae_decode(d, w, z.data, F, video);
  rank_outfile *o;
  if (rank_outfile_open(out, &o) != SP_OK) return 1;
  if (rank_outfile_put(o, "video", 4, dims, video) != SP_OK) {
    rank_outfile_abort(o);
    return 1;
  }
  if (rank_outfile_commit(o) != SP_OK) return 1;
  free(video);
  wan_vae_decoder_free(d);
  rank_tensor_free(&z);
  return 0;
}

static int run_decode(const char *in, const char *out) {
  rank_h5_silence();
  wan_vae_config c;
  char err[160];
  if (sp_test_vae_read_config(in, &wan_vae_schema, &c) != 0) return 1;
  if (wan_vae_config_check(&c, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", in, err);
    return 1;
  }
  static wan_vae_weights w;
  static wan_vae_table table;
  wan_vae_table_make(&c, &w, &table);
  float *packed = calloc((size_t)table.packed_floats, sizeof *packed);
  if (!packed || sp_test_vae_read_weights(in, &table, packed) != 0) return 1;
  int rc = decode_to(&c, &w, in, out);
  free(packed);
  return rc;
}

/* ---------------------------------------------------------------- self-contained checks */

static void check_published_table(void) {
  wan_vae_config c;
  wan_vae_config_published(&c);
  char err[160];
  CHECK(wan_vae_config_check(&c, err, sizeof err) == 0, "published config refused: %s", err);
  static wan_vae_weights w;
  static wan_vae_table t;
  wan_vae_table_make(&c, &w, &t);
  /* 108 tensors and 73,295,603 parameters: the count tests/ref/wan_vae_ref.py
   * derives from the published module structure (selftest prints it). */
  CHECK(t.count == 108, "published table: %d tensors, expected 108", t.count);
  CHECK(t.params == 73295603, "published table: %lld parameters, expected 73295603",
        (long long)t.params);
  static const sp_test_vae_want want[] = {
      {"conv2.weight", 5, {16, 16, 1, 1, 1}},
      {"decoder.conv1.weight", 5, {384, 16, 3, 3, 3}},
      {"decoder.middle.1.norm.gamma", 3, {384, 1, 1}},
      {"decoder.middle.1.to_qkv.weight", 4, {1152, 384, 1, 1}},
      {"decoder.middle.2.residual.6.weight", 5, {384, 384, 3, 3, 3}},
      {"decoder.upsamples.3.time_conv.weight", 5, {768, 384, 3, 1, 1}},
      {"decoder.upsamples.3.resample.1.weight", 4, {192, 384, 3, 3}},
      {"decoder.upsamples.4.shortcut.weight", 5, {384, 192, 1, 1, 1}},
      {"decoder.upsamples.7.time_conv.bias", 1, {768}},
      {"decoder.upsamples.8.residual.0.gamma", 4, {192, 1, 1, 1}},
      {"decoder.upsamples.11.resample.1.weight", 4, {96, 192, 3, 3}},
      {"decoder.upsamples.14.residual.6.bias", 1, {96}},
      {"decoder.head.0.gamma", 4, {96, 1, 1, 1}},
      {"decoder.head.2.weight", 5, {3, 96, 3, 3, 3}},
  };
  sp_test_vae_check_shapes(&t, want, (int)(sizeof want / sizeof want[0]), "published table");
  CHECK(wan_vae_table_find(&t, "decoder.upsamples.11.time_conv.weight") < 0 &&
            wan_vae_table_find(&t, "decoder.upsamples.0.shortcut.weight") < 0 &&
            wan_vae_table_find(&t, "decoder.upsamples.15.residual.0.gamma") < 0,
        "published table: a tensor the published decoder does not have");
  sp_test_vae_check_packing(&t, "table");
  static float fake;
  wan_vae_table_bind(&t, &fake);
  /* Every typed field a published decoder uses is now non-NULL. */
  int unbound = !w.conv2_w || !w.conv1_w || !w.mid_attn.qkv_w || !w.head_w || !w.head_gamma;
  for (int i = 0; i < w.n_levels; i++) {
    for (int r = 0; r < w.level[i].n_res; r++) {
      const wan_vae_resblock *rb = &w.level[i].res[r];
      unbound |= !rb->norm1_gamma || !rb->conv1_w || !rb->conv1_b || !rb->norm2_gamma ||
                 !rb->conv2_w || !rb->conv2_b || ((rb->in_dim != rb->out_dim) && !rb->shortcut_w);
    }
    if (w.level[i].has_up)
      unbound |= !w.level[i].up.conv_w || (w.level[i].up.temporal && !w.level[i].up.time_w);
  }
  CHECK(!unbound, "published table: a typed field left unbound");
  CHECK(wan_vae_out_frames(&c, 21) == 81 && wan_vae_out_scale(&c) == 8,
        "published: 21 latent frames -> 81 video frames, 8x spatial");
  int64_t gib = wan_vae_decoder_floats(&c, 60, 104) * 4 >> 30;
  printf("published table: %d tensors, %lld parameters; decoder state at 480x832: %lld GiB\n",
         t.count, (long long)t.params, (long long)gib);
}

static void check_refusals(void) {
  wan_vae_config c;
  char err[160];
  wan_vae_decoder *d;
  wan_vae_config_published(&c);
  c.z_dim = 8;
  CHECK(wan_vae_config_check(&c, err, sizeof err) != 0, "z_dim 8 accepted");
  wan_vae_config_published(&c);
  c.n_mult = 5;
  CHECK(wan_vae_config_check(&c, err, sizeof err) != 0, "5 levels accepted");
  wan_vae_config_published(&c);
  c.num_res_blocks = 9;
  CHECK(wan_vae_config_check(&c, err, sizeof err) != 0, "num_res_blocks 9 accepted");
  wan_vae_config_published(&c);
  c.dim = 1;
  c.dim_mult[0] = 1;
  c.dim_mult[1] = 1;
  c.dim_mult[2] = 1;
  c.dim_mult[3] = 1;
  CHECK(wan_vae_config_check(&c, err, sizeof err) != 0, "width 1 resampled accepted");
  wan_vae_config_published(&c);
  int level = sp_log_level();
  sp_log_set_level(-1); /* the refusals below log, as they should */
  CHECK(wan_vae_decoder_create(&c, 0, 4, &d) == SP_ERR_INPUT, "latent height 0 accepted");
  CHECK(wan_vae_decoder_create(&c, 4, 5000, &d) == SP_ERR_INPUT, "latent width 5000 accepted");
  sp_log_set_level(level);
}

static void check_decode(void) {
  wan_vae_config c;
  wan_vae_config_published(&c);
  c.dim = 8;
  static wan_vae_weights w;
  static wan_vae_table t;
  wan_vae_table_make(&c, &w, &t);
  float *packed = sp_test_vae_new_weights(&t, 0);
  wan_vae_table_bind(&t, packed);
  const int64_t F = 3, h = 3, wd = 5;
  const int64_t n_out = 3 * wan_vae_out_frames(&c, F) * 64 * h * wd;
  float *z = sp_test_alloc(16 * F * h * wd), *v1 = sp_test_alloc(n_out), *v2 = sp_test_alloc(n_out);
  sp_rand_fill(z, 16 * F * h * wd, -2.0, 2.0);
  wan_vae_decoder *d;
  if (wan_vae_decoder_create(&c, h, wd, &d) != SP_OK) {
    CHECK(0, "decoder_create failed");
    return;
  }
  wan_vae_decode(d, &w, z, F, v1);
  CHECK(sp_test_guard_ok(v1, n_out), "decode wrote past the video");
  const int64_t ends = sp_test_vae_check_clamped(v1, n_out, "decode");
  wan_vae_decode(d, &w, z, F, v2);
  CHECK(memcmp(v1, v2, (size_t)n_out * sizeof *v1) == 0, "decode twice: the bits differ");
  int nthreads = omp_get_max_threads();
  for (int th = 1; th <= 3; th++) {
    omp_set_num_threads(th);
    wan_vae_decode(d, &w, z, F, v2);
    CHECK(memcmp(v1, v2, (size_t)n_out * sizeof *v1) == 0, "decode: %d threads differ", th);
  }
  omp_set_num_threads(nthreads);
  /* Latent frame 0 alone through the same decoder: video frame 0 agrees
   * (causal: nothing later reaches it). */
  for (int64_t ch = 0; ch < 16; ch++) memmove(z + ch * h * wd, z + ch * F * h * wd,
                                              (size_t)(h * wd) * sizeof *z);
  wan_vae_decode(d, &w, z, 1, v2);
  int64_t plane = 64 * h * wd, T3 = wan_vae_out_frames(&c, F);
  int same = 1;
  for (int64_t ch = 0; ch < 3; ch++)
    same &= memcmp(v1 + ch * T3 * plane, v2 + ch * plane, (size_t)plane * sizeof *v1) == 0;
  CHECK(same, "decode: frame 0 depends on later latent frames");
  printf("decode dim 8, F=%lld %lldx%lld -> 3x%lldx%lldx%lld: %.0f%% clamped, "
         "bit-identical for 1-3 threads and reruns\n",
         (long long)F, (long long)h, (long long)wd, (long long)T3, (long long)(8 * h),
         (long long)(8 * wd), 100.0 * (double)ends / (double)n_out);
  wan_vae_decoder_free(d);
  free(packed), free(z), free(v1), free(v2);
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "decode") == 0) return run_decode(argv[2], argv[3]);
  if (argc != 1) {
    fprintf(stderr, "usage: %s [decode IN.h5 OUT.h5]\n",
            argv[0]);
    return 2;
  }
  sp_test_begin("test_vae_driver");
  check_published_table();
  check_refusals();
  check_decode();
  return sp_test_end();
}
