/* The UMT5 text encoder's model file as data (net_schema.h; UMT5.md
 * "Model file"): the config as int64 root attributes, the group /encoder
 * with one dataset per tensor of the table (umt5.h), named by Wan's key,
 * and the group /tokenizer, whose datasets the T5 file's reader and writer
 * (ranks/nets/umt5/t5_file.h) handle; the presets umt5-xxl (the published
 * config) and umt5-tiny (UMT5.md "Config"), and the synthetic generator's
 * scales. */
#ifndef UMT5_SCHEMA_H
#define UMT5_SCHEMA_H

#include "net_schema.h"
#include "umt5.h"

#define UMT5_ARCH "umt5-xxl"
#define UMT5_GROUP "/encoder"
#define UMT5_TOK_GROUP "/tokenizer"

extern const net_schema umt5_schema;

#endif
