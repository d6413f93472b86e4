/* Float32 tensors in HDF5 files: the inputs users give (--cond, --latent,
 * --noise) and the outputs staticpipe writes (pred, latents). Readers check
 * everything a user can get wrong and name the file, the dataset and the
 * check; writers are atomic (temporary file, rename on commit). */
#ifndef RANK_TENSOR_IO_H
#define RANK_TENSOR_IO_H

#include <stdint.h>

#define RANK_TENSOR_MAX_DIMS 8

typedef struct rank_tensor {
  int ndim;
  int64_t dims[RANK_TENSOR_MAX_DIMS];
  int64_t numel;
  float *data; /* owned, free() */
} rank_tensor;

/* Checks a dataset's shape (ndim dims) before any of its data is read;
 * logs one line and returns SP_ERR_INPUT to refuse it, SP_OK to accept. */
typedef int (*rank_tensor_shape_check)(const char *path, const char *name, int ndim,
                                       const int64_t *dims, void *ctx);

/* Reads dataset name from path as float32 (stored float32 or float64;
 * anything else is refused). ndim > 0 requires that rank. Refuses NaN/Inf.
 * Returns SP_OK, or SP_ERR_INPUT after one logged line. */
int rank_tensor_read(const char *path, const char *name, int ndim, rank_tensor *out);
/* The same, with check (when not NULL) called on the shape the file's
 * metadata declares, before memory is allocated or data read: a small file
 * declaring a huge dataset costs nothing to refuse. */
int rank_tensor_read_checked(const char *path, const char *name, int ndim,
                             rank_tensor_shape_check check, void *ctx, rank_tensor *out);
/* The same, every message (check's too: its path argument) naming what
 * instead of the path: "stdin:3: image-latents=x.h5". */
int rank_tensor_read_as(const char *what, const char *path, const char *name, int ndim,
                        rank_tensor_shape_check check, void *ctx, rank_tensor *out);
/* 1 if the file has the dataset, 0 if not, SP_ERR_INPUT (logged) when the
 * file cannot be opened as HDF5. */
int rank_tensor_exists(const char *path, const char *name, int *exists);
void rank_tensor_free(rank_tensor *t);

/* An output file being written (temporary until commit). */
typedef struct rank_outfile rank_outfile;
int rank_outfile_open(const char *path, rank_outfile **out);
/* Writes a whole float32 dataset (ndim dims, C-order data). */
int rank_outfile_put(rank_outfile *o, const char *name, int ndim, const int64_t *dims,
                     const float *data);
/* Creates an unfilled float32 dataset of ndim dims, to be written box by
 * box with rank_outfile_put_box (outputs that arrive in pieces). */
int rank_outfile_create(rank_outfile *o, const char *name, int ndim, const int64_t *dims);
/* Writes the box start[i] .. start[i] + count[i] - 1 of dataset name (one
 * start and count per dimension of the dataset) from data, C-order of
 * shape count. Every put, whole or box, returns SP_OK or SP_ERR_RUNTIME
 * after one logged line naming the file and the dataset. */
int rank_outfile_put_box(rank_outfile *o, const char *name, const int64_t *start,
                         const int64_t *count, const float *data);
int rank_outfile_attr_str(rank_outfile *o, const char *key, const char *value);
int rank_outfile_attr_i64(rank_outfile *o, const char *key, int64_t value);
int rank_outfile_attr_f64(rank_outfile *o, const char *key, double value);
/* Closes and renames into place; frees o either way. */
int rank_outfile_commit(rank_outfile *o);
void rank_outfile_abort(rank_outfile *o);

#endif
