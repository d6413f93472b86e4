#!/usr/bin/env bash
# Quantized GEMMs at Wan-14B's block shapes on one GPU, in one run:
#
#   launch/bench/bench_quant.sh BUILD_DIR [OUT_JSON]      (default bench-quant.json)
#
# M = 32,760 tokens (480x832x81), q/k/v/o (K = N = 5120), ffn.0 (5120 ->
# 13824, GELU) and ffn.2 (13824 -> 5120): the bf16 GEMM, fp8 W8A8 (the
# scales in cuBLASLt's epilogue on sm_90, or an fp32 product and one
# epilogue kernel; with and without quantising the activations), int8
# W8A8, and the weight-only path (fp8, Q8_0, Q4_K dequantised to bf16, then
# the bf16 GEMM; and the dequantisation alone). Every variant is checked
# against the bf16 GEMM on the same dequantised weights before it is timed;
# ratios are against the bf16 GEMM of the same shape in the same run.
# Prints a table (header lines start with '#') and one JSON line; OUT_JSON
# gets the JSON. The program is tests/gpu/test_quant --bench
# (tests/gpu/dev/quant_bench.c). About a minute of an H100; needs about
# 6 GiB of GPU memory.
set -u
B=$(cd "${1:?usage: bench_quant.sh BUILD_DIR [OUT_JSON]}" && pwd)
out=${2:-bench-quant.json}
exec "$B/tests/gpu_test_quant" --bench --json "$out"
