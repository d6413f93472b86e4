#!/bin/bash
# Builds the libFuzzer targets with clang -fsanitize=fuzzer,address,undefined
# and runs each for a bounded time:
#   st_header  the safetensors header parser (tests/fuzz/fuzz_st_header.c +
#              ranks/import/safetensors.c, ranks/io/json_in.c)
#   tok_spm    the tokenizer's spiece.model parser and model checks
#              (tests/fuzz/fuzz_tok_spm.c + ranks/text/tok_*.c)
#   tok_json   the tokenizer's tokenizer.json parser and model checks
#              (tests/fuzz/fuzz_tok_json.c + ranks/text/tok_*.c)
#   gguf       the GGUF header parser (tests/fuzz/fuzz_gguf.c +
#              ranks/import/gguf.c, kernels/quant_formats.c)
#   launch/fuzz.sh [SECONDS [TARGET...]]   (default 60 s each, every target;
#                                           env FUZZ_JOBS for parallel jobs)
# CI fuzzes once, through ctest's fuzz label (tests/fuzz/test_fuzz.sh runs
# this script, FUZZ_SECONDS each, in the full suite); run it by hand to
# fuzz longer.
# Seeds: tests/fuzz/corpus* (the tokenizer seeds are small unigram models
# trained with sentencepiece, and tokenizer.json files written from them;
# the GGUF seeds small files built like tests/gguf/gguf_files.py's).
# Exits 0 with a "skipped" line when clang or libFuzzer is missing
# (apt-get install clang), non-zero when a fuzzer finds a crash (the
# reproducer is left in the work directory it prints).
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-60}
shift $(( $# > 0 ? 1 : 0 ))
targets=${*:-st_header tok_spm tok_json gguf}
cc=${CLANG:-clang}
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "fuzz: skipped: clang not found (apt-get install clang)"
  exit 0
fi
work=${FUZZ_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/sp-fuzz.XXXXXX")}
probe="$work/probe.c"
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }' >"$probe"
if ! "$cc" -fsanitize=fuzzer "$probe" -o "$work/probe" >/dev/null 2>&1; then
  echo "fuzz: skipped: $cc has no libFuzzer runtime (apt-get install clang)"
  exit 0
fi
jsonc=$(ls /usr/lib/*/libjson-c.a /usr/lib/libjson-c.a /usr/local/lib/libjson-c.a 2>/dev/null | head -1)
[ -n "$jsonc" ] || jsonc=-ljson-c
text_src=$(ls "$src"/ranks/text/tok_*.c)
failed=0
for target in $targets; do
  case $target in
    st_header) srcs="$src/tests/fuzz/fuzz_st_header.c"; dict=header.dict; seeds=corpus ;;
    tok_spm) srcs="$src/tests/fuzz/fuzz_tok_spm.c $text_src"; dict=; seeds=corpus_tok_spm ;;
    tok_json) srcs="$src/tests/fuzz/fuzz_tok_json.c $text_src"; dict=tok_json.dict; seeds=corpus_tok_json ;;
    gguf) srcs="$src/tests/fuzz/fuzz_gguf.c $src/ranks/import/gguf.c $src/kernels/quant_formats.c"
      dict=gguf.dict; seeds=corpus_gguf ;;
    *) echo "fuzz: unknown target $target (st_header, tok_spm, tok_json, gguf)" >&2; exit 2 ;;
  esac
  bin="$work/fuzz_$target"
  mkdir -p "$work/corpus_$target"
  # shellcheck disable=SC2086 # srcs is a list of paths without spaces
  if ! "$cc" -std=c11 -g -O1 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE \
      -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
      -I"$src/ranks/import" -I"$src/ranks/text" -I"$src/ranks/io" -I"$src/comm/log" \
      -I"$src/kernels" $srcs "$src/ranks/import/safetensors.c" "$src/ranks/io/json_in.c" \
      "$src/ranks/io/file_read.c" "$src/ranks/io/utf8.c" "$src/comm/log/log.c" \
      "$jsonc" -lm -lpthread -o "$bin"; then
    echo "fuzz: $target: build failed" >&2
    exit 1
  fi
  echo "fuzz: running $bin for ${secs}s (work dir $work)"
  "$bin" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
    ${dict:+-dict="$src/tests/fuzz/$dict"} -artifact_prefix="$work/$target-" -print_final_stats=1 \
    ${FUZZ_JOBS:+-jobs=$FUZZ_JOBS -workers=$FUZZ_JOBS} \
    "$work/corpus_$target" "$src/tests/fuzz/$seeds" 2>"$work/fuzz_$target.log"
  rc=$?
  tail -15 "$work/fuzz_$target.log"
  if [ $rc -ne 0 ]; then
    echo "fuzz: $target FAILED (exit $rc); reproducer(s): $(ls "$work/$target"-* 2>/dev/null)" >&2
    failed=1
  else
    echo "fuzz: $target: no crash in ${secs}s"
  fi
done
[ $failed -eq 0 ] || exit 1
[ -n "${FUZZ_WORK:-}" ] || rm -rf "$work"
