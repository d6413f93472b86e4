/* The HDF5 container every staticpipe model file shares, whatever network
 * it holds (the DiT's model_file.h, the VAE decoder's vae_file.h): root
 * attributes format, format_version, arch, preset, dtype and checksum;
 * contiguous unfiltered datasets with attributes dtype and checksum
 * (CRC-32C of their bytes, bf16 stored as 16-bit unsigned integers); no
 * soft or external links; the model checksum "crc32c:XXXXXXXX", the CRC-32C
 * of every dataset's CRC (4 bytes, little-endian) in table order.
 *
 * The readers validate through these checks and read the bytes with pread()
 * at the offsets the validation recorded; the writers write through the
 * same helpers, so the two files cannot drift apart. Checks log once
 * ("FILE: DATASET: what failed") and return SP_OK / SP_ERR_INPUT. */
#ifndef RANK_MODEL_CONTAINER_H
#define RANK_MODEL_CONTAINER_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "h5_util.h"
#include "kern_dtype.h"
#include "model_file.h"

/* The root attributes every model file has, besides its config. */
typedef struct rank_container_root {
  char arch[32];
  kern_dtype dtype;  /* of every tensor but an fp8 file's e4m3 ones */
  int fp8;           /* root dtype "fp8" (a DiT only: MODEL.md "fp8 weights") */
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

/* Checks format and format_version, and that arch is want_arch: a file of
 * another known arch is refused with one line naming both ("X is a
 * wan2.1-vae model (a VAE decoder); this command needs a wan2.1-t2v DiT").
 * Reads dtype ("bf16"|"fp32", and for want_arch WAN_ARCH "fp8": bf16 with
 * the blocks' linear weights in e4m3), preset and checksum into out. */
int rank_container_read_root(hid_t file, const char *path, const char *want_arch,
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

/* One dataset ds (a full path): present, a dataset, contiguous, unfiltered,
 * data inside the file, dtype (type and attribute) as given (E4M3: 8-bit
 * unsigned integers, attribute "fp8_e4m3"), shape and
 * storage size as given, a checksum attribute. Fills its data's byte
 * offset and its stored CRC. */
int rank_container_check_dataset(hid_t file, const char *path, const char *ds, kern_dtype dtype,
                                 int ndim, const int64_t *shape, size_t bytes, uint64_t *offset,
                                 uint32_t *crc);

/* One tensor of a group as the file must hold it. */
typedef struct rank_container_tensor {
  const char *name; /* the dataset's name in its group */
  int ndim;
  const int64_t *shape; /* (ndim) */
  int64_t numel;
} rank_container_tensor;

/* Group "/group" holds exactly the count tensors t (check_members), each a
 * dataset of dtype passing check_dataset; sets *offset and *crc to arrays
 * of count (the caller frees them, after a failure too) with each
 * dataset's data offset and stored CRC, and folds the CRCs into *acc in
 * table order. SP_OK, or the first failure's logged status. */
int rank_container_check_tensors(hid_t file, const char *path, const char *group, kern_dtype dtype,
                                 int count, const rank_container_tensor *t, uint64_t **offset,
                                 uint32_t **crc, uint32_t *acc);

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

/* One tensor to read as fp32. */
typedef struct rank_container_f32 {
  uint64_t offset; /* of its data in the file */
  uint32_t crc;    /* the stored checksum */
  int64_t numel;
  float *dst; /* (numel) */
} rank_container_f32;

/* Reads count tensors stored as dtype (fp32 or bf16) into their dst as
 * fp32 through rank_container_pread: fp32 lands in place, bf16 passes
 * through stage (room for the sum of the numels) and is widened. Returns
 * as rank_container_pread (-1, or the failed tensor's index with *err_no
 * and *got_crc); logs nothing; dsts are undefined after a failure. */
int rank_container_read_f32(int fd, kern_dtype dtype, int count, const rank_container_f32 *t,
                            int verify, uint16_t *stage, int *err_no, uint32_t *got_crc);

/* ---- the model checksum ---------------------------------------------- */

/* Folds one dataset's CRC into the model checksum (start from 0). */
uint32_t rank_container_checksum_add(uint32_t acc, uint32_t crc);
/* "crc32c:XXXXXXXX". */
void rank_container_checksum_str(uint32_t acc, char *buf, size_t n);
/* The stored model checksum against acc, the one its datasets' checksums
 * give: SP_OK, or SP_ERR_INPUT after one line naming path and both. */
int rank_container_checksum_check(const char *path, const char *stored, uint32_t acc);

/* ---- writing --------------------------------------------------------- */

/* format, format_version, arch, preset and dtype on the root of file
 * (KERN_DTYPE_E4M3: "fp8").
 * Returns 0 or -1 (the caller logs). */
int rank_container_write_root(hid_t file, const char *arch, const char *preset, kern_dtype dtype);
/* A string attribute "meta.KEY" (foreign metadata is namespaced so it can
 * never shadow the container's attributes); an existing key is kept.
 * Returns 0 or -1. */
int rank_container_write_meta(hid_t file, const char *key, const char *value);
/* A contiguous dataset ds of dtype and shape from data (bytes of that
 * dtype) with its dtype and checksum attributes; its CRC in *crc. Returns
 * 0 or -1 (the caller logs). */
int rank_container_write_dataset(hid_t file, const char *ds, kern_dtype dtype, int ndim,
                                 const int64_t *shape, const void *data, size_t bytes,
                                 uint32_t *crc);
/* Writes the model checksum acc, closes o's file (rank_h5_out_close) and
 * renames it onto its path. Logs failures naming the path; returns SP_OK or
 * SP_ERR_RUNTIME (the caller aborts o). */
int rank_container_commit(rank_h5_out *o, uint32_t acc);

#endif
