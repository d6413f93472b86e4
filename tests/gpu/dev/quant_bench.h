/* The quantized-GEMM benchmark (tests/gpu/test_quant --bench,
 * launch/bench/bench_quant.sh): at Wan-14B's GEMM shapes (M = 32,760
 * tokens: q/k/v/o K = N = 5120, ffn.0 5120 -> 13824 with GELU, ffn.2 13824
 * -> 5120), the bf16 GEMM against fp8 W8A8 (each scale path, with and
 * without the activation quantiser), int8 W8A8 and the weight-only path
 * (dequantise the weight to bf16, then the bf16 GEMM), each checked
 * against the bf16 GEMM on the same dequantised weights before it is
 * timed. */
#ifndef DEV_QUANT_BENCH_H
#define DEV_QUANT_BENCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Runs on the current device with inputs drawn from seed; prints a table
 * (header lines start with '#') and one JSON line, also written to
 * json_path when not NULL. 0 when every check passed, else 1. */
int quant_bench_run(uint64_t seed, const char *json_path);

#ifdef __cplusplus
}
#endif

#endif
