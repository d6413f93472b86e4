#!/bin/bash
# Runs the libFuzzer target on the safetensors header parser for a bounded
# time (FUZZ_SECONDS, default 30). Skipped (77) without clang/libFuzzer.
set -u
: "${SP_SRC:?}"
out=$(bash "$SP_SRC/launch/fuzz.sh" "${FUZZ_SECONDS:-30}" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q '^fuzz: skipped'; then
  exit 77
fi
exit $rc
