/* The engine sweep's bookkeeping of configurations
 * (vae_engine_bench.cu; code in vae_engine_key.c, host only): what
 * identifies one (its engine's global index and knob choices, compared
 * whatever order cuDNN lists the knobs in) and the values of a knob's
 * range that get variants. */
#ifndef DEV_VAE_ENGINE_KEY_H
#define DEV_VAE_ENGINE_KEY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VAE_ENGINE_MAX_KNOBS 48    /* knob choices of a configuration (cuDNN 9 has 44 types) */
#define VAE_ENGINE_KNOB_VALUES 8   /* a knob with a wider range gets no variants */

/* A configuration: engine -1 when unknown (then never the same as another). */
typedef struct vae_engine_key {
  int64_t engine;
  int nknobs;
  int64_t type[VAE_ENGINE_MAX_KNOBS], val[VAE_ENGINE_MAX_KNOBS];
} vae_engine_key;

/* Sorts k's knobs by type (the form vae_engine_key_same compares). */
void vae_engine_key_sort(vae_engine_key *k);
/* 1 when a and b (both sorted) are the same configuration of a known
 * engine, else 0. */
int vae_engine_key_same(const vae_engine_key *a, const vae_engine_key *b);
/* "type=value type=value ..." into out (cap bytes, cut short when full). */
void vae_engine_key_text(const vae_engine_key *k, char *out, size_t cap);

/* The values min, min + stride, ..., up to max of a knob's range into out
 * (at least VAE_ENGINE_KNOB_VALUES slots): their count, or 0 when the range
 * is empty, its stride below 1 or it has more than VAE_ENGINE_KNOB_VALUES
 * values. */
int vae_engine_knob_values(int64_t min, int64_t max, int64_t stride, int64_t *out);

#ifdef __cplusplus
}
#endif

#endif
