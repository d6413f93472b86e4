#!/bin/bash
# Builds staticpipe with AddressSanitizer + UBSan (CPU only) in build-asan
# and runs the converter, tokenizer and text encoder tests there (ctest -L 'convert|text|t5'):
# the round trip, the malformed-checkpoint corpus, the hostile tokenizer
# models and the sentencepiece parity must pass with no sanitizer report.
#   launch/sanitize.sh [extra ctest args]      env JOBS (default 2)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${SANITIZE_BUILD:-$src/build-asan}
jobs=${JOBS:-2}
mkdir -p "$build"
log="$build/sanitize-configure.log"
cmake -S "$src" -B "$build" -DSTATICPIPE_SANITIZE=ON -DSTATICPIPE_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$log" 2>&1 ||
  { cat "$log" >&2; exit 1; }
cmake --build "$build" -j"$jobs" --target staticpipe tok_driver text_test_tok_model t5_test_t5_attention
# abort_on_error makes a report end the process with a signal, which the
# tests count as a crash; leaks are reported too.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir "$build" -L 'convert|text|t5' --output-on-failure "$@"
