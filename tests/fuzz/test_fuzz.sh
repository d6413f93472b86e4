#!/bin/bash
# Runs the libFuzzer targets (launch/fuzz.sh: the safetensors header, the
# tokenizer's spiece.model and tokenizer.json parsers, the GGUF header) for a bounded time
# each (FUZZ_SECONDS, default 30). Skipped (77) without clang/libFuzzer,
# a failure instead when CI is set (common/skip.sh).
set -u
: "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
out=$(bash "$SP_SRC/launch/fuzz.sh" "${FUZZ_SECONDS:-30}" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q '^fuzz: skipped'; then
  sp_skip "$(printf '%s\n' "$out" | sed -n 's/^fuzz: skipped: //p' | head -1)"
fi
exit $rc
