/* The container steps (model_container.h) that every network's model file
 * reader and writer take alike, in one place: the reader's open of a file
 * with its root attributes into the handle's id; the reader of a table
 * model (the VAE decoder's, the text encoder's: one dataset per entry of
 * the network's table in one group, read as fp32); and the writer's file
 * (written atomically, h5_util.h) with its root attributes, its failures
 * named "PATH: cannot write the model file (WHAT)", the meta attributes,
 * the datasets and the commit with the model checksum. */
#ifndef RANK_CONTAINER_IO_H
#define RANK_CONTAINER_IO_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "h5_util.h"
#include "kern_dtype.h"
#include "model_container.h"
#include "model_id.h"

/* ---- reading --------------------------------------------------------- */

/* Opens path for validation (rank_container_open) and reads its root
 * attributes (rank_container_read_root, arch want_arch) into id: arch,
 * preset, dtype and the stored checksum; *fp8 (when fp8 is not NULL) says
 * whether the root dtype is "fp8". SP_OK with *file open, for the caller
 * to end with rank_container_open_end; or the logged status, nothing open. */
int rank_container_open_id(const char *path, const char *want_arch, model_file_id *id, int *fp8,
                           hid_t *file);

/* Where a table model's weights are read from. */
typedef struct rank_table_reader {
  int fd;           /* -1 for synth: */
  int verify;       /* every dataset's checksum checked as it is read */
  uint64_t *offset; /* per table entry: its data's offset in the file */
  uint32_t *crc;    /* per table entry: its stored checksum */
} rank_table_reader;

/* The start of a table model's open: nothing to read from yet, verify as
 * given, id's source spec. Returns 1 when spec is a synth: spec. */
int rank_table_reader_start(rank_table_reader *r, model_file_id *id, const char *spec,
                            int verify);
/* The end of the validation of file path that came to rc: with verify
 * set, the stored model checksum against acc, the one the datasets' CRCs
 * give (rank_container_checksum_check); then rank_container_open_end (the
 * read descriptor into r). Returns rc or the first failure's status. */
int rank_table_reader_end(rank_table_reader *r, hid_t file, const char *path, const char *stored,
                          uint32_t acc, int rc);
/* Reads count tensors t stored in id's dtype as fp32 (rank_container_read_f32,
 * stage as it says), names[k] t[k]'s name in group: SP_OK, or SP_ERR_INPUT
 * after one line naming id's source and the dataset "/GROUP/NAME". */
int rank_table_reader_read(const rank_table_reader *r, const model_file_id *id, const char *group,
                           int count, const rank_container_f32 *t, const char *const *names,
                           uint16_t *stage);
/* Closes the descriptor and frees the offsets and CRCs. */
void rank_table_reader_close(rank_table_reader *r);

/* ---- writing --------------------------------------------------------- */

/* Starts a model file at path (rank_h5_out_open) with the container's root
 * attributes (rank_container_write_root). SP_OK, or the logged status with
 * nothing left behind. */
int rank_container_out_open(rank_h5_out *o, const char *path, const char *arch,
                            const char *preset, kern_dtype dtype);
/* Logs "PATH: cannot write the model file (what)"; returns SP_ERR_RUNTIME. */
int rank_container_out_fail(const rank_h5_out *o, const char *what);
/* An extra root attribute "meta.KEY" (rank_container_write_meta). */
int rank_container_out_meta(rank_h5_out *o, const char *key, const char *value);
/* Dataset ds (rank_container_write_dataset), its CRC in *crc; a failure
 * is logged naming the file and ds: SP_OK or SP_ERR_RUNTIME. */
int rank_container_out_dataset(rank_h5_out *o, const char *ds, kern_dtype dtype, int ndim,
                               const int64_t *shape, const void *data, size_t bytes,
                               uint32_t *crc);
/* Writes the model checksum acc, closes and renames into place
 * (rank_container_commit); after a failure the temporary file is removed. */
int rank_container_out_commit(rank_h5_out *o, uint32_t acc);

#endif
