/* The model-file layer's quantized formats (ranks/model/mfile_format.h),
 * through its own API on the tiny DiT's schema:
 *   - int8 (root "int8"): linear weights written from fp32 are the codes and
 *     scales of the int8 rule (MODEL.md "int8 weights") computed here from
 *     its definition (scale amax / 127, codes rint(x 127 / amax) clamped to
 *     +-127), read back as stored and widened (code x scale);
 *   - GGUF's block formats and fp16 (root "quant"): each block linear
 *     weight set to a format (q8_0, q6_k, q5_k, q5_0, q5_1, q4_k, q4_0,
 *     q4_1, q3_k, q2_k, fp16), written as random blocks with finite scale
 *     fields, read back byte for byte, widened as the dequantiser gives
 *     (tests/kernels holds it to gguf-py), stored with the tensor's own
 *     shape as the dataset attribute shape; fp16 narrowed from fp32 as
 *     IEEE's half rounds (the compiler's _Float16, to nearest even);
 *   - refusals: a format the root does not allow, rows that are not whole
 *     blocks, fp32 given to a block format without a quantiser here (q4_k),
 *     a damaged byte (checksum), an attribute shape that is not the
 *     tensor's. */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kern_quant.h"
#include "log.h"
#include "mfile.h"
#include "sp_test.h"
#include "wan_schema.h"
#include "wan_weights.h"

static char dir[256];

/* The tiny DiT with `layers` blocks. */
static wan_file_config tiny(int layers) {
  wan_file_config fc;
  wan_schema.preset("wan2.1-tiny", &fc);
  fc.c.layers = layers;
  return fc;
}

/* The int8 rule from its definition (MODEL.md "int8 weights"). */
static void i8_ref(const float *x, int64_t cols, int8_t *q, float *s) {
  float amax = 0;
  for (int64_t k = 0; k < cols; k++) amax = fmaxf(amax, fabsf(x[k]));
  const float m = amax > 0 ? 127.0f / amax : 1.0f;
  *s = amax > 0 ? amax / 127.0f : 1.0f;
  for (int64_t k = 0; k < cols; k++) {
    float v = rintf(x[k] * m);
    q[k] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
  }
}

static void check_int8(void) {
  wan_file_config fc = tiny(1);
  char path[300];
  snprintf(path, sizeof path, "%s/dit_int8.h5", dir);
  mfile_writer *w = NULL;
  CHECK(mfile_writer_open(path, &wan_schema, &fc, "int8", "", NULL, &w) == SP_OK, "open int8");
  if (!w) return;
  const int n = mfile_writer_count(w);
  float **vals = calloc((size_t)n, sizeof *vals);
  int rc = SP_OK;
  for (int i = 0; i < n && rc == SP_OK; i++) {
    const net_tensor *t = mfile_writer_tensor(w, i);
    vals[i] = malloc((size_t)t->numel * sizeof(float));
    sp_rand_fill(vals[i], t->numel, -2.0, 2.0);
    CHECK(mfile_writer_format(w, i) == (t->quant ? KERN_DTYPE_I8 : KERN_DTYPE_BF16),
          "%s/%s: int8 for the linear weights only", t->group, t->name);
    rc = mfile_writer_put(w, &(mfile_put){i, KERN_DTYPE_F32, vals[i], 0, t->numel, NULL});
  }
  CHECK(rc == SP_OK && mfile_writer_commit(w) == SP_OK, "an int8 file written");
  mfile *m = NULL;
  CHECK(mfile_open(path, &wan_schema, NULL, 1, &m) == SP_OK, "int8 file opened, verified");
  for (int i = 0; m && i < mfile_count(m); i++) {
    const net_tensor *t = mfile_tensor(m, i);
    if (!t->quant) continue;
    const int64_t rows = t->shape[0], cols = t->numel / rows;
    int8_t *q = malloc((size_t)t->numel), *rq = malloc((size_t)cols);
    float *s = malloc((size_t)rows * 4), *y = malloc((size_t)t->numel * 4);
    mfile_dst d[2] = {{i, q, 0, s}, {i, y, 1, NULL}};
    CHECK(mfile_stored(m, i) == KERN_DTYPE_I8 && mfile_read(m, 2, d, NULL) == SP_OK,
          "%s read as stored and widened", t->name);
    int ok = 1;
    for (int64_t r = 0; r < rows && ok; r++) {
      float rs;
      i8_ref(vals[i] + r * cols, cols, rq, &rs);
      ok = rs == s[r] && memcmp(rq, q + r * cols, (size_t)cols) == 0;
      for (int64_t k = 0; k < cols && ok; k++) ok = y[r * cols + k] == (float)q[r * cols + k] * s[r];
    }
    CHECK(ok, "%s: codes and scales of the int8 rule, widened code x scale", t->name);
    free(q);
    free(rq);
    free(s);
    free(y);
  }
  mfile_close(m);
  for (int i = 0; i < n; i++) free(vals[i]);
  free(vals);
}

/* The f16 scale fields of each block format (kern_quant_decode.h's
 * layouts): offsets in a block, set to finite values so every block
 * dequantises to numbers. */
typedef struct fmt_case {
  kern_dtype d;
  int f16_at[2], nf16;
} fmt_case;
static const fmt_case fmts[] = {
    {KERN_DTYPE_Q8_0, {0}, 1},     {KERN_DTYPE_Q6_K, {208}, 1},   {KERN_DTYPE_Q5_K, {0, 2}, 2},
    {KERN_DTYPE_Q5_0, {0}, 1},     {KERN_DTYPE_Q5_1, {0, 2}, 2},  {KERN_DTYPE_Q4_K, {0, 2}, 2},
    {KERN_DTYPE_Q4_0, {0}, 1},     {KERN_DTYPE_Q4_1, {0, 2}, 2},  {KERN_DTYPE_Q3_K, {108}, 1},
    {KERN_DTYPE_Q2_K, {80, 82}, 2},
};
enum { NFMT = sizeof fmts / sizeof fmts[0] };

/* Random blocks of format c for a (rows, cols) tensor, every f16 scale a
 * finite value below 2^-6 in magnitude. */
static uint8_t *random_blocks(const fmt_case *c, int64_t rows, int64_t cols, uint64_t *bytes) {
  uint64_t data = 0, sc = 0;
  kern_qfmt_bytes(kern_dtype_qfmt(c->d), rows, cols, &data, &sc, NULL, 0);
  uint8_t *p = malloc(data);
  for (uint64_t k = 0; k < data; k++) p[k] = (uint8_t)sp_rand_int(0, 255);
  const int bb = kern_qfmt_get(kern_dtype_qfmt(c->d))->block_bytes;
  for (uint64_t b = 0; b < data / (uint64_t)bb; b++)
    for (int j = 0; j < c->nf16; j++) {
      const uint16_t h = (uint16_t)(sp_rand_int(0, 0x1fff) | (sp_rand_int(0, 1) << 15));
      memcpy(p + b * (uint64_t)bb + (uint64_t)c->f16_at[j], &h, 2);
    }
  *bytes = data;
  return p;
}

/* The refusals of a quant file's writer, on tensor i (self_attn.q, 256
 * values per row) and j (ffn.2, 640 per row). */
static void check_quant_refusals(mfile_writer *w, int i, int j) {
  int level = sp_log_level();
  sp_log_set_level(-1);
  CHECK(mfile_writer_set_format(w, i, KERN_DTYPE_I8) == SP_ERR_INPUT &&
            mfile_writer_set_format(w, i, KERN_DTYPE_E4M3) == SP_ERR_INPUT,
        "int8 and fp8 are not formats of a quant file");
  CHECK(mfile_writer_set_format(w, j, KERN_DTYPE_Q4_K) == SP_ERR_INPUT,
        "q4_k on rows of 640 values (not whole blocks of 256) refused");
  const int b = mfile_writer_find(w, "/blocks/0000", "ffn.2.bias");
  CHECK(mfile_writer_set_format(w, b, KERN_DTYPE_Q8_0) == SP_ERR_INPUT,
        "a bias (not a linear weight) takes no block format");
  CHECK(mfile_writer_set_format(w, i, KERN_DTYPE_Q4_K) == SP_OK, "q4_k set");
  const net_tensor *t = mfile_writer_tensor(w, i);
  float *x = calloc((size_t)t->numel, sizeof *x);
  CHECK(mfile_writer_put(w, &(mfile_put){i, KERN_DTYPE_F32, x, 0, t->numel, NULL}) ==
            SP_ERR_INPUT, "fp32 given to q4_k refused (no quantiser here)");
  free(x);
  sp_log_set_level(level);
}

/* A quant file of two blocks: each block linear weight in the next of the
 * formats whose block its rows fill (every format in turn), the last one
 * in fp16, the rest written from fp32. Returns the stored bytes per tensor
 * (malloc'd) in bytes[i], and vals[i] where fp32 went in. */
static int write_quant(const char *path, uint8_t **bytes, float **vals) {
  wan_file_config fc = tiny(2);
  mfile_writer *w = NULL;
  if (mfile_writer_open(path, &wan_schema, &fc, "quant", "", NULL, &w) != SP_OK) return -1;
  check_quant_refusals(w, mfile_writer_find(w, "/blocks/0000", "self_attn.q.weight"),
                       mfile_writer_find(w, "/blocks/0000", "ffn.2.weight"));
  int rc = SP_OK, k = 0;
  for (int i = 0; i < mfile_writer_count(w) && rc == SP_OK; i++) {
    const net_tensor *t = mfile_writer_tensor(w, i);
    const int64_t rows = t->shape[0], cols = t->numel / rows;
    const fmt_case *c = NULL;
    const int last = i == mfile_writer_find(w, "/blocks/0001", "ffn.2.weight");
    for (int tries = 0; t->quant && !last && tries < NFMT && !c; tries++, k++)
      if (cols % kern_qfmt_get(kern_dtype_qfmt(fmts[k % NFMT].d))->block == 0) c = &fmts[k % NFMT];
    if (c) {
      uint64_t n = 0;
      bytes[i] = random_blocks(c, rows, cols, &n);
      rc = mfile_writer_set_format(w, i, c->d);
      if (rc == SP_OK)
        rc = mfile_writer_put(w, &(mfile_put){i, c->d, bytes[i], 0, t->numel, NULL});
      continue;
    }
    if (t->quant) rc = mfile_writer_set_format(w, i, KERN_DTYPE_F16); /* a linear in fp16 */
    vals[i] = malloc((size_t)t->numel * sizeof(float));
    sp_rand_fill(vals[i], t->numel, -3.0, 3.0);
    if (rc == SP_OK)
      rc = mfile_writer_put(w, &(mfile_put){i, KERN_DTYPE_F32, vals[i], 0, t->numel, NULL});
  }
  if (rc != SP_OK) {
    mfile_writer_abort(w);
    return -1;
  }
  return mfile_writer_commit(w) == SP_OK ? 0 : -1;
}

/* Tensor i of m read as stored against want (its bytes), and widened
 * against the dequantiser of those bytes. */
static int same_tensor(mfile *m, int i, const uint8_t *want) {
  const net_tensor *t = mfile_tensor(m, i);
  const int64_t rows = t->shape[0], cols = t->numel / rows;
  const uint64_t n = mfile_stored_bytes(m, i);
  uint8_t *q = malloc(n);
  float *y = malloc((size_t)t->numel * 4), *ref = malloc((size_t)t->numel * 4);
  mfile_dst d[2] = {{i, q, 0, NULL}, {i, y, 1, NULL}};
  int ok = mfile_read(m, 2, d, NULL) == SP_OK && memcmp(q, want, n) == 0;
  const kern_qtensor qt = {kern_dtype_qfmt(mfile_stored(m, i)), want, NULL, rows, cols};
  kern_quant_dequant_rows_f32(&qt, 0, rows, ref);
  ok = ok && memcmp(y, ref, (size_t)t->numel * 4) == 0;
  free(q);
  free(y);
  free(ref);
  return ok;
}

/* An fp16 tensor narrowed from vals: each value as _Float16 rounds it. */
static int same_f16(mfile *m, int i, const float *vals) {
  const net_tensor *t = mfile_tensor(m, i);
  float *y = malloc((size_t)t->numel * 4);
  mfile_dst d = {i, y, 1, NULL};
  int ok = mfile_stored(m, i) == KERN_DTYPE_F16 && mfile_read(m, 1, &d, NULL) == SP_OK;
  for (int64_t k = 0; k < t->numel && ok; k++) ok = y[k] == (float)(_Float16)vals[k];
  free(y);
  return ok;
}

/* A damaged byte of dataset ds (a flipped bit in its data) and a wrong
 * attribute shape: the first found by the checksum, the second refused
 * at open. */
static void check_damage(const char *path, const char *ds) {
  char bad[320];
  snprintf(bad, sizeof bad, "%s.bad.h5", path);
  for (int what = 0; what < 2; what++) {
    char cmd[800];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", path, bad);
    if (system(cmd) != 0) return;
    hid_t f = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT), d = H5Dopen2(f, ds, H5P_DEFAULT);
    if (what == 0) { /* a bit of the first row's 6th byte */
      uint8_t b[64];
      hsize_t st[2] = {0, 0}, ct[2] = {1, 64}, n = 64;
      hid_t fs = H5Dget_space(d), ms = H5Screate_simple(1, &n, NULL);
      H5Sselect_hyperslab(fs, H5S_SELECT_SET, st, NULL, ct, NULL);
      H5Dread(d, H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT, b);
      b[5] ^= 0x10;
      H5Dwrite(d, H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT, b);
      H5Sclose(ms);
      H5Sclose(fs);
    } else {
      H5Adelete(d, "shape");
      const int64_t wrong[2] = {7, 7};
      hsize_t two = 2;
      hid_t s = H5Screate_simple(1, &two, NULL);
      hid_t a = H5Acreate2(d, "shape", H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
      H5Awrite(a, H5T_NATIVE_INT64, wrong);
      H5Aclose(a);
      H5Sclose(s);
    }
    H5Dclose(d);
    H5Fclose(f);
    int level = sp_log_level();
    sp_log_set_level(-1);
    mfile *m = NULL;
    uint64_t read = 0;
    int rc = mfile_open(bad, &wan_schema, NULL, 1, &m);
    if (what == 0) {
      CHECK(rc == SP_OK && mfile_verify(m, &read) == SP_ERR_INPUT,
            "a flipped bit of %s found by its checksum", ds);
    } else {
      CHECK(rc == SP_ERR_INPUT, "an attribute shape that is not the tensor's refused at open");
    }
    sp_log_set_level(level);
    mfile_close(m);
    unlink(bad);
  }
}

static void check_quant(void) {
  char path[300];
  snprintf(path, sizeof path, "%s/dit_quant.h5", dir);
  wan_file_config fc = tiny(2);
  int nt = wan_schema.tensors(&fc, NULL);
  uint8_t **bytes = calloc((size_t)nt, sizeof *bytes);
  float **vals = calloc((size_t)nt, sizeof *vals);
  CHECK(write_quant(path, bytes, vals) == 0, "a quant file written");
  mfile *m = NULL;
  CHECK(mfile_open(path, &wan_schema, NULL, 1, &m) == SP_OK, "quant file opened, verified");
  int seen[KERN_DTYPE_COUNT] = {0};
  const char *block_ds = NULL;
  char dsbuf[160];
  for (int i = 0; m && i < mfile_count(m); i++) {
    const net_tensor *t = mfile_tensor(m, i);
    const kern_dtype d = mfile_stored(m, i);
    seen[d]++;
    if (bytes[i]) {
      CHECK(same_tensor(m, i, bytes[i]), "%s (%s): bytes and values read back", t->name,
            kern_dtype_name(d));
      if (!block_ds) {
        mfile_tensor_path(t, dsbuf, sizeof dsbuf);
        block_ds = dsbuf;
      }
    } else if (t->quant) {
      CHECK(same_f16(m, i, vals[i]), "%s: fp16 as IEEE's half rounds", t->name);
    }
  }
  for (int k = 0; k < NFMT; k++)
    printf("%s: %d tensor(s)\n", kern_dtype_name(fmts[k].d), seen[fmts[k].d]);
  int all = seen[KERN_DTYPE_F16] > 0;
  for (int k = 0; k < NFMT; k++) all &= seen[fmts[k].d] > 0;
  CHECK(all, "every block format and fp16 among the stored formats");
  mfile_close(m);
  if (block_ds) check_damage(path, block_ds);
  for (int i = 0; i < nt; i++) {
    free(bytes[i]);
    free(vals[i]);
  }
  free(bytes);
  free(vals);
}

int main(void) {
  sp_test_begin("test_mfile_quant");
  snprintf(dir, sizeof dir, "%s/sp-mfileq.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(dir)) return 1;
  check_int8();
  check_quant();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) return 1;
  return sp_test_end();
}
