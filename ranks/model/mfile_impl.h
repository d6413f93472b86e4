/* Internals the model-file layer's reader (mfile_open.c, mfile_read.c),
 * writer (mfile_write.c) and config attributes (mfile_attrs.c) share. */
#ifndef RANK_MFILE_IMPL_H
#define RANK_MFILE_IMPL_H

#include <hdf5.h>

#include "mfile.h"

/* Where one tensor's data is in an open file. */
typedef struct mfile_loc {
  kern_dtype dtype;      /* as stored */
  uint64_t offset;       /* of its data */
  uint64_t bytes;        /* of its data (its scales not counted) */
  uint32_t crc;          /* its checksum attribute */
  uint64_t scale_offset; /* a scaled format's NAME.scale */
  uint32_t scale_crc;
} mfile_loc;

struct mfile {
  const net_schema *schema;
  model_file_id id;
  const mfile_root *root;
  void *config;       /* (schema->config_size) */
  int ntensors;
  net_tensor *t;      /* (ntensors) */
  mfile_loc *loc;     /* (ntensors) */
  int ngroups;
  net_group *g;       /* (ngroups) */
  int fd;             /* -1 for synth: */
  int verify;
  int keep_stage;
  void *stage;        /* widening reads' staging, kept when keep_stage */
  size_t stage_bytes;
};

/* mfile_attrs.c: the schema's config attributes of file (path names it)
 * into config (zeroed first), then its check. SP_OK or SP_ERR_INPUT, one
 * line naming the attribute. */
int mfile_attrs_read(hid_t file, const char *path, const net_schema *s, void *config);
/* The config's attributes onto file in the schema's order. 0 or -1. */
int mfile_attrs_write(hid_t file, const net_schema *s, const void *config);

/* mfile_open.c: the groups and tensors of a checked config, allocated
 * (free both). */
void mfile_tables(const net_schema *s, const void *config, net_group **g, int *ng,
                  net_tensor **t, int *nt);

/* The name of a scaled format's scale dataset of dataset path ds. */
#define MFILE_SCALE_SUFFIX ".scale"
void mfile_scale_path(const char *ds, char *buf, size_t n);

/* mfile_read.c: value k (flattened) of synthetic tensor t, seed given. */
void mfile_synth_values(const net_tensor *t, uint64_t seed, int64_t first, int64_t n,
                        kern_dtype dtype, void *dst);

#endif
