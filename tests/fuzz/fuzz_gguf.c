/* libFuzzer target on the GGUF header parser (launch/fuzz.sh builds and
 * runs it): the input is a whole file. On success the parsed header is
 * checked against the invariants the parser promises (dims and sizes
 * consistent, every tensor's bytes aligned, inside the data section and
 * apart from the others, names found by lookup), so a silently wrong
 * acceptance is a crash, not just a memory error. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

static int by_offset(const void *a, const void *b) {
  const rank_gguf_tensor *x = *(const rank_gguf_tensor *const *)a;
  const rank_gguf_tensor *y = *(const rank_gguf_tensor *const *)b;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[512];
  uint64_t need = 0;
  rank_gguf_header h;
  const int r = rank_gguf_parse(data, size, size, &h, &need, err, sizeof err);
  if (r == 1) abort(); /* the whole file was given: never "read more" */
  if (r != 0) return 0;
  if (h.alignment == 0 || (h.alignment & (h.alignment - 1)) || h.data_start % h.alignment) abort();
  const rank_gguf_tensor **ord = malloc((size_t)h.ntensors * sizeof *ord + 1);
  if (!ord) abort();
  for (int64_t i = 0; i < h.ntensors; i++) {
    const rank_gguf_tensor *t = &h.t[i];
    uint64_t numel = 1, data_bytes, scale_bytes;
    if (t->n_dims < 1 || t->n_dims > RANK_GGUF_MAX_DIMS || !t->name[0]) abort();
    for (int d = 0; d < t->n_dims; d++) numel *= (uint64_t)t->ne[d];
    if (numel != t->numel || (uint64_t)t->rows * (uint64_t)t->cols != numel) abort();
    if (kern_qfmt_bytes(t->fmt, t->rows, t->cols, &data_bytes, &scale_bytes, NULL, 0) != 0 ||
        data_bytes != t->bytes || scale_bytes != 0)
      abort();
    if (t->offset % h.alignment || h.data_start + t->offset + t->bytes > size) abort();
    if (rank_gguf_header_tensor(&h, t->name) != t) abort();
    ord[i] = t;
  }
  qsort(ord, (size_t)h.ntensors, sizeof *ord, by_offset);
  for (int64_t i = 1; i < h.ntensors; i++)
    if (ord[i - 1]->offset + ord[i - 1]->bytes > ord[i]->offset) abort();
  for (int64_t i = 0; i < h.nkv; i++)
    if (!h.kv[i].key[0] || rank_gguf_kv_find(&h, h.kv[i].key) != &h.kv[i]) abort();
  free(ord);
  rank_gguf_header_free(&h);
  return 0;
}
