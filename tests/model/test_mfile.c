/* The model-file layer (ranks/model/mfile.h) through its own API, on the
 * tiny VAE's schema (one group) and the tiny DiT's (fp8 with scales):
 * random values written in fp32 and read back as stored and widened
 * against bf16's and e4m3's definitions computed here; rows and streamed
 * pieces against the whole read; a flipped byte found by the streamed
 * read; the writer's refusals (a second write, a part out of order, a bad
 * scale, a scaled tensor in parts); and no HDF5 identifier left open after
 * a commit or an abort in the middle of a tensor. */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "mfile.h"
#include "sp_test.h"
#include "wan_schema.h"
#include "wan_vae_schema.h"

static char dir[256];

/* bf16 of x, nearest with ties to even, from the definition: the float32
 * with its low 16 bits rounded (x finite). */
static float bf16_of(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  const uint32_t low = u & 0xffffu, lsb = (u >> 16) & 1u;
  u &= 0xffff0000u;
  if (low > 0x8000u || (low == 0x8000u && lsb)) u += 0x10000u;
  float y;
  memcpy(&y, &u, 4);
  return y;
}

/* Identifiers HDF5 holds open, of every file. */
static ssize_t open_ids(void) { return H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL); }

/* Writes every tensor of a writer from fp32 values filled by the rng; the
 * values (per tensor, malloc'd) into vals. */
static int put_all(mfile_writer *w, float **vals) {
  int rc = SP_OK;
  for (int i = 0; i < mfile_writer_count(w) && rc == SP_OK; i++) {
    const net_tensor *t = mfile_writer_tensor(w, i);
    vals[i] = malloc((size_t)t->numel * sizeof(float));
    sp_rand_fill(vals[i], t->numel, -2.0, 2.0);
    rc = mfile_writer_put(w, &(mfile_put){i, KERN_DTYPE_F32, vals[i], 0, t->numel, NULL});
  }
  return rc;
}

/* Reads back a VAE file written in root dtype root: as stored and widened,
 * rows, a streamed read. */
typedef struct pieces {
  double sum;   /* of the values seen, in order */
  int64_t next; /* the row the next piece must start at */
  int64_t cols;
} pieces;

static int piece_sum(void *ctx, int64_t row0, int64_t nrows, const float *v) {
  pieces *p = ctx;
  if (row0 != p->next) return SP_ERR_RUNTIME;
  for (int64_t k = 0; k < nrows * p->cols; k++) p->sum += v[k];
  p->next = row0 + nrows;
  return SP_OK;
}

static void check_vae(const char *root) {
  wan_vae_config c;
  wan_vae_schema.preset("wan2.1-vae-tiny", &c);
  char path[300];
  snprintf(path, sizeof path, "%s/vae_%s.h5", dir, root);
  mfile_writer *w = NULL;
  CHECK(mfile_writer_open(path, &wan_vae_schema, &c, root, "", NULL, &w) == SP_OK, "open %s", root);
  if (!w) return;
  const int n = mfile_writer_count(w);
  float **vals = calloc((size_t)n, sizeof *vals);
  CHECK(put_all(w, vals) == SP_OK, "%s: every tensor put", root);
  CHECK(mfile_writer_commit(w) == SP_OK, "%s: commit", root);
  CHECK(open_ids() == 0, "%s: no HDF5 identifier open after the commit", root);
  mfile *m = NULL;
  CHECK(mfile_open(path, &wan_vae_schema, NULL, 1, &m) == SP_OK, "%s: open", root);
  const int bf = strcmp(root, "bf16") == 0;
  for (int i = 0; m && i < n; i++) {
    const net_tensor *t = mfile_tensor(m, i);
    CHECK(mfile_stored(m, i) == (bf ? KERN_DTYPE_BF16 : KERN_DTYPE_F32), "%s: stored dtype",
          t->name);
    float *wide = malloc((size_t)t->numel * sizeof *wide);
    void *raw = malloc((size_t)t->numel * 4);
    mfile_dst d[2] = {{i, wide, 1, NULL}, {i, raw, 0, NULL}};
    CHECK(mfile_read(m, 2, d, NULL) == SP_OK, "%s: read", t->name);
    int same = 1;
    for (int64_t k = 0; k < t->numel && same; k++) {
      const float want = bf ? bf16_of(vals[i][k]) : vals[i][k];
      uint16_t h = 0;
      if (bf) memcpy(&h, (char *)raw + 2 * k, 2);
      same = wide[k] == want && (!bf || kern_bf16_to_f32(h) == want);
    }
    CHECK(same, "%s %s: as stored and widened, the values written (bf16 by its definition)", root,
          t->name);
    const int64_t rows = t->shape[0], cols = t->numel / rows, r0 = sp_rand_int(0, rows - 1);
    float *row = malloc((size_t)cols * sizeof *row);
    CHECK(mfile_read_rows(m, i, r0, 1, row) == SP_OK &&
              memcmp(row, wide + r0 * cols, (size_t)cols * sizeof *row) == 0,
          "%s: row %lld of the rows read equals the whole read", t->name, (long long)r0);
    pieces p = {0, 0, cols};
    double want = 0;
    for (int64_t k = 0; k < t->numel; k++) want += wide[k];
    CHECK(mfile_scan(m, i, 256, piece_sum, &p) == SP_OK && p.sum == want && p.next == rows,
          "%s: the streamed read in pieces, in order, gives the whole read", t->name);
    free(row);
    free(raw);
    free(wide);
  }
  mfile_close(m);
  for (int i = 0; i < n; i++) free(vals[i]);
  free(vals);
}

/* A flipped data byte: the streamed read and verify name the dataset. */
static void check_damage(void) {
  char path[300], copy[320];
  snprintf(path, sizeof path, "%s/vae_fp32.h5", dir);
  snprintf(copy, sizeof copy, "%s/damaged.h5", dir);
  mfile *m = NULL;
  char cmd[800];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", path, copy);
  CHECK(system(cmd) == 0, "copy");
  /* the middle of the file is a tensor's data (the larger ones fill it) */
  FILE *f = fopen(copy, "r+b");
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, size / 2, SEEK_SET);
  int b = fgetc(f);
  fseek(f, size / 2, SEEK_SET);
  fputc(b ^ 0x40, f);
  fclose(f);
  int level = sp_log_level();
  sp_log_set_level(-1);
  uint64_t bytes = 0;
  int rc = mfile_open(copy, &wan_vae_schema, NULL, 0, &m);
  CHECK(rc == SP_OK && mfile_verify(m, &bytes) == SP_ERR_INPUT, "verify finds the flipped byte");
  mfile_close(m);
  sp_log_set_level(level);
}

/* The tiny DiT (one block) in fp8: the writer's refusals and an abort in
 * the middle of a tensor; then a whole file, its linear weight read back
 * widened within half an e4m3 step of what was written, with the scale
 * per row amax / 448 (MODEL.md "fp8 weights"). */
static void check_fp8_refusals(const wan_file_config *fc, const char *path) {
  mfile_writer *w = NULL;
  CHECK(mfile_writer_open(path, &wan_schema, fc, "fp8", "", NULL, &w) == SP_OK, "open fp8");
  if (!w) return;
  const int i = mfile_writer_find(w, "/blocks/0000", "ffn.0.weight");
  const int b = mfile_writer_find(w, "/blocks/0000", "ffn.0.bias");
  const net_tensor *t = mfile_writer_tensor(w, i);
  CHECK(mfile_writer_format(w, i) == KERN_DTYPE_E4M3 && mfile_writer_format(w, b) ==
            KERN_DTYPE_BF16, "ffn.0.weight e4m3, its bias bf16");
  float *x = malloc((size_t)t->numel * sizeof *x), *scale = malloc((size_t)t->shape[0] * 4);
  uint8_t *q = calloc((size_t)t->numel, 1);
  sp_rand_fill(x, t->numel, -1.0, 1.0);
  for (int64_t r = 0; r < t->shape[0]; r++) scale[r] = 1.0f;
  scale[3] = -1.0f;
  int level = sp_log_level();
  sp_log_set_level(-1);
  CHECK(mfile_writer_put(w, &(mfile_put){i, KERN_DTYPE_E4M3, q, 0, t->numel, scale}) ==
            SP_ERR_INPUT, "a negative scale refused");
  CHECK(mfile_writer_put(w, &(mfile_put){i, KERN_DTYPE_F32, x, 0, t->numel / 2, NULL}) ==
            SP_ERR_INPUT, "a quantised tensor in parts refused");
  CHECK(mfile_writer_put(w, &(mfile_put){b, KERN_DTYPE_F32, x, 1, 4, NULL}) == SP_ERR_INPUT,
        "a part out of order refused");
  CHECK(mfile_writer_put(w, &(mfile_put){i, KERN_DTYPE_F32, x, 0, t->numel, NULL}) == SP_OK &&
            mfile_writer_put(w, &(mfile_put){i, KERN_DTYPE_F32, x, 0, t->numel, NULL}) ==
                SP_ERR_INPUT, "a second write refused");
  sp_log_set_level(level);
  CHECK(mfile_writer_put(w, &(mfile_put){b, KERN_DTYPE_F32, x, 0, 4, NULL}) == SP_OK,
        "the first part of a bias");
  mfile_writer_abort(w);
  CHECK(open_ids() == 0 && access(path, F_OK) != 0,
        "an abort in the middle of a tensor: no identifier open, no file");
  free(q);
  free(scale);
  free(x);
}

static void check_fp8(void) {
  wan_file_config fc;
  wan_schema.preset("wan2.1-tiny", &fc);
  fc.c.layers = 1;
  char path[300];
  snprintf(path, sizeof path, "%s/dit_fp8.h5", dir);
  check_fp8_refusals(&fc, path);
  mfile_writer *w = NULL;
  CHECK(mfile_writer_open(path, &wan_schema, &fc, "fp8", "", NULL, &w) == SP_OK, "open fp8");
  if (!w) return;
  const int n = mfile_writer_count(w);
  float **vals = calloc((size_t)n, sizeof *vals);
  CHECK(put_all(w, vals) == SP_OK && mfile_writer_commit(w) == SP_OK, "an fp8 file written");
  mfile *m = NULL;
  CHECK(mfile_open(path, &wan_schema, NULL, 1, &m) == SP_OK, "fp8 file opened, verified");
  const int i = m ? mfile_find(m, "/blocks/0000", "self_attn.o.weight") : -1;
  if (i >= 0) {
    const net_tensor *t = mfile_tensor(m, i);
    const int64_t rows = t->shape[0], cols = t->numel / rows;
    float *y = malloc((size_t)t->numel * sizeof *y), *s = malloc((size_t)rows * sizeof *s);
    uint8_t *q = malloc((size_t)t->numel);
    mfile_dst d[2] = {{i, y, 1, NULL}, {i, q, 0, s}};
    CHECK(mfile_read(m, 2, d, NULL) == SP_OK, "weight read widened and as stored");
    int ok = 1;
    for (int64_t r = 0; r < rows && ok; r++) {
      double amax = 0;
      for (int64_t k = 0; k < cols; k++) amax = fmax(amax, fabs(vals[i][r * cols + k]));
      ok = s[r] == (float)(amax / 448.0);
      for (int64_t k = 0; k < cols && ok; k++) {
        const double x = vals[i][r * cols + k], err = fabs(y[r * cols + k] - x);
        ok = err <= fabs(x) / 16.0 + s[r] / 1024.0 + 1e-12;
      }
    }
    CHECK(ok, "e4m3 weights within half a step of the values written, scales amax / 448");
    free(q);
    free(s);
    free(y);
  }
  mfile_close(m);
  for (int k = 0; k < n; k++) free(vals[k]);
  free(vals);
}

int main(void) {
  sp_test_begin("test_mfile");
  snprintf(dir, sizeof dir, "%s/sp-mfile.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(dir)) return 1;
  check_vae("fp32");
  check_vae("bf16");
  check_damage();
  check_fp8();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) return 1;
  return sp_test_end();
}
