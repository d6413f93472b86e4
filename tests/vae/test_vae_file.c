/* The VAE model file (ranks/nets/wan_vae/vae_file.h) through its C API: presets and
 * synth: specs, the synthetic weights' scales, the writer's refusals and
 * its atomic commit, fp32 and bf16 decoder-only files read back (no
 * attribute encoder, no /encoder, encoding refused), a file with the
 * encoder read back, a buffer too small, and the arch line of the DiT
 * reader given a VAE file. (The CLI, convert and
 * decode of files are tests/vae/test_vae_convert.sh.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>

#include "h5_util.h"
#include "log.h"
#include "model_file.h"
#include "sp_test.h"
#include "vae_file.h"

static char dir[256];

static int dir_entries(void) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.' || strlen(e->d_name) > 2;
  if (d) closedir(d);
  return n;
}

static void check_specs(void) {
  wan_vae_config c, pub;
  wan_vae_config_published(&pub);
  CHECK(vae_preset("wan2.1-vae", &c) == 0 && c.dim == 96, "preset wan2.1-vae");
  CHECK(vae_preset("wan2.1-vae-tiny", &c) == 0 && c.dim == 8 && c.n_mult == pub.n_mult &&
            c.num_res_blocks == pub.num_res_blocks && c.temporal_up[0] == 1 &&
            c.temporal_up[1] == 1 && c.temporal_up[2] == 0,
        "preset wan2.1-vae-tiny: dim 8, the published structure");
  CHECK(vae_preset("wan2.1-tiny", &c) != 0, "a DiT preset is no VAE preset");
  CHECK(wan_vae_out_frames(&c, 21) == 81 && wan_vae_out_scale(&c) == 8, "tiny: 81 frames, 8x");
  static const char *bad[] = {"synth:", "synth:wan2.1-vae:", "synth:wan2.1-vae:-1",
                              "synth:wan2.1-vae:1x", "synth:wan2.1-nope"};
  int level = sp_log_level();
  sp_log_set_level(-1);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    vae_model *m = NULL;
    CHECK(vae_model_open(bad[i], 0, &m) == SP_ERR_INPUT && !m, "%s accepted", bad[i]);
  }
  sp_log_set_level(level);
}

/* Every synthetic tensor within its scale (vae_file.h): gammas within 0.1
 * of 1, biases within 0.05, conv weights within sqrt(3 / fan_in), and
 * neither constant nor repeated across seeds. */
static void check_synth(const wan_vae_table *t, const float *a, const float *b) {
  int bad = 0, same = 0;
  for (int i = 0; i < t->count; i++) {
    const wan_vae_tensor *e = &t->t[i];
    const char *tail = strrchr(e->name, '.');
    double lo, hi;
    if (strcmp(tail, ".gamma") == 0) {
      lo = 0.9, hi = 1.1;
    } else if (strcmp(tail, ".bias") == 0) {
      lo = -0.05, hi = 0.05;
    } else {
      hi = sqrt(3.0 / (double)(e->numel / e->shape[0]));
      lo = -hi;
    }
    double mn = 1e30, mx = -1e30;
    for (int64_t k = 0; k < e->numel; k++) {
      float v = a[e->offset + k];
      mn = v < mn ? v : mn;
      mx = v > mx ? v : mx;
    }
    bad += mn < lo || mx > hi || (e->numel > 8 && mx - mn < 0.5 * (hi - lo));
    same += memcmp(a + e->offset, b + e->offset, (size_t)e->numel * sizeof *a) == 0;
  }
  CHECK(bad == 0, "synth: %d tensors outside their scale", bad);
  CHECK(same == 0, "synth: %d tensors equal for seeds 1 and 2", same);
}

/* A decoder-only file m at path: no attribute encoder, no /encoder, and
 * reading the encoder refused (buf of floats as scratch). */
static void check_decoder_only(const char *path, vae_model *m, float *buf, int64_t floats) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  CHECK(f >= 0 && H5Aexists(f, "encoder") == 0 && H5Lexists(f, "/encoder", H5P_DEFAULT) == 0,
        "%s: a decoder-only file has no attribute encoder and no /encoder", path);
  if (f >= 0) H5Fclose(f);
  const vae_model_info *in = vae_model_get_info(m);
  const int level = sp_log_level();
  sp_log_set_level(-1);
  CHECK(!in->config.encoder && in->enc_tensors == 0 &&
            vae_model_read_encoder(m, buf, floats) == SP_ERR_INPUT &&
            strstr(sp_log_last_error(), "holds only the decoder"),
        "%s: encoding refused: %s", path, sp_log_last_error());
  sp_log_set_level(level);
}

static void check_write_read(void) {
  vae_model *s1, *s2;
  if (vae_model_open("synth:wan2.1-vae-tiny:1", 0, &s1) != SP_OK ||
      vae_model_open("synth:wan2.1-vae-tiny:2", 0, &s2) != SP_OK) {
    CHECK(0, "synth tiny does not open");
    return;
  }
  /* a decoder-only file (synth: has the encoder too: check_encoder_file) */
  wan_vae_config c = vae_model_get_info(s1)->config;
  CHECK(c.encoder == 1, "synth: the encoder is there");
  c.encoder = 0;
  static wan_vae_weights w;
  static wan_vae_table t;
  wan_vae_table_make(&c, &w, &t);
  float *a = calloc((size_t)t.packed_floats, sizeof *a), *b = calloc((size_t)t.packed_floats, 4),
        *r = malloc((size_t)t.packed_floats * sizeof *r);
  CHECK(vae_model_read(s1, a, t.packed_floats) == SP_OK &&
            vae_model_read(s2, b, t.packed_floats) == SP_OK,
        "synth read");
  check_synth(&t, a, b);
  const vae_model_info *in = vae_model_get_info(s1);
  static wan_vae_enc_weights ew;
  static wan_vae_table et;
  wan_vae_enc_table_make(&in->config, &ew, &et);
  CHECK(in->size.tensors == t.count + et.count && in->size.params == t.params + et.params &&
            in->enc_tensors == et.count && in->size.file_bytes == 0 &&
            in->id.synthetic && in->id.dtype == KERN_DTYPE_F32 &&
            strcmp(in->id.checksum, "synth:wan2.1-vae-tiny:1:v1") == 0,
        "synth info: %d tensors, %lld params, checksum %s", in->size.tensors,
        (long long)in->size.params, in->id.checksum);

  int level = sp_log_level();
  for (int dt = 0; dt < 2; dt++) {
    kern_dtype dtype = dt ? KERN_DTYPE_BF16 : KERN_DTYPE_F32;
    char path[300];
    snprintf(path, sizeof path, "%s/vae-%s.h5", dir, kern_dtype_name(dtype));
    vae_model_writer *wr;
    CHECK(vae_model_writer_open(path, &c, dtype, NULL, &wr) == SP_OK, "writer_open");
    sp_log_set_level(-1);
    CHECK(vae_model_writer_put(wr, "decoder.nothing.weight", a, 4) == SP_ERR_INPUT,
          "put of a name not in the table accepted");
    CHECK(vae_model_writer_put(wr, t.t[0].name, a, t.t[0].numel - 1) == SP_ERR_INPUT,
          "put of a wrong count accepted");
    sp_log_set_level(level);
    for (int i = 0; i < t.count; i++)
      CHECK(vae_model_writer_put(wr, t.t[i].name, a + t.t[i].offset, t.t[i].numel) == SP_OK,
            "put %s", t.t[i].name);
    sp_log_set_level(-1);
    CHECK(vae_model_writer_put(wr, t.t[3].name, a + t.t[3].offset, t.t[3].numel) == SP_ERR_INPUT,
          "a second put of one tensor accepted");
    sp_log_set_level(level);
    CHECK(vae_model_writer_commit(wr) == SP_OK, "commit");
    vae_model *m;
    if (vae_model_open(path, 1, &m) != SP_OK) {
      CHECK(0, "%s does not open", path);
      continue;
    }
    const vae_model_info *fi = vae_model_get_info(m);
    CHECK(fi->id.dtype == dtype && strcmp(fi->id.preset, "wan2.1-vae-tiny") == 0 &&
              fi->size.file_bytes == t.params * (int64_t)kern_dtype_size(dtype) &&
              strncmp(fi->id.checksum, "crc32c:", 7) == 0 &&
              strcmp(fi->id.arch, VAE_MODEL_ARCH) == 0,
          "%s: info (preset matched from the config, bytes, checksum)", path);
    memset(r, 0x7f, (size_t)t.packed_floats * sizeof *r);
    CHECK(vae_model_read(m, r, t.packed_floats) == SP_OK, "read %s", path);
    int64_t diff = 0, pad = 0;
    for (int i = 0; i < t.count; i++) {
      const wan_vae_tensor *e = &t.t[i];
      for (int64_t k = 0; k < e->numel; k++) {
        float want = a[e->offset + k];
        if (dtype == KERN_DTYPE_BF16) want = kern_bf16_to_f32(kern_f32_to_bf16(want));
        diff += memcmp(&r[e->offset + k], &want, 4) != 0;
      }
      int64_t end = i + 1 < t.count ? t.t[i + 1].offset : t.packed_floats;
      for (int64_t k = e->offset + e->numel; k < end; k++) pad += r[k] != 0.0f;
    }
    CHECK(diff == 0 && pad == 0, "%s read back: %lld values differ, %lld padding not zero", path,
          (long long)diff, (long long)pad);
    sp_log_set_level(-1);
    CHECK(vae_model_read(m, r, t.packed_floats - 1) == SP_ERR_RUNTIME,
          "a buffer too small accepted");
    rank_model *dm = NULL;
    CHECK(rank_model_open(path, 0, &dm) == SP_ERR_INPUT && !dm &&
              strstr(sp_log_last_error(), "is a wan2.1-vae model (a VAE decoder); this command "
                                          "needs a wan2.1-t2v DiT"),
          "the DiT reader given a VAE file says: %s", sp_log_last_error());
    sp_log_set_level(level);
    char arch[64];
    CHECK(model_file_arch(path, arch, sizeof arch) == 0 && strcmp(arch, VAE_MODEL_ARCH) == 0,
          "model_file_arch");
    check_decoder_only(path, m, r, t.packed_floats);
    vae_model_close(m);
    unlink(path);
  }
  char arch[64];
  CHECK(model_file_arch("/nonexistent/x.h5", arch, sizeof arch) == -1, "arch of no file");

  /* A commit with a tensor never written fails and leaves nothing. */
  char path[300];
  snprintf(path, sizeof path, "%s/partial.h5", dir);
  vae_model_writer *wr;
  CHECK(vae_model_writer_open(path, &c, KERN_DTYPE_F32, "", &wr) == SP_OK, "writer_open");
  for (int i = 0; i + 1 < t.count; i++)
    vae_model_writer_put(wr, t.t[i].name, a + t.t[i].offset, t.t[i].numel);
  sp_log_set_level(-1);
  CHECK(vae_model_writer_commit(wr) == SP_ERR_INPUT &&
            strstr(sp_log_last_error(), "decoder.head.2.bias was never written"),
        "commit without the last tensor: %s", sp_log_last_error());
  wan_vae_config badc = c;
  badc.z_dim = 4;
  CHECK(vae_model_writer_open(path, &badc, KERN_DTYPE_F32, "", &wr) == SP_ERR_INPUT,
        "writer_open of a bad config");
  sp_log_set_level(level);
  CHECK(dir_entries() == 0, "a failed writer leaves nothing in the directory");
  vae_model_close(s1);
  vae_model_close(s2);
  free(a), free(b), free(r);
}

/* Every tensor of table t from read into a writer's put. */
static int put_all(vae_model *src, vae_model_writer *wr, const wan_vae_table *t, float *buf,
                   int (*read)(vae_model *, float *, int64_t), int skip_last) {
  int rc = read(src, buf, t->packed_floats);
  for (int i = 0; rc == SP_OK && i < t->count - skip_last; i++)
    rc = vae_model_writer_put(wr, t->t[i].name, buf + t->t[i].offset, t->t[i].numel);
  return rc;
}

/* A file with the encoder: both halves read back bit for bit, the
 * attribute and the group, a different checksum from the decoder alone;
 * a commit without an encoder tensor names it. */
static void check_encoder_file(void) {
  vae_model *s;
  if (vae_model_open("synth:wan2.1-vae-tiny:5", 0, &s) != SP_OK) {
    CHECK(0, "synth tiny does not open");
    return;
  }
  const wan_vae_config c = vae_model_get_info(s)->config;
  static wan_vae_weights w;
  static wan_vae_enc_weights ew;
  static wan_vae_table t, et;
  wan_vae_table_make(&c, &w, &t);
  wan_vae_enc_table_make(&c, &ew, &et);
  float *d = calloc((size_t)t.packed_floats, 4), *e = calloc((size_t)et.packed_floats, 4);
  float *r = calloc((size_t)et.packed_floats, 4);
  char path[300];
  snprintf(path, sizeof path, "%s/vae-enc.h5", dir);
  vae_model_writer *wr;
  int rc = vae_model_writer_open(path, &c, KERN_DTYPE_F32, NULL, &wr);
  if (rc == SP_OK) rc = put_all(s, wr, &t, d, vae_model_read, 0);
  if (rc == SP_OK) rc = put_all(s, wr, &et, e, vae_model_read_encoder, 0);
  CHECK(rc == SP_OK && vae_model_writer_commit(wr) == SP_OK, "a file with the encoder written");
  vae_model *m;
  if (vae_model_open(path, 1, &m) == SP_OK) {
    const vae_model_info *in = vae_model_get_info(m);
    CHECK(in->config.encoder == 1 && in->enc_tensors == et.count && in->enc_params == et.params &&
              vae_model_read_encoder(m, r, et.packed_floats) == SP_OK &&
              memcmp(r, e, (size_t)et.packed_floats * 4) == 0,
          "%s: the encoder (%d tensors) reads back bit for bit", path, in->enc_tensors);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    int64_t enc = 0;
    CHECK(f >= 0 && rank_h5_attr_read_num(f, "encoder", H5T_NATIVE_INT64, &enc, 1) == 0 &&
              enc == 1 && H5Lexists(f, "/encoder", H5P_DEFAULT) > 0,
          "%s: attribute encoder = 1 and the group /encoder", path);
    if (f >= 0) H5Fclose(f);
    vae_model_close(m);
  } else {
    CHECK(0, "%s does not open", path);
  }
  unlink(path);
  /* the last encoder tensor left out */
  const int level = sp_log_level();
  sp_log_set_level(-1);
  rc = vae_model_writer_open(path, &c, KERN_DTYPE_F32, NULL, &wr);
  if (rc == SP_OK) rc = put_all(s, wr, &t, d, vae_model_read, 0);
  if (rc == SP_OK) rc = put_all(s, wr, &et, e, vae_model_read_encoder, 1);
  CHECK(rc == SP_OK && vae_model_writer_commit(wr) == SP_ERR_INPUT &&
            strstr(sp_log_last_error(), "/encoder/conv1.bias was never written"),
        "commit without the encoder's last tensor: %s", sp_log_last_error());
  sp_log_set_level(level);
  CHECK(dir_entries() == 0, "a failed writer leaves nothing in the directory");
  vae_model_close(s);
  free(d), free(e), free(r);
}

int main(void) {
  sp_test_begin("test_vae_file");
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/sp-vae-file.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    fprintf(stderr, "cannot make a temporary directory\n");
    return 1;
  }
  check_specs();
  check_write_read();
  check_encoder_file();
  rmdir(dir);
  return sp_test_end();
}
