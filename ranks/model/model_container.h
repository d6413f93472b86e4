/* The HDF5 container every staticpipe model file shares, whatever network
 * it holds (mfile.h is the layer over it): root attributes format,
 * format_version, arch, preset, dtype and checksum; contiguous unfiltered
 * datasets with attributes dtype and checksum (CRC-32C of their bytes);
 * no soft or external links; the model checksum "crc32c:XXXXXXXX", the
 * CRC-32C of every dataset's CRC (4 bytes, little-endian) in table order.
 *
 * The reader validates through these checks and reads the bytes with
 * pread() at the offsets the validation recorded; the writer writes
 * through the same helpers, so the two cannot drift apart. Checks log once
 * ("FILE: DATASET: what failed") and return SP_OK / SP_ERR_INPUT. */
#ifndef RANK_MODEL_CONTAINER_H
#define RANK_MODEL_CONTAINER_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "h5_util.h"
#include "kern_dtype.h"
#include "mfile_format.h"
#include "net_schema.h"

#define RANK_MODEL_FORMAT "staticpipe"
#define RANK_MODEL_FORMAT_VERSION 1

/* The root attributes every model file has, besides its config. */
typedef struct rank_container_root {
  char arch[32];
  char dtype[16];    /* the root dtype (mfile_format.h) */
  char preset[64];   /* "" when absent */
  char checksum[96]; /* the stored model checksum */
} rank_container_root;

/* ---- reading --------------------------------------------------------- */

/* Opens path read-only for validation (readable, an HDF5 file, opened by
 * HDF5). Logs and returns SP_ERR_INPUT on failure. */
int rank_container_open(const char *path, hid_t *out);
/* The plain read-only descriptor the weights are pread() from once the
 * file is validated. SP_OK, or SP_ERR_INPUT (logged, naming the path). */
int rank_container_open_fd(const char *path, int *fd);

/* Checks format and format_version, and that arch is want's: a file of
 * another network is refused with one line naming both ("X is a
 * wan2.1-vae model (a VAE decoder); this command needs a wan2.1-t2v DiT").
 * Reads dtype (one of want's root dtypes), preset and checksum into out. */
int rank_container_read_root(hid_t file, const char *path, const net_schema *want,
                             rank_container_root *out);

/* Ends a validation: closes file; when rc is SP_OK, opens path's read
 * descriptor into *fd (rank_container_open_fd). Returns rc, or the open's
 * logged status. */
int rank_container_open_end(hid_t file, const char *path, int rc, int *fd);

/* Refuses soft and external links anywhere in the file. */
int rank_container_check_links(hid_t file, const char *path);

/* The group holds exactly the count objects named (no extra, none missing). */
int rank_container_check_members(hid_t file, const char *path, const char *group,
                                 const char *const *names, int count);

/* What the check of a dataset found. */
typedef struct rank_container_found {
  kern_dtype dtype; /* the format it holds */
  uint64_t offset;  /* of its data */
  uint64_t bytes;
  uint32_t crc;     /* its checksum attribute */
} rank_container_found;

/* Dataset ds (a full path) holds tensor t in one of the nallowed formats:
 * present, a dataset, one name, contiguous, unfiltered, data inside the
 * file, the format its attribute dtype names among those allowed with the
 * HDF5 type that stores it, the shape and storage size it gives t, a
 * checksum attribute; a block format's rows whole blocks and its attribute
 * shape the tensor's. */
int rank_container_check_dataset(hid_t file, const char *path, const char *ds,
                                 const kern_dtype *allowed, int nallowed, const net_tensor *t,
                                 rank_container_found *out);

/* One dataset's bytes to read. */
typedef struct rank_container_read {
  uint64_t offset; /* in the file */
  size_t bytes;
  void *dst;
  uint32_t crc; /* the stored checksum, checked when verify is set */
} rank_container_read;

/* The err_no of a read that met the end of the file (not an errno). */
#define RANK_CONTAINER_SHORT_READ (-1)

/* Reads count datasets from fd with several threads, in pieces checksummed
 * while in cache (joined with crc32c_combine), checking each CRC when
 * verify is set. Returns -1 when all is well, else the index of the first
 * dataset that failed, with *err_no its errno (0: checksum mismatch;
 * RANK_CONTAINER_SHORT_READ: the file ends first) and
 * *got_crc the CRC its data gives. Logs nothing (the caller names the
 * dataset through rank_container_report_read). */
int rank_container_pread(int fd, int count, const rank_container_read *r, int verify,
                         int *err_no, uint32_t *got_crc);
/* The error line for a failed read of dataset ds of source. */
void rank_container_report_read(const char *source, const char *ds, uint32_t want, int err_no,
                                uint32_t got);

/* ---- the model checksum ---------------------------------------------- */

/* Folds one dataset's CRC into the model checksum (start from 0). */
uint32_t rank_container_checksum_add(uint32_t acc, uint32_t crc);
/* "crc32c:XXXXXXXX". */
void rank_container_checksum_str(uint32_t acc, char *buf, size_t n);
/* The stored model checksum against acc, the one its datasets' checksums
 * give: SP_OK, or SP_ERR_INPUT after one line naming path and both. */
int rank_container_checksum_check(const char *path, const char *stored, uint32_t acc);

/* ---- writing --------------------------------------------------------- */

/* format, format_version, arch, preset and dtype (a root dtype) on the
 * root of file. Returns 0 or -1 (the caller logs). */
int rank_container_write_root(hid_t file, const char *arch, const char *preset,
                              const char *dtype);
/* A string attribute "meta.KEY" (foreign metadata is namespaced so it can
 * never shadow the container's attributes); an existing key is kept.
 * Returns 0 or -1. */
int rank_container_write_meta(hid_t file, const char *key, const char *value);
/* A contiguous dataset ds of format f and dims, its space allocated at
 * once; its identifier, or -1. */
hid_t rank_container_create_dataset(hid_t file, const char *ds, const mfile_format *f, int ndim,
                                    const int64_t *dims);
/* Values [first, first + count) of the dataset's total (flattened) from
 * data in f's storage. 0 or -1. */
int rank_container_write_values(hid_t d, const mfile_format *f, const void *data, int64_t first,
                                int64_t count, int64_t total);
/* The dataset's dtype and checksum attributes (a block format's also
 * shape, the int64 dims of tensor t), then closes it. 0 or -1 (closed
 * either way). */
int rank_container_finish_dataset(hid_t d, const mfile_format *f, const net_tensor *t,
                                  uint32_t crc);
/* Writes the model checksum acc, closes o's file (rank_h5_out_close) and
 * renames it onto its path. Logs failures naming the path; returns SP_OK or
 * SP_ERR_RUNTIME (the caller aborts o). */
int rank_container_commit(rank_h5_out *o, uint32_t acc);

#endif
