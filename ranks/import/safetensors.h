/* A reader of safetensors files that treats every byte as hostile.
 *
 * Format: 8-byte little-endian header length N, N bytes of JSON (an object:
 * tensor name -> {"dtype", "shape", "data_offsets": [begin, end]}, plus an
 * optional "__metadata__" string -> string map), then the data buffer;
 * offsets are relative to the start of the data buffer.
 *
 * The header parser is pure (no I/O, no logging): it writes one message
 * naming the tensor and the failed check into a caller buffer, so the
 * libFuzzer target (tests/fuzz/) can drive it directly. rank_st_open adds
 * the file name and logs the message once. */
#ifndef RANK_SAFETENSORS_H
#define RANK_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define RANK_ST_MAX_HEADER (100u * 1000u * 1000u) /* 100 MB bound on the JSON header */
#define RANK_ST_MAX_NDIM 8
#define RANK_ST_MAX_NAME 1024 /* bytes of a tensor name */

/* Every dtype the safetensors format defines (so offsets can be checked for
 * any file); the converter accepts only F32, F16 and BF16. */
typedef enum {
  RANK_ST_BOOL, RANK_ST_U8, RANK_ST_I8, RANK_ST_F8_E4M3, RANK_ST_F8_E5M2,
  RANK_ST_I16, RANK_ST_U16, RANK_ST_F16, RANK_ST_BF16,
  RANK_ST_I32, RANK_ST_U32, RANK_ST_F32,
  RANK_ST_I64, RANK_ST_U64, RANK_ST_F64,
} rank_st_dtype;

const char *rank_st_dtype_name(rank_st_dtype t);
size_t rank_st_dtype_size(rank_st_dtype t);

typedef struct rank_st_tensor {
  char *name;            /* decoded UTF-8, no NUL inside */
  rank_st_dtype dtype;
  int ndim;              /* 0 .. RANK_ST_MAX_NDIM */
  int64_t shape[RANK_ST_MAX_NDIM];
  uint64_t numel;        /* product of shape, overflow-checked */
  uint64_t begin, end;   /* byte range in the data buffer; end - begin = numel * size */
} rank_st_tensor;

typedef struct rank_st_header {
  int count;             /* tensors, in header order */
  rank_st_tensor *t;
  int nmeta;             /* __metadata__ entries, in header order */
  char **meta_key;
  char **meta_val;
} rank_st_header;

/* Parses and checks a header of len bytes (the JSON only) for a data buffer
 * of data_len bytes: the JSON checks of io_json_parse (ranks/io/json_in.h:
 * UTF-8, no NUL byte, one object in strict syntax and depth, no duplicate
 * key in any object), known dtypes, shapes of non-negative integers with
 * overflow-checked sizes, byte ranges that are ordered, non-overlapping,
 * without gaps, exactly fill data_len and match each tensor's size. Returns
 * 0 and fills out (free with rank_st_header_free), or -1 with a message in
 * err (out left empty). */
int rank_st_parse_header(const char *json, size_t len, uint64_t data_len, rank_st_header *out,
                         char *err, size_t errlen);
void rank_st_header_free(rank_st_header *h);

/* An open safetensors file: its checked header and a descriptor for pread. */
typedef struct rank_st_file {
  char *path;
  int fd;
  uint64_t file_size;
  uint64_t data_start;   /* 8 + header length */
  rank_st_header h;
} rank_st_file;

/* Opens and checks a file (never maps or reads its data). Errors are logged
 * once as "PATH: ..." naming the tensor and the check; returns SP_OK,
 * SP_ERR_INPUT (a bad file) or SP_ERR_RUNTIME (an I/O failure). */
int rank_st_open(const char *path, rank_st_file **out);
void rank_st_close(rank_st_file *f);

/* Reads n bytes at offset off of tensor t's data into dst (pread, retried on
 * short reads). off + n must lie inside the tensor. Logs and returns
 * SP_ERR_RUNTIME on an I/O failure or SP_ERR_INPUT if the file shrank. */
int rank_st_read(const rank_st_file *f, const rank_st_tensor *t, uint64_t off, void *dst,
                 size_t n);

#endif
