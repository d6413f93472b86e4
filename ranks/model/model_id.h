/* What every model file handle reports about its weights, whichever
 * network it holds (the DiT's rank_model_info, the VAE decoder's
 * vae_model_info, the text encoder's t5_model_info): where they come from,
 * their arch, preset, stored dtype and model checksum. One struct, so the
 * readers fill it one way and the commands print it one way. */
#ifndef RANK_MODEL_ID_H
#define RANK_MODEL_ID_H

#include <stddef.h>
#include <stdint.h>

#include "kern_dtype.h"

typedef struct model_file_id {
  /* As stored: the VAE's and the encoder's reads always give fp32; a DiT
   * fp8 file's block linear weights are e4m3 (rank_model_info fp8). */
  kern_dtype dtype;
  char arch[32];
  char preset[64];   /* "" when the config matches no preset */
  char source[1024]; /* the path, or the synth: spec */
  int synthetic;     /* 1 for synth: */
  uint64_t seed;     /* synth: only */
  /* For a file "crc32c:XXXXXXXX", the CRC-32C over its datasets' CRCs in
   * the writer's order (model_container.h; checked against them at open
   * when verify is set); for synth: "synth:PRESET:SEED:vN" (N the
   * generator's version), since its weights are never all made. */
  char checksum[96];
} model_file_id;

/* The size of a model whose tensors come from one table (the VAE
 * decoder's, the text encoder's). */
typedef struct model_file_size {
  int tensors;        /* entries of the table */
  int64_t params;     /* parameters of the network */
  int64_t file_bytes; /* bytes of the weights as stored (0 for synth:) */
} model_file_size;

/* 1 when spec names a synthetic model (synth:...), not a file. */
int rank_model_spec_is_synth(const char *spec);
/* Sets the source to spec; returns 1 when spec is a synth: spec (the
 * handle is then opened synthetic), 0 for a file. */
int model_file_id_start(model_file_id *id, const char *spec);
/* A synthetic model's id from spec "synth:PRESET[:SEED]": synthetic, its
 * preset and seed, arch and dtype as given, the checksum of the spec.
 * SP_OK, or SP_ERR_INPUT after one line naming the spec. */
int model_file_id_synth(model_file_id *id, const char *spec, const char *arch, kern_dtype dtype);
/* Logs "SOURCE: unknown KINDpreset 'PRESET' (known: KNOWN)" (kind "" or
 * a noun and a space, "VAE ") and returns SP_ERR_INPUT. */
int model_file_id_bad_preset(const model_file_id *id, const char *kind, const char *known);
/* Names the preset match (or NULL) when the file named none. */
void model_file_id_match(model_file_id *id, const char *match);

/* tensors and params as given; file_bytes params in id's dtype, 0 for a
 * synthetic model. */
void model_file_size_set(model_file_size *s, const model_file_id *id, int tensors,
                         int64_t params);

#endif
