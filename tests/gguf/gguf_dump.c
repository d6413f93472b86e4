/* Test helper for tests/gguf/test_gguf.sh: opens a GGUF file with the
 * hardened reader (ranks/import/gguf.h) and prints what it read, so
 * gguf_files.py can compare it with what gguf-py wrote:
 *
 *   gguf_dump FILE [OUTDIR]
 *
 * stdout, one line each: "version V", "alignment A", "data_start D",
 * "arch NAME" (rank_gguf_meta_name of general.architecture, "-" when
 * absent), "file_type N" (rank_gguf_meta_u64 of general.file_type, when
 * present), "kv KEY TYPE ELEMTYPE COUNT VALUE" per pair in file order
 * (integers in decimal, floats as %.17g, a string as the hex of its bytes,
 * an array of numbers as the hex of its packed bytes, an array of strings
 * as their hex joined by ','), and "tensor NAME GGML_TYPE FORMAT NE SHAPE
 * OFFSET BYTES ROWS COLS" per tensor (NE and SHAPE comma-separated), each
 * tensor also looked up by name. With OUTDIR, tensor i's bytes (read with
 * rank_gguf_read) go to OUTDIR/i.raw and their fp32 dequantisation
 * (kern_quant_dequant_rows_f32) to OUTDIR/i.f32. Exit 0, or the reader's
 * status (2: a bad file, its message on stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "kern_quant.h"
#include "log.h"

static void hex(const void *p, uint64_t n) {
  for (uint64_t i = 0; i < n; i++) printf("%02x", ((const unsigned char *)p)[i]);
}

static const unsigned elem_size[RANK_GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

static void print_kv(const rank_gguf_kv *kv) {
  printf("kv %s %s %s %llu ", kv->key, rank_gguf_vtype_name(kv->type),
         kv->type == RANK_GGUF_ARRAY ? rank_gguf_vtype_name(kv->elem_type) : "-",
         (unsigned long long)kv->count);
  switch (kv->type) {
  case RANK_GGUF_STRING: hex(kv->str, kv->str_len); break;
  case RANK_GGUF_ARRAY:
    if (kv->elem_type == RANK_GGUF_STRING)
      for (uint64_t j = 0; j < kv->count; j++) {
        if (j) putchar(',');
        hex(kv->strs[j], kv->str_lens[j]);
      }
    else
      hex(kv->data, kv->count * elem_size[kv->elem_type]);
    break;
  case RANK_GGUF_F32: case RANK_GGUF_F64: printf("%.17g", kv->f); break;
  case RANK_GGUF_I8: case RANK_GGUF_I16: case RANK_GGUF_I32: case RANK_GGUF_I64:
    printf("%lld", (long long)kv->i);
    break;
  default: printf("%llu", (unsigned long long)kv->u); break;
  }
  putchar('\n');
}

/* Writes tensor i's bytes and fp32 values into outdir; SP_OK or a status. */
static int dump_tensor(const rank_gguf_file *f, const rank_gguf_tensor *t, int64_t i,
                       const char *outdir) {
  unsigned char *raw = sp_xmalloc((size_t)t->bytes);
  float *val = sp_xmalloc((size_t)t->numel * sizeof *val);
  int rc = rank_gguf_read(f, t, 0, raw, (size_t)t->bytes);
  if (rc == SP_OK) {
    const kern_qtensor q = {.fmt = t->fmt, .data = raw, .rows = t->rows, .cols = t->cols};
    kern_quant_dequant_rows_f32(&q, 0, t->rows, val);
    char path[4096];
    const struct { const char *ext; const void *p; size_t n; } out[2] = {
        {"raw", raw, (size_t)t->bytes}, {"f32", val, (size_t)t->numel * sizeof *val}};
    for (int k = 0; k < 2 && rc == SP_OK; k++) {
      snprintf(path, sizeof path, "%s/%lld.%s", outdir, (long long)i, out[k].ext);
      FILE *o = fopen(path, "wb");
      if (!o || fwrite(out[k].p, 1, out[k].n, o) != out[k].n) rc = SP_ERR_RUNTIME;
      if (o && fclose(o) != 0) rc = SP_ERR_RUNTIME;
      if (rc != SP_OK) fprintf(stderr, "gguf_dump: cannot write %s\n", path);
    }
  }
  free(raw);
  free(val);
  return rc;
}

int main(int argc, char **argv) {
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: gguf_dump FILE [OUTDIR]\n");
    return 2;
  }
  rank_gguf_file *f = NULL;
  int rc = rank_gguf_open(argv[1], &f);
  if (rc != SP_OK) return rc;
  const rank_gguf_header *h = &f->h;
  const char *arch = rank_gguf_meta_name(f, "general.architecture");
  uint64_t file_type = 0;
  const int has_ft = rank_gguf_meta_u64(f, "general.file_type", &file_type) == 0;
  printf("version %u\nalignment %llu\ndata_start %llu\narch %s\n", h->version,
         (unsigned long long)h->alignment, (unsigned long long)h->data_start, arch ? arch : "-");
  if (has_ft) printf("file_type %llu\n", (unsigned long long)file_type);
  for (int64_t i = 0; i < h->nkv; i++) print_kv(&h->kv[i]);
  for (int64_t i = 0; i < h->ntensors && rc == SP_OK; i++) {
    const rank_gguf_tensor *t = &h->t[i];
    if (rank_gguf_tensor_find(f, t->name) != t) {
      fprintf(stderr, "gguf_dump: tensor '%s' not found by name\n", t->name);
      rc = SP_ERR_RUNTIME;
      break;
    }
    printf("tensor %s %d %s ", t->name, t->ggml_type, kern_qfmt_get(t->fmt)->name);
    for (int d = 0; d < t->n_dims; d++) printf("%s%lld", d ? "," : "", (long long)t->ne[d]);
    putchar(' ');
    for (int d = 0; d < t->shape_dims; d++)
      printf("%s%lld", d ? "," : "", (long long)t->shape[d]);
    printf(" %llu %llu %lld %lld\n", (unsigned long long)t->offset, (unsigned long long)t->bytes,
           (long long)t->rows, (long long)t->cols);
    if (argc == 3) rc = dump_tensor(f, t, i, argv[2]);
  }
  rank_gguf_close(f);
  return rc;
}
