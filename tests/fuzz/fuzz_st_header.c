/* libFuzzer target on the safetensors header parser (launch/fuzz.sh builds
 * and runs it). The first 8 input bytes give the data buffer length the
 * header must describe, the rest is the JSON header. On success the parsed
 * ranges are checked against the invariants the parser promises, so a
 * silently wrong acceptance is a crash, not just a memory error. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 8) return 0;
  uint64_t data_len = 0;
  for (int i = 7; i >= 0; i--) data_len = (data_len << 8) | data[i];
  data_len %= (1u << 20); /* small buffers so ranges can actually fit */
  char err[512];
  rank_st_header h;
  if (rank_st_parse_header((const char *)data + 8, size - 8, data_len, &h, err, sizeof err) != 0)
    return 0;
  uint64_t covered = 0;
  for (int i = 0; i < h.count; i++) {
    const rank_st_tensor *t = &h.t[i];
    uint64_t bytes = t->numel * rank_st_dtype_size(t->dtype);
    if (t->begin > t->end || t->end > data_len || t->end - t->begin != bytes) abort();
    if (t->ndim < 0 || t->ndim > RANK_ST_MAX_NDIM || !t->name[0]) abort();
    covered += bytes;
  }
  if (covered != data_len) abort(); /* contiguous, no overlap, no gap */
  rank_st_header_free(&h);
  return 0;
}
