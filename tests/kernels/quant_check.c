/* The C side of tests/kernels/test_quant_gguf.sh: dequantises the tensors
 * quant_ref.py wrote (the bytes of every ggml type staticpipe reads) with
 * kern_quant_dequant_rows_f32 / _bf16 and compares them bit for bit with
 * gguf-py's numpy dequantisation:
 *
 *   quant_check DIR
 *
 * For each manifest line (name ggml_code block type_size rows cols): the
 * table (kern_qfmt_from_ggml, block and bytes per block equal to gguf-py's
 * GGML_QUANT_SIZES), the file size (kern_qfmt_bytes), the whole tensor in
 * fp32 and bf16, then the same in row ranges (one row at a time, and split
 * at a random row) which must give the same bits. Every ggml type of the
 * table must appear in the manifest. Exit 0 when every check held. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_quant.h"
#include "sp_test.h"

static void *read_file(const char *dir, const char *name, const char *ext, size_t *bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s%s", dir, name, ext);
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "FAIL: cannot open %s\n", path);
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *p = sp_test_malloc((size_t)n);
  if (fread(p, 1, (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "FAIL: short read of %s\n", path);
    exit(1);
  }
  fclose(f);
  *bytes = (size_t)n;
  return p;
}

/* The first index where a and b (n 32- or 16-bit words) differ, or -1. */
static int64_t first_diff(const void *a, const void *b, int64_t n, size_t word) {
  for (int64_t i = 0; i < n; i++)
    if (memcmp((const char *)a + i * word, (const char *)b + i * word, word)) return i;
  return -1;
}

/* Dequantises rows [r0, r0 + n) of t into the row-offset outputs. */
static void dequant_range(const kern_qtensor *t, int64_t r0, int64_t n, float *f, uint16_t *b) {
  kern_quant_dequant_rows_f32(t, r0, n, f + r0 * t->cols);
  kern_quant_dequant_rows_bf16(t, r0, n, b + r0 * t->cols);
}

static void check_case(const char *dir, const char *name, int code, int block, int tsize,
                       int64_t rows, int64_t cols, int *seen) {
  kern_qfmt fmt;
  if (kern_qfmt_from_ggml(code, &fmt) != 0) {
    CHECK(0, "%s: ggml type %d is not in the table", name, code);
    return;
  }
  seen[fmt] = 1;
  const kern_qfmt_info *in = kern_qfmt_get(fmt);
  CHECK(in->block == block && in->block_bytes == tsize,
        "%s: table has block %d / %d bytes, gguf-py %d / %d", name, in->block, in->block_bytes,
        block, tsize);
  uint64_t data_bytes = 0, scale_bytes = 0;
  char err[256];
  CHECK(kern_qfmt_bytes(fmt, rows, cols, &data_bytes, &scale_bytes, err, sizeof err) == 0,
        "%s: %s", name, err);
  size_t qn, fn, bn;
  uint8_t *q = read_file(dir, name, ".q", &qn);
  float *want_f = read_file(dir, name, ".f32", &fn);
  uint16_t *want_b = read_file(dir, name, ".bf16", &bn);
  const int64_t n = rows * cols;
  CHECK(qn == data_bytes && scale_bytes == 0 && fn == (size_t)n * 4 && bn == (size_t)n * 2,
        "%s: %zu bytes in the file, kern_qfmt_bytes says %llu (+%llu)", name, qn,
        (unsigned long long)data_bytes, (unsigned long long)scale_bytes);
  if (qn != data_bytes || fn != (size_t)n * 4 || bn != (size_t)n * 2) return;
  const kern_qtensor t = {.fmt = fmt, .data = q, .scale = NULL, .rows = rows, .cols = cols};
  float *f = sp_test_malloc((size_t)n * 4), *f2 = sp_test_malloc((size_t)n * 4);
  uint16_t *b = sp_test_malloc((size_t)n * 2), *b2 = sp_test_malloc((size_t)n * 2);
  dequant_range(&t, 0, rows, f, b);
  const int64_t df = first_diff(f, want_f, n, 4), db = first_diff(b, want_b, n, 2);
  CHECK(df < 0, "%s (%lld x %lld): fp32 value %lld (row %lld col %lld) is %a, gguf-py %a",
        name, (long long)rows, (long long)cols, (long long)df, (long long)(df / cols),
        (long long)(df % cols), df < 0 ? 0.0 : (double)f[df], df < 0 ? 0.0 : (double)want_f[df]);
  CHECK(db < 0, "%s (%lld x %lld): bf16 value %lld is 0x%04x, gguf-py 0x%04x", name,
        (long long)rows, (long long)cols, (long long)db, db < 0 ? 0 : b[db],
        db < 0 ? 0 : want_b[db]);
  /* row ranges: one row per call, then two calls split at a random row */
  for (int64_t r = 0; r < rows; r++) dequant_range(&t, r, 1, f2, b2);
  CHECK(memcmp(f, f2, (size_t)n * 4) == 0 && memcmp(b, b2, (size_t)n * 2) == 0,
        "%s: one row per call differs from the whole tensor", name);
  const int64_t split = sp_rand_int(0, rows);
  memset(f2, 0xff, (size_t)n * 4);
  memset(b2, 0xff, (size_t)n * 2);
  dequant_range(&t, 0, split, f2, b2);
  dequant_range(&t, split, rows - split, f2, b2);
  CHECK(memcmp(f, f2, (size_t)n * 4) == 0 && memcmp(b, b2, (size_t)n * 2) == 0,
        "%s: split at row %lld differs from the whole tensor", name, (long long)split);
  printf("%-16s %-5s %3lld x %-5lld %s\n", name, in->name, (long long)rows, (long long)cols,
         df < 0 && db < 0 ? "bit-exact (fp32, bf16)" : "DIFFERS");
  free(q), free(want_f), free(want_b), free(f), free(f2), free(b), free(b2);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: quant_check DIR (written by tests/kernels/quant_ref.py)\n");
    return 2;
  }
  sp_test_begin("quant_check");
  char path[4096];
  snprintf(path, sizeof path, "%s/manifest", argv[1]);
  FILE *m = fopen(path, "r");
  if (!m) {
    fprintf(stderr, "FAIL: cannot open %s\n", path);
    return 1;
  }
  int seen[KERN_QFMT_COUNT] = {0}, cases = 0;
  char name[256];
  int code, block, tsize;
  long long rows, cols;
  while (fscanf(m, "%255s %d %d %d %lld %lld", name, &code, &block, &tsize, &rows, &cols) == 6) {
    check_case(argv[1], name, code, block, tsize, rows, cols, seen);
    cases++;
  }
  fclose(m);
  for (int f = 0; f < KERN_QFMT_COUNT; f++) {
    const kern_qfmt_info *in = kern_qfmt_get((kern_qfmt)f);
    CHECK(in->ggml_type < 0 || seen[f], "ggml type %s of the table has no case in the manifest",
          in->name);
  }
  CHECK(cases > 0, "empty manifest %s", path);
  return sp_test_end();
}
