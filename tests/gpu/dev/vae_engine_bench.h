/* The Wan 2.1 VAE decoder's convolutions through cuDNN's backend (graph)
 * API, measured (tests/gpu/test_vae_gpu --engines, launch/bench/README.md
 * "VAE convolution algorithms"). The decoder runs the legacy API, which
 * offers one algorithm (implicit_precomp_gemm) for its shapes and hides
 * the engines behind it and their knobs (tile sizes, split-K, ...). For
 * every distinct convolution shape a decode ran: the same convolution as
 * a backend operation graph (X NDHWC, W KTRSC, Y NDHWC, the decoder's
 * storage type, fp32 compute, its padding and strides), the engine
 * configurations of the heuristics (modes A, B and the fallback list) and
 * some knob variants of their engines, each finalised into a plan and run
 * on the shape's random operands beside the decoder's legacy pick: its
 * numerical and behaviour notes, workspace, median time, rerun bits and
 * relative L2 against the pick. The saving a fixed engine rule could give:
 * each shape's fastest deterministic, bit-reproducible configuration
 * within the decoder's workspace, times the shape's runs per decode. The
 * shared driver is vae_bench_util.h. */
#ifndef DEV_VAE_ENGINE_BENCH_H
#define DEV_VAE_ENGINE_BENCH_H

#include "vae_algo_bench.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Measures every shape of s (vae_algo_shapes_take) on the current device,
 * prints the table (header lines start with '#') and one JSON line
 * ("bench":"vae_conv_engines"). 0, or 1 when a shape could not be measured
 * or the JSON could not be printed or written. */
int vae_engine_bench_run(const vae_algo_shapes *s, const vae_algo_opts *o);

#ifdef __cplusplus
}
#endif

#endif
