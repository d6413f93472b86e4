/* The VAE's model file (HDF5) and synthetic VAEs, behind one handle.
 *
 * The same container as the DiT's (model_container.h, MODEL.md "Model
 * file"): root attributes format = "staticpipe", format_version, arch =
 * VAE_MODEL_ARCH, preset (may be ""), dtype ("bf16"|"fp32"), checksum and
 * the VAE's config (int64: dim, z_dim, n_mult, dim_mult (n_mult entries),
 * num_res_blocks, temporal_up (n_mult - 1 entries, absent when n_mult is
 * 1), encoder = 1 when the file holds the encoder, absent otherwise); the
 * group /decoder with one contiguous unfiltered dataset per tensor of
 * wan_vae_table, named by its official key (/decoder/conv2.weight,
 * /decoder/decoder.conv1.weight, ...), and with the encoder the group
 * /encoder with one per tensor of the encoder's table (/encoder/
 * encoder.conv1.weight, ..., /encoder/conv1.weight), each dataset with
 * attributes dtype and checksum (CRC-32C of its bytes). The decoder's
 * datasets come first in the checksum's order, so a decoder-only file is
 * what it was before the encoder existed. ranks/nets/wan_vae/VAE.md
 * "Model file and checkpoint keys" describes it.
 *
 * A spec "synth:PRESET[:SEED]" (presets wan2.1-vae, the published config,
 * and wan2.1-vae-tiny, the same structure at dim 8; both with the encoder)
 * opens a synthetic VAE instead: the same API, every tensor generated in
 * fp32 when it is read, by the DiT's generator core (synth.h) keyed by the
 * tensor's official key and scaled to keep activations of order one (conv
 * weights uniform with variance 1/fan_in, biases within 0.05, RMS gammas
 * within 0.1 of 1). */
#ifndef RANK_VAE_FILE_H
#define RANK_VAE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "kern_dtype.h"
#include "model_id.h"
#include "wan_vae.h"
#include "wan_vae_enc.h"
#include "wan_vae_schema.h"

#define VAE_MODEL_ARCH WAN_VAE_ARCH

typedef struct vae_model vae_model;

typedef struct vae_model_info {
  wan_vae_config config; /* config.encoder: the file can encode */
  model_file_id id;      /* id.checksum over the datasets' CRCs in table order */
  model_file_size size;  /* the file's: the decoder's table, and the encoder's with it */
  int enc_tensors;       /* the encoder's table (wan_vae_enc.h); 0 without it */
  int64_t enc_params;
} vae_model_info;

/* What a VAE without the encoder is told when asked to encode (after
 * "SOURCE: "). */
#define VAE_MODEL_NO_ENCODER                                                                  \
  "this VAE file holds only the decoder (no /encoder): encoding needs a file converted from a " \
  "checkpoint with the encoder (the published Wan2.1_VAE.pth, ComfyUI's wan_2.1_vae.safetensors " \
  "or diffusers' AutoencoderKLWan), init --encoder, or synth:wan2.1-vae[-tiny]"


/* Known VAE presets: fills out and returns 0, or -1 for an unknown name. */
int vae_preset(const char *name, wan_vae_config *out);
/* The preset whose config equals c, or NULL. */
const char *vae_preset_match(const wan_vae_config *c);
/* The preset names, for messages and help: "wan2.1-vae, wan2.1-vae-tiny". */
const char *vae_preset_names(void);

/* Opens a VAE file read-only and validates its root attributes and every
 * dataset's layout (as rank_model_open does), without reading weights; or
 * parses a synth: spec. A staticpipe file of another arch (a DiT) is
 * refused with a line naming both archs. verify = 1 checks every dataset's
 * checksum when it is read. Returns SP_OK, SP_ERR_INPUT or SP_ERR_RUNTIME,
 * errors logged once naming the file, the dataset and the check. */
int vae_model_open(const char *spec, int verify, vae_model **out);
void vae_model_close(vae_model *m);
const vae_model_info *vae_model_get_info(const vae_model *m);

/* Reads every tensor as fp32 into packed, laid out by the table of the
 * model's config (wan_vae_table_make: packed_floats >= the table's
 * packed_floats, padding zeroed); bf16 files are widened exactly. With
 * verify set, every dataset's checksum is checked (a mismatch names the
 * dataset). Returns SP_OK, SP_ERR_INPUT (damaged file, logged) or
 * SP_ERR_RUNTIME (buffer too small, logged). */
int vae_model_read(vae_model *m, float *packed, int64_t packed_floats);

/* Reads every encoder tensor as fp32 into packed, laid out by the encoder's
 * table (wan_vae_enc_table_make of the model's config), as vae_model_read.
 * A model without the encoder is SP_ERR_INPUT (logged:
 * VAE_MODEL_NO_ENCODER). */
int vae_model_read_encoder(vae_model *m, float *packed, int64_t packed_floats);

/* Reads every dataset: every checksum, every weight finite (the line names
 * the dataset and the element); *bytes the bytes read. A synth: model has
 * nothing stored: SP_OK at once. */
int vae_model_verify(vae_model *m, uint64_t *bytes);

/* ---- writer: a temporary file beside path, renamed into place on commit;
 * abort, a failure or SIGINT/SIGTERM removes it. */
typedef struct vae_model_writer vae_model_writer;

/* Checks c (SP_ERR_INPUT, logged) and starts the file; preset may be NULL. */
int vae_model_writer_open(const char *path, const wan_vae_config *c, kern_dtype dtype,
                          const char *preset, vae_model_writer **out);
/* Extra root attribute "meta.KEY" (model_container.h). */
int vae_model_writer_attr(vae_model_writer *w, const char *key, const char *value);
/* One tensor of the table, data fp32 (numel floats, the table's count);
 * stored in the file's dtype (bf16 rounded to nearest even). A name not in
 * the table, a wrong count or a second write is SP_ERR_INPUT (logged). */
int vae_model_writer_put(vae_model_writer *w, const char *name, const float *data,
                         int64_t numel);
/* Checks every tensor was written, writes the checksum, renames into place;
 * frees w either way. */
int vae_model_writer_commit(vae_model_writer *w);
void vae_model_writer_abort(vae_model_writer *w);

/* The root attribute arch of a staticpipe model file, without validating
 * anything else (for commands to say which kind of file they were given).
 * Returns 0, or -1 when path is no HDF5 file or has no arch (not logged). */
int model_file_arch(const char *path, char *arch, size_t n);

#endif
