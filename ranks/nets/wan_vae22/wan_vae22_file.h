/* The Wan 2.2 VAE's model file (HDF5) and synthetic VAEs, behind one
 * handle: the model-file layer (ranks/model/mfile.h) with the VAE's schema
 * (wan_vae22_schema.h). A file holds both parts, the decoder in /decoder
 * and the encoder in /encoder, one dataset per tensor named by its
 * official key; "synth:wan2.2-vae[-tiny][:SEED]" generates every tensor in
 * fp32 when it is read (the schema's distribution). VAE22.md "Model file"
 * describes it. */
#ifndef WAN_VAE22_FILE_H
#define WAN_VAE22_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "kern_dtype.h"
#include "model_id.h"
#include "wan_vae22.h"

typedef struct wan_vae22_model wan_vae22_model;

typedef struct wan_vae22_info {
  wan_vae22_config config;
  model_file_id id;                        /* id.checksum over every dataset's CRC */
  model_file_size size;                    /* of both parts */
  model_file_size part[WAN_VAE22_PARTS];   /* of each part */
} wan_vae22_info;

/* Whether spec names a Wan 2.2 VAE: synth: with one of its presets, or a
 * staticpipe file whose arch is WAN_VAE22_ARCH (nothing else is read; not
 * logged). */
int wan_vae22_spec_is(const char *spec);

/* Opens a VAE file read-only and validates its root, config and every
 * dataset's layout (no weight is read), or parses a synth: spec. A
 * staticpipe file of another arch (a Wan 2.1 VAE, a DiT) is refused with a
 * line naming both archs. verify = 1 checks every dataset's checksum when
 * it is read. SP_OK, SP_ERR_INPUT or SP_ERR_RUNTIME, logged once. */
int wan_vae22_open(const char *spec, int verify, wan_vae22_model **out);
void wan_vae22_close(wan_vae22_model *m);
const wan_vae22_info *wan_vae22_get_info(const wan_vae22_model *m);

/* Reads every tensor of part p as fp32 into packed, laid out by the part's
 * table (wan_vae22_table_make; packed_floats at least the table's, the
 * padding zeroed); bf16 files are widened exactly. SP_OK, SP_ERR_INPUT
 * (damaged file, logged) or SP_ERR_RUNTIME (buffer too small, logged). */
int wan_vae22_read(wan_vae22_model *m, wan_vae22_part p, float *packed, int64_t packed_floats);

/* Reads every dataset: every checksum, every weight finite; *bytes the
 * bytes read (0 for synth:). */
int wan_vae22_verify(wan_vae22_model *m, uint64_t *bytes);

/* ---- writer: a temporary file beside path, renamed into place on commit;
 * abort, a failure or SIGINT/SIGTERM removes it. */
typedef struct wan_vae22_writer wan_vae22_writer;

/* Checks c (SP_ERR_INPUT, logged) and starts the file; preset may be NULL. */
int wan_vae22_writer_open(const char *path, const wan_vae22_config *c, kern_dtype dtype,
                          const char *preset, wan_vae22_writer **out);
/* Extra root attribute "meta.KEY". */
int wan_vae22_writer_attr(wan_vae22_writer *w, const char *key, const char *value);
/* One tensor of part p's table, fp32 data (numel floats), stored in the
 * file's dtype. A name not in the table, a wrong count or a second write
 * is SP_ERR_INPUT (logged). */
int wan_vae22_writer_put(wan_vae22_writer *w, wan_vae22_part p, const char *name,
                         const float *data, int64_t numel);
/* Checks every tensor was written, writes the checksum, renames into
 * place; frees w either way. */
int wan_vae22_writer_commit(wan_vae22_writer *w);
void wan_vae22_writer_abort(wan_vae22_writer *w);

#endif
