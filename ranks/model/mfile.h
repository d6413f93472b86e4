/* The model-file layer: every network's HDF5 model file (MODEL.md "Model
 * file") opened, validated, checksummed, read and written in one place,
 * from the network's schema (ranks/nets/net_schema.h).
 *
 * A file: root attributes format = "staticpipe", format_version, arch,
 * preset, dtype (a root dtype of mfile_format.h), checksum and the
 * schema's config attributes; the schema's groups; one contiguous,
 * unfiltered dataset per tensor of the table with attributes dtype (its
 * stored format, per dataset) and checksum (the CRC-32C of its bytes), a
 * scaled format's float32 NAME.scale beside it; nothing else, no soft,
 * external or hard links. The model checksum "crc32c:XXXXXXXX" is the
 * CRC-32C of every dataset's CRC (4 bytes little-endian) in table order, a
 * scale's right after its tensor's, then those a hook adds.
 *
 * A spec "synth:PRESET[:SEED]" opens a synthetic model instead: the same
 * handle and reads, every tensor generated when it is read (synth.h's
 * generator keyed by the tensor's synth_prefix + key, the schema's
 * distribution), stored in the schema's synth_dtype.
 *
 * Errors are logged once, naming the file, the dataset and the check;
 * statuses SP_OK, SP_ERR_INPUT (a bad file or spec) or SP_ERR_RUNTIME. */
#ifndef RANK_MFILE_H
#define RANK_MFILE_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "kern_dtype.h"
#include "mfile_format.h"
#include "model_id.h"
#include "net_schema.h"

/* What a network adds to its file beyond the table: the datasets of its
 * foreign groups (net_group.foreign), whose CRCs the model checksum folds
 * after the tensors'. Each returns SP_OK or a logged status. */
typedef struct mfile_hooks {
  /* Validates them in file (path names it in messages) and folds their
   * CRCs into *acc. */
  int (*read)(void *ctx, hid_t file, const char *path, uint32_t *acc);
  /* Writes them (after the groups and config, before any tensor); their
   * CRCs into crc (*n of them, at most MFILE_MAX_EXTRA). Returns 0 or -1:
   * the writer logs "cannot write WHAT". */
  int (*write)(void *ctx, hid_t file, uint32_t *crc, int *n);
  const char *what; /* "the tokenizer" */
  void *ctx;
} mfile_hooks;
#define MFILE_MAX_EXTRA 8

/* ---- reading ---------------------------------------------------------- */

typedef struct mfile mfile;

/* Opens spec, a file or a synth: spec of schema s: a file's root
 * attributes (a staticpipe file of another arch is refused naming both),
 * config (read and checked), links, groups and every dataset (name,
 * shape, stored format among those its root dtype allows, storage,
 * checksum attribute), its hooks' groups, and with verify the stored
 * model checksum against its datasets'. No weight is read. verify also
 * makes every read check each dataset's checksum. hooks may be NULL. */
int mfile_open(const char *spec, const net_schema *s, const mfile_hooks *hooks, int verify,
               mfile **out);
void mfile_close(mfile *m);

/* The config struct (the schema's), the id (arch, preset, source,
 * synthetic and seed, the root dtype's rest in id.dtype, the model
 * checksum its datasets give), the root dtype and the table. */
const void *mfile_config(const mfile *m);
const model_file_id *mfile_id(const mfile *m);
const mfile_root *mfile_root_dtype(const mfile *m);
int mfile_count(const mfile *m);
const net_tensor *mfile_tensor(const mfile *m, int i);
/* Tensor i's stored format, and its bytes in the file (a scale included). */
kern_dtype mfile_stored(const mfile *m, int i);
uint64_t mfile_stored_bytes(const mfile *m, int i);
/* The index of the tensor of group/name, or -1. */
int mfile_find(const mfile *m, const char *group, const char *name);

/* One tensor to read: as stored (its format's bytes; a scaled format's
 * scales into scale (rows) when it is not NULL), or widen: as fp32. */
typedef struct mfile_dst {
  int tensor;
  void *dst;
  int widen;
  float *scale;
} mfile_dst;

/* Reads n tensors, all datasets with several threads (pread at the
 * offsets the validation recorded), each checked against its checksum
 * when verifying; a widened scaled format's scales are first checked
 * finite and positive (naming the dataset and the channel). Adds the bytes
 * read from the file (0 for synth:) to *bytes_read when it is not NULL.
 * dsts are undefined after a failure. One thread at a time per handle. */
int mfile_read(mfile *m, int n, const mfile_dst *d, uint64_t *bytes_read);
/* Keeps the staging a widening read needs between reads (memory for
 * speed, where a caller reads one layer after another). */
void mfile_keep_stage(mfile *m);
/* Rows [row0, row0 + nrows) of tensor i as fp32 into dst (nrows x cols),
 * without checksums (the rows alone are read). */
int mfile_read_rows(mfile *m, int i, int64_t row0, int64_t nrows, float *dst);
/* Reads tensor i whole in pieces of about piece_bytes stored, each
 * widened to fp32 and given to fn (rows row0 .. row0 + nrows, cols per
 * row) as it passes, its checksum checked at the end; fn's non-zero
 * return stops the scan and is returned. */
typedef int (*mfile_scan_fn)(void *ctx, int64_t row0, int64_t nrows, const float *values);
int mfile_scan(mfile *m, int i, uint64_t piece_bytes, mfile_scan_fn fn, void *ctx);
/* Every tensor read (mfile_scan): every checksum, every scale, every
 * value finite ("SOURCE: DATASET: element K is NaN: the weights are not
 * usable"); *bytes the bytes read. A synth: model has nothing stored: SP_OK. */
int mfile_verify(mfile *m, uint64_t *bytes);

/* The dataset path of tensor t ("/blocks/0003/ffn.0.weight"). */
void mfile_tensor_path(const net_tensor *t, char *buf, size_t n);

/* ---- writing ---------------------------------------------------------- */

/* Written to a temporary file beside path and renamed into place on
 * commit; abort (or any failure, or SIGINT/SIGTERM) removes it, leaving an
 * existing file at path untouched; a full disk leaves no HDF5 identifier
 * open. */
typedef struct mfile_writer mfile_writer;

/* Checks config (the schema's check; "PATH: REASON", SP_ERR_INPUT) and
 * starts the file: root attributes (root one of the schema's root
 * dtypes, preset NULL or ""), the config attributes in the schema's
 * order, the groups, then hooks' write (may be NULL). */
int mfile_writer_open(const char *path, const net_schema *s, const void *config,
                      const char *root, const char *preset, const mfile_hooks *hooks,
                      mfile_writer **out);
/* A root attribute "meta.KEY" (foreign metadata, namespaced so it never
 * shadows the container's); an existing key is kept. */
int mfile_writer_meta(mfile_writer *w, const char *key, const char *value);
int mfile_writer_count(const mfile_writer *w);
const net_tensor *mfile_writer_tensor(const mfile_writer *w, int i);
/* The format tensor i is stored in (the root dtype's for its entry, until
 * set_format). */
kern_dtype mfile_writer_format(const mfile_writer *w, int i);
/* 1 when the root dtype allows tensor i the format fmt and its rows are
 * whole blocks of it. */
int mfile_writer_allows(const mfile_writer *w, int i, kern_dtype fmt);
/* Stores tensor i as fmt instead, before it is written: one of the formats
 * the root dtype allows it whose blocks its rows fill (a GGUF checkpoint's
 * tensors keep their own). SP_OK, or SP_ERR_INPUT after one line. */
int mfile_writer_set_format(mfile_writer *w, int i, kern_dtype fmt);
/* Every quantisable tensor (net_tensor.quant) that takes fmt stored in it
 * (a quant file of Q8_0 linear weights). SP_OK or set_format's status. */
int mfile_writer_set_quant(mfile_writer *w, kern_dtype fmt);
/* The index of the tensor of group/name, or -1. */
int mfile_writer_find(const mfile_writer *w, const char *group, const char *name);

/* Values [first, first + count) of tensor i (flattened), parts of one
 * tensor in order and one tensor at a time, given as fp32 (given
 * KERN_DTYPE_F32: narrowed to its format, bf16 to nearest even) or as
 * stored (given its format). A scaled format takes the whole tensor at
 * once: as fp32 it is quantised per row, as stored it comes with scale
 * (rows), each finite and positive; its scales are written as NAME.scale
 * right after it. A block format (GGUF's) takes its bytes whole, never
 * fp32 (no quantiser here). A tensor not of the table, a second write, a part out
 * of order or a wrong size is SP_ERR_INPUT; a failed write SP_ERR_RUNTIME
 * ("PATH: DATASET: HDF5 write failed (disk full?)"). */
typedef struct mfile_put {
  int tensor;
  kern_dtype given;
  const void *data;
  int64_t first, count;
  const float *scale;
} mfile_put;
int mfile_writer_put(mfile_writer *w, const mfile_put *p);
/* Checks every tensor was written, writes the model checksum, closes and
 * renames into place. The writer is freed either way. */
int mfile_writer_commit(mfile_writer *w);
void mfile_writer_abort(mfile_writer *w);

/* The root attribute arch of a staticpipe model file, without validating
 * anything else. 0, or -1 when path is no HDF5 file or has no arch (not
 * logged). */
int mfile_arch(const char *path, char *arch, size_t n);

#endif
