/* A reader of GGUF files (llama.cpp's format, which ComfyUI-GGUF uses for
 * quantized Wan checkpoints) that treats every byte as hostile, like the
 * safetensors reader.
 *
 * Format (little-endian): magic "GGUF", u32 version (2 or 3), u64 tensor
 * count, u64 metadata count; the metadata: each a string key, a u32 value
 * type and the value (u8 i8 u16 i16 u32 i32 f32 bool string array u64 i64
 * f64; a string is a u64 length and its bytes; an array a u32 element type,
 * a u64 count and the elements); then per tensor its string name, u32
 * n_dims, u64 dims[n_dims] (ne[0] the fastest-varying: a row of a weight),
 * u32 ggml type and u64 offset into the data section; the data section
 * starts at the next multiple of the alignment (metadata general.alignment,
 * a u32 power of two, default 32), and every offset is a multiple of it.
 *
 * What is checked (each refusal names the key or tensor and the check):
 * magic, version (1 and big-endian files refused by name), counts bounded
 * by what the file can hold, every length inside the file, keys and tensor
 * names non-empty UTF-8 without control characters and unique, value
 * types known, bools 0 or 1, no arrays of arrays (ggml does not read them
 * either), general.alignment a u32 power of two, n_dims 1 ..
 * RANK_GGUF_MAX_DIMS, every dim >= 1, the element count and byte size
 * overflow-checked, the ggml type one staticpipe reads (kern_quant.h) with
 * the row a multiple of its block, each offset aligned, and every tensor's
 * bytes inside the file and apart from every other tensor's.
 *
 * Five dims, not the specification's four: city96's Wan GGUF files hold the
 * 5-D patch_embedding.weight (5120, 16, 1, 2, 2) as an F32 tensor of
 * n_dims 5 (ComfyUI-GGUF's tools/fix_5d_tensors.py adds it with gguf-py).
 *
 * The parser is pure (no I/O, no logging): it writes one message into a
 * caller buffer, so the libFuzzer target (tests/fuzz/fuzz_gguf.c) drives it
 * directly. rank_gguf_open adds the file name and logs the message once. */
#ifndef RANK_GGUF_H
#define RANK_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "kern_quant.h"

#define RANK_GGUF_MAX_DIMS 5
#define RANK_GGUF_MAX_SHAPE 8                 /* dims of a comfy.gguf.orig_shape */
#define RANK_GGUF_MAX_NAME 1024               /* bytes of a tensor name */
#define RANK_GGUF_MAX_KEY 65535               /* bytes of a key (the specification's bound) */
#define RANK_GGUF_MAX_HEADER (256ull << 20)   /* bytes before the data section */
#define RANK_GGUF_DEFAULT_ALIGNMENT 32

/* GGUF's value type codes. */
typedef enum rank_gguf_vtype {
  RANK_GGUF_U8 = 0, RANK_GGUF_I8 = 1, RANK_GGUF_U16 = 2, RANK_GGUF_I16 = 3,
  RANK_GGUF_U32 = 4, RANK_GGUF_I32 = 5, RANK_GGUF_F32 = 6, RANK_GGUF_BOOL = 7,
  RANK_GGUF_STRING = 8, RANK_GGUF_ARRAY = 9, RANK_GGUF_U64 = 10, RANK_GGUF_I64 = 11,
  RANK_GGUF_F64 = 12, RANK_GGUF_VTYPE_COUNT = 13
} rank_gguf_vtype;

const char *rank_gguf_vtype_name(rank_gguf_vtype t);

/* One metadata pair. Scalars are widened into u (unsigned types and bool),
 * i (signed) or f (f32, f64). A string keeps its bytes as stored (not
 * checked: rank_gguf_meta_name checks the ones used as names) with a NUL
 * appended. An array of numbers or bools keeps its elements packed
 * little-endian as stored; an array of strings has strs[count] (each NUL
 * terminated, into one block) and their lengths. */
typedef struct rank_gguf_kv {
  char *key;
  rank_gguf_vtype type;
  rank_gguf_vtype elem_type; /* ARRAY: its elements' type */
  uint64_t count;            /* ARRAY: its elements; 1 otherwise */
  uint64_t u;
  int64_t i;
  double f;
  char *str; /* STRING */
  uint64_t str_len;
  void *data;           /* ARRAY of numbers or bools: count x the element size */
  char **strs;          /* ARRAY of strings */
  uint64_t *str_lens;
  char *str_block;      /* owns what strs point into */
} rank_gguf_kv;

typedef struct rank_gguf_tensor {
  char *name;
  int ggml_type;        /* the file's code */
  kern_qfmt fmt;        /* its format */
  int n_dims;           /* 1 .. RANK_GGUF_MAX_DIMS */
  int64_t ne[RANK_GGUF_MAX_DIMS]; /* GGUF's order: ne[0] the fastest (a row) */
  int shape_dims;       /* PyTorch's order: ne reversed, or comfy.gguf.orig_shape.NAME */
  int64_t shape[RANK_GGUF_MAX_SHAPE];
  uint64_t numel;
  int64_t rows, cols;   /* as a quantized matrix (kern_qtensor): numel / ne[0], ne[0] */
  uint64_t offset;      /* into the data section, as stored */
  uint64_t bytes;
} rank_gguf_tensor;

typedef struct rank_gguf_header {
  uint32_t version;
  uint64_t alignment;
  uint64_t data_start;  /* file offset of the data section */
  int64_t nkv;
  rank_gguf_kv *kv;     /* in file order */
  int64_t ntensors;
  rank_gguf_tensor *t;  /* in file order */
  rank_gguf_tensor **by_name; /* the same, sorted by name (lookups) */
} rank_gguf_header;

/* Parses buf, the first len bytes of a file of file_size bytes (len <=
 * file_size). Returns 0 and fills out (free with rank_gguf_header_free);
 * 1 when the header runs past len but may fit in the file (*need: bytes to
 * read, at least len + 1; out left empty); -1 with a message in err (out
 * left empty). */
int rank_gguf_parse(const uint8_t *buf, size_t len, uint64_t file_size, rank_gguf_header *out,
                    uint64_t *need, char *err, size_t errlen);
void rank_gguf_header_free(rank_gguf_header *h);

/* The pair named key, or NULL (a linear search: metadata is short). */
const rank_gguf_kv *rank_gguf_kv_find(const rank_gguf_header *h, const char *key);
/* The tensor named name, or NULL (a binary search). */
const rank_gguf_tensor *rank_gguf_header_tensor(const rank_gguf_header *h, const char *name);

/* An open GGUF file: its checked header and a descriptor for pread. */
typedef struct rank_gguf_file {
  char *path;
  int fd;
  uint64_t file_size;
  rank_gguf_header h;
} rank_gguf_file;

/* Opens and checks a file (reads its header only; a FIFO or device is
 * refused without blocking). Errors are logged once as "PATH: ...";
 * returns SP_OK, SP_ERR_INPUT (a bad file) or SP_ERR_RUNTIME (I/O). */
int rank_gguf_open(const char *path, rank_gguf_file **out);
void rank_gguf_close(rank_gguf_file *f);

/* A string value used as a name (general.architecture, ...): the string,
 * or NULL when key is absent (silent) or is not a STRING, or holds a NUL
 * or invalid UTF-8 (logged, naming the file and the key). */
const char *rank_gguf_meta_name(const rank_gguf_file *f, const char *key);
/* An integer value of any integer type, >= 0: 0 and *out, or -1 when key
 * is absent (silent) or holds something else (logged). */
int rank_gguf_meta_u64(const rank_gguf_file *f, const char *key, uint64_t *out);

/* The tensor named name, or NULL. */
const rank_gguf_tensor *rank_gguf_tensor_find(const rank_gguf_file *f, const char *name);

/* Reads n bytes at offset off of tensor t's data into dst (pread, retried
 * on short reads); off + n inside the tensor. Logs and returns
 * SP_ERR_RUNTIME on an I/O failure, SP_ERR_INPUT if the file shrank. */
int rank_gguf_read(const rank_gguf_file *f, const rank_gguf_tensor *t, uint64_t off, void *dst,
                   size_t n);

#endif
