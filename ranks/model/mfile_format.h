/* The ways a tensor can be stored in a model file, one row each: the
 * dataset attribute dtype names the row, and the reader takes every
 * dataset's own (a tensor's dtype is per dataset, reported per tensor);
 * and the root dtypes, which say which row each tensor of a file takes.
 *
 * A row: its name, how HDF5 holds it (unsigned integers or float32,
 * little-endian, of elem bytes; or 0 for a block format kept as bytes,
 * rows x row bytes of uint8, the tensor's own shape in the dataset's
 * attribute shape), whether a float32 dataset NAME.scale of one scale per
 * row (output channel) goes beside it (MODEL.md "fp8 weights", "int8
 * weights"), and its conversions to and from fp32. The bytes of a row of
 * cols values and the block a row is made of are kern_quant.h's table
 * (kern_qfmt_bytes): a stored format is a row of that table, a kern_dtype
 * and a row here; a root dtype that uses it is a row of mfile_roots. */
#ifndef RANK_MFILE_FORMAT_H
#define RANK_MFILE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "kern_dtype.h"
#include "net_schema.h"

typedef struct mfile_format {
  kern_dtype dtype;
  const char *name;     /* the dataset attribute dtype */
  int is_float;         /* HDF5 type: float (else unsigned integer) */
  size_t elem;          /* bytes of one value (0: a block format stored as uint8 rows) */
  int scaled;           /* NAME.scale (rows) float32 beside it */
  /* rows x cols stored values (with scale (rows) when scaled) to fp32. */
  void (*widen)(const void *src, const float *scale, int64_t rows, int64_t cols, float *dst);
  /* rows x cols fp32 values (finite) to stored ones, and their scales when
   * scaled; NULL for GGUF's block formats but Q8_0 (ggml's rule), which
   * have no quantiser here (their bytes come from a GGUF file as they
   * are). */
  void (*narrow)(const float *src, int64_t rows, int64_t cols, void *dst, float *scale);
  /* The index of the first of n stored values (n a whole number of blocks)
   * that is NaN or infinite (a block format's: as dequantised; a scaled
   * format's before its scale), or n. */
  int64_t (*first_nonfinite)(const void *p, int64_t n);
} mfile_format;

/* The row of dtype, or NULL. */
const mfile_format *mfile_format_of(kern_dtype dtype);
/* Values per block along a row of f (1 but for GGUF's block formats). */
int mfile_format_block(const mfile_format *f);
/* Bytes of one row of cols values stored as f (cols a multiple of its block). */
uint64_t mfile_row_bytes(const mfile_format *f, int64_t cols);
/* 1 when tensor t can be stored as f: its rows are whole blocks. */
int mfile_format_fits(const mfile_format *f, const net_tensor *t);
/* Bytes of tensor t stored as f (its scales not counted). */
uint64_t mfile_format_bytes(const mfile_format *f, const net_tensor *t);
/* The dimensions of t's dataset stored as f into dims: its shape for a
 * format of values, (rows, row bytes) for a block format. Returns ndim. */
int mfile_format_dims(const mfile_format *f, const net_tensor *t, int64_t *dims);
/* The rows (output channels: the first dimension) and the values per row of t. */
int64_t mfile_tensor_rows(const net_tensor *t);
int64_t mfile_tensor_cols(const net_tensor *t);
/* The first scale of n that is not finite and positive (the rule of every
 * stored scale, written and read), or -1. */
int64_t mfile_bad_scale(const float *scale, int64_t n);

/* A root dtype: what the root attribute dtype says of every tensor of the
 * file, by its table entry: a tensor the schema marks quant may be stored
 * in any of quant, every other in any of rest; the writer stores each in
 * the first of its list, the reader takes any (the dataset's attribute
 * says which). */
#define MFILE_MAX_ALLOWED 16
typedef struct mfile_root {
  const char *name; /* "bf16", "fp32", "fp8", "int8", "quant", "quant-fp32" */
  int nrest;
  kern_dtype rest[MFILE_MAX_ALLOWED];
  int nquant;
  kern_dtype quant[MFILE_MAX_ALLOWED];
} mfile_root;

/* The row named name, or NULL. */
const mfile_root *mfile_root_named(const char *name);
/* The formats tensor t may be stored in under root r, the writer's first:
 * their count, the list in *allowed. */
int mfile_root_allowed(const mfile_root *r, const net_tensor *t, const kern_dtype **allowed);
/* The stored format the writer gives tensor t in a file of root r. */
kern_dtype mfile_root_format(const mfile_root *r, const net_tensor *t);

#endif
