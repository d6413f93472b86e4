/* Synthetic weights from a counter-based generator keyed by (seed, tensor
 * key, element index): any tensor of any block can be made alone,
 * identically on every machine and thread count, and `init` writes exactly
 * what `synth:` generates. Each network's schema gives every tensor's
 * distribution (net_tensor synth_center, synth_half: for the DiT
 * wan_synth_scale); the model-file layer generates them (mfile.h).
 * rank_synth_tensor (model_file.h) makes one DiT tensor alone. */
#ifndef RANK_SYNTH_H
#define RANK_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#define RANK_SYNTH_VERSION 1

/* Standard uniform in [-1, 1) for (key, index): the generator's core. */
double rank_synth_uniform(uint64_t key, uint64_t index);
uint64_t rank_synth_key(uint64_t seed, const char *name);

/* Splits "synth:PRESET[:SEED]" into preset (n bytes) and seed (0 when
 * absent), for every synthetic model (DiT, VAE, text encoder). SP_OK, or
 * SP_ERR_INPUT with one line naming the spec. */
int rank_synth_spec_parse(const char *spec, char *preset, size_t n, uint64_t *seed);
/* The checksum a synthetic model reports: its spec and the generator's
 * version, since its weights are never all made. */
void rank_synth_checksum(const char *preset, uint64_t seed, char *buf, size_t n);

#endif
