#!/bin/bash
# Builds the libFuzzer target on the safetensors header parser
# (tests/fuzz/fuzz_st_header.c + ranks/import/safetensors.c, st_text.c) with clang
# -fsanitize=fuzzer,address,undefined and runs it for a bounded time.
#   launch/fuzz.sh [SECONDS]     (default 60; env FUZZ_JOBS for parallel jobs)
# Exits 0 with a "skipped" line when clang or libFuzzer is missing
# (apt-get install clang), non-zero when the fuzzer finds a crash (the
# reproducer is left in the work directory it prints).
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-60}
cc=${CLANG:-clang}
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "fuzz: skipped: clang not found (apt-get install clang)"
  exit 0
fi
work=${FUZZ_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/sp-fuzz.XXXXXX")}
mkdir -p "$work/corpus"
probe="$work/probe.c"
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }' >"$probe"
if ! "$cc" -fsanitize=fuzzer "$probe" -o "$work/probe" >/dev/null 2>&1; then
  echo "fuzz: skipped: $cc has no libFuzzer runtime (apt-get install clang)"
  exit 0
fi
jsonc=$(ls /usr/lib/*/libjson-c.a /usr/lib/libjson-c.a /usr/local/lib/libjson-c.a 2>/dev/null | head -1)
[ -n "$jsonc" ] || jsonc=-ljson-c
bin="$work/fuzz_st_header"
if ! "$cc" -std=c11 -g -O1 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$src/ranks/import" -I"$src/comm/log" -I"$src/kernels" \
    "$src/tests/fuzz/fuzz_st_header.c" "$src/ranks/import/safetensors.c" "$src/ranks/import/st_text.c" "$src/comm/log/log.c" \
    "$jsonc" -lpthread -o "$bin"; then
  echo "fuzz: build failed" >&2
  exit 1
fi
echo "fuzz: running $bin for ${secs}s (work dir $work)"
"$bin" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
  -dict="$src/tests/fuzz/header.dict" -artifact_prefix="$work/" -print_final_stats=1 \
  ${FUZZ_JOBS:+-jobs=$FUZZ_JOBS -workers=$FUZZ_JOBS} \
  "$work/corpus" "$src/tests/fuzz/corpus" 2>"$work/fuzz.log"
rc=$?
tail -15 "$work/fuzz.log"
if [ $rc -ne 0 ]; then
  echo "fuzz: FAILED (exit $rc); reproducer(s): $(ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* 2>/dev/null)" >&2
  exit 1
fi
echo "fuzz: no crash in ${secs}s"
[ -n "${FUZZ_WORK:-}" ] || rm -rf "$work"
