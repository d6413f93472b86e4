/* Internals the T5 file's reader (t5_file.c) and writer (t5_writer.c)
 * share: where things live and how the config and the tokenizer are
 * stored (t5_file.h). */
#ifndef RANK_T5_FILE_IMPL_H
#define RANK_T5_FILE_IMPL_H

#include <hdf5.h>

#include "t5_file.h"

#define T5_FILE_GROUP "encoder"
#define T5_TOK_GROUP "tokenizer"
#define T5_TOK_DATASETS 5 /* piece_bytes, piece_offsets, scores, types, charsmap */

/* "/encoder/NAME". */
void t5_file_dataset_path(const char *name, char *buf, size_t n);
/* The config as root attributes. Returns 0 or -1 (caller logs). */
int t5_file_config_write(hid_t file, const umt5_config *c);
/* Reads and checks them; logs naming path and the attribute. */
int t5_file_config_read(hid_t file, const char *path, umt5_config *c);
/* Writes spec under /tokenizer; the datasets' CRCs in crc (count in *n).
 * Returns 0 or -1 (caller logs). */
int t5_file_tok_write(hid_t file, const tok_spec *spec, uint32_t *crc, int *n);

#endif
