# The benchmarks' precision words (sourced by bench_block.sh and
# bench_e2e.sh): bench_precision WORD sets the array `prec_args` to the run
# flags WORD stands for and returns 0, or returns 1 for an unknown word.
#   bf16                no flags (the model's bf16 weights)
#   fp8                 --precision fp8 (W8A8, the weights quantised at load)
#   fp8-fast            fp8 with --fp8-accum fast (cuBLASLt's fast fp8 accumulation)
#   fp8-int8attn        fp8 with --attn fa3-int8 (the 8-bit self-attention)
#   fp8-fast-int8attn   fp8-fast with --attn fa3-int8
#   fp8-fp8attn         fp8 with --attn fa3-fp8 (P V in e4m3 too)
#   fp8-fast-fp8attn    fp8-fast with --attn fa3-fp8
#   int8                --precision int8 (W8A8 on int8 GEMMs)
BENCH_PRECISION_WORDS="bf16 fp8 fp8-fast fp8-int8attn fp8-fast-int8attn fp8-fp8attn fp8-fast-fp8attn int8"
bench_precision() {
  case $1 in
    bf16) prec_args=() ;;
    fp8) prec_args=(--precision fp8) ;;
    fp8-fast) prec_args=(--precision fp8 --fp8-accum fast) ;;
    fp8-int8attn) prec_args=(--precision fp8 --attn fa3-int8) ;;
    fp8-fast-int8attn) prec_args=(--precision fp8 --fp8-accum fast --attn fa3-int8) ;;
    fp8-fp8attn) prec_args=(--precision fp8 --attn fa3-fp8) ;;
    fp8-fast-fp8attn) prec_args=(--precision fp8 --fp8-accum fast --attn fa3-fp8) ;;
    int8) prec_args=(--precision int8) ;;
    *) return 1 ;;
  esac
}
