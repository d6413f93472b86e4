/* ComfyUI's latent files (*.latent), read and written as ComfyUI's
 * SaveLatent and LoadLatent nodes do: a safetensors file holding
 *
 *   latent_tensor            float32 [1, 16, F, H, W], the VAE's raw latent
 *                            space: x = z / (1 / std[c]) + mean[c], the
 *                            un-normalisation the decoder applies (VAE.md
 *                            step 1, statistics in nets/wan_vae_config.c)
 *   latent_format_version_0  float32 [0], no data: the marker that the
 *                            values are not scaled (files without it are
 *                            the older format ComfyUI divides by 0.18215)
 *
 * and string metadata (__metadata__). staticpipe's own latents (run -o
 * X.h5, --noise, forward --latent) are the normalised z the DiT works in;
 * these functions convert on the way in and out, so a caller sees only z.
 *
 * Rounding: writing computes x = z / inv_std + mean in float32 with
 * inv_std = 1.0f / std (exactly the decoder's two roundings), reading
 * z = (x - mean) * inv_std (two more). A write then a read therefore
 * returns z within a few float32 ulps of |x| * inv_std, not bit-identical:
 * use HDF5 files where bits must survive a round trip. */
#ifndef RANK_LATENT_FILE_H
#define RANK_LATENT_FILE_H

#include <stdint.h>

#include "tensor_io.h"

/* 1 when path names a ComfyUI latent file (ends in ".latent"), else 0. */
int rank_latent_path_is(const char *path);

/* One metadata entry (both strings UTF-8; any bytes are escaped). */
typedef struct rank_latent_meta {
  const char *key, *value;
} rank_latent_meta;

/* Writes z, float32 (16, F, H, W) in dims, as a ComfyUI latent file with
 * the nmeta entries of meta as its metadata; atomically (temporary file,
 * renamed into place). SP_OK, or SP_ERR_INPUT / SP_ERR_RUNTIME after one
 * logged line naming the path. */
int rank_latent_write(const char *path, const int64_t dims[4], const float *z,
                      const rank_latent_meta *meta, int nmeta);

/* Reads a ComfyUI latent file into out as z (16, F, H, W) (out->ndim 4,
 * data owned: rank_tensor_free). Refuses, with one line naming the path and
 * the check: a path that is not a regular file, a malformed safetensors
 * file (ranks/import/safetensors.h), a missing latent_tensor or marker, a
 * dtype other than F32, a shape other than [1, 16, F, H, W], a non-finite
 * value. SP_OK, SP_ERR_INPUT or SP_ERR_RUNTIME (I/O, memory); out is left
 * empty on failure. */
int rank_latent_read(const char *path, rank_tensor *out);

#endif
