/* The Wan 2.1 VAE decoder's convolution algorithms, measured
 * (tests/gpu/test_vae_gpu --algos, launch/bench/README.md "VAE convolution
 * algorithms"): for every distinct convolution shape a decode ran, every
 * forward algorithm cuDNN's heuristic lists for it, each run on random
 * operands of the real shape with the descriptors the decoder builds
 * (kernels/cuda/cuda_vae_conv.h): its median time, cuDNN's determinism
 * flag and math type, its workspace, whether a rerun gives the same bits,
 * and its relative L2 against the decoder's pick. The saving a fixed rule
 * could give: each shape's fastest deterministic, bit-reproducible
 * algorithm within the decoder's workspace, times the shape's runs per
 * decode. The driver, timing and comparisons are shared with the backend
 * API's engine sweep (vae_bench_util.h, vae_engine_bench.h). */
#ifndef DEV_VAE_ALGO_BENCH_H
#define DEV_VAE_ALGO_BENCH_H

#include <stdint.h>

#include "kern_cuda_vae.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The shapes a decoder's kernel context has run, with its pick and the
 * runs of each (a copy: the decoder may be freed after). NULL when out of
 * host memory (logged). */
typedef struct vae_algo_shapes vae_algo_shapes;
vae_algo_shapes *vae_algo_shapes_take(const kern_cuda_vae *v);
void vae_algo_shapes_free(vae_algo_shapes *s);

/* What the table's and the JSON's heading say of the decode the shapes
 * came from, and where the JSON line also goes (NULL: stdout only). */
typedef struct vae_algo_opts {
  int64_t h, w, frames;  /* latent size and latent frames of the decode */
  const char *precision; /* bf16, fp32, tf32 */
  uint64_t seed;         /* the operands' random values */
  const char *json_path;
} vae_algo_opts;

/* Measures every shape of s on the current device, prints the table
 * (header lines start with '#') and one JSON line. 0, or 1 when a shape
 * could not be measured (no device memory for its operands) or the JSON
 * file could not be written. */
int vae_algo_bench_run(const vae_algo_shapes *s, const vae_algo_opts *o);

#ifdef __cplusplus
}
#endif

#endif
