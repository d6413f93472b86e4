#!/bin/bash
# Builds staticpipe and its tests with AddressSanitizer + UBSan (CPU only,
# so it also proves the build without CUDA) in build-asan and runs the tests
# labelled sanitize there (tests/CMakeLists.txt chooses them: the converter,
# tokenizer and text encoder areas): the round trip, the malformed-checkpoint
# corpus, the hostile tokenizer models and the sentencepiece parity must pass
# with no sanitizer report. Build progress as launch/build.sh shows it.
#   launch/sanitize.sh [extra ctest args]      env JOBS (default: nproc)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${SANITIZE_BUILD:-$src/build-asan}
jobs=${JOBS:-$(nproc)}
mkdir -p "$build"
log="$build/sanitize-configure.log"
cmake -S "$src" -B "$build" -DSTATICPIPE_SANITIZE=ON -DSTATICPIPE_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$log" 2>&1 ||
  { cat "$log" >&2; exit 1; }
SP_BUILD_DIR=$build SP_JOBS=$jobs STATICPIPE_CUDA=OFF bash "$src/launch/build.sh" >/dev/null
# abort_on_error makes a report end the process with a signal, which the
# tests count as a crash; leaks are reported too.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir "$build" -L sanitize -j"$jobs" --output-on-failure "$@"
