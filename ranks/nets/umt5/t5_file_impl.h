/* Internals the T5 file's reader (t5_file.c) and writer (t5_writer.c)
 * share: how the tokenizer group is stored (t5_file.h). */
#ifndef RANK_T5_FILE_IMPL_H
#define RANK_T5_FILE_IMPL_H

#include "t5_file.h"
#include "umt5_schema.h"

#define T5_TOK_DATASETS 5 /* piece_bytes, piece_offsets, scores, types, charsmap */

#endif
