/* The row-op benchmark (tests/gpu/test_ops --bench): the residual stream's
 * memory-bound ops (layernorm_mod, gated_add, gated_add_ln, add then
 * layernorm, rmsnorm_rope) at the Wan shapes, the production kernels and
 * every variant of norm_variants.h, each checked against the CPU before it
 * is timed. */
#ifndef DEV_OPS_BENCH_H
#define DEV_OPS_BENCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Runs the benchmark on device 0 with inputs drawn from seed, prints the
 * table (header lines start with '#'); 0 when every check passed, else 1. */
int ops_bench_run(uint64_t seed);

#ifdef __cplusplus
}
#endif

#endif
