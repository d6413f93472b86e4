#!/bin/bash
# The C tokenizer against the sentencepiece library (spm_parity.py): models
# trained here, hard and random strings, spiece.model and tokenizer.json,
# Wan's prompt cleaning and truncation: identical ids, every string.
# Needs python3 with sentencepiece, protobuf and regex (launch/deps.sh:
# python3-sentencepiece python3-protobuf python3-regex); without them it is
# skipped, or fails under CI (common/skip.sh). SP_SEED=n replays a run.
set -u
: "${SP_SRC:?}" "${SP_BUILD:?}"
. "$SP_SRC/tests/common/skip.sh"
PY=
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null 2>&1 &&
     "$p" -c 'import sentencepiece, regex; from sentencepiece import sentencepiece_model_pb2' >/dev/null 2>&1; then
    PY=$(command -v "$p")
    break
  fi
done
[ -n "$PY" ] || sp_skip "no python3 with sentencepiece, protobuf and regex (apt-get install python3-sentencepiece python3-protobuf python3-regex)"
driver="$SP_BUILD/tests/tok_driver"
[ -x "$driver" ] || { echo "FAIL: $driver not built" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/sp-tok.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
"$PY" "$SP_SRC/tests/text/spm_parity.py" "$driver" "$work" ${SP_SEED:+"$SP_SEED"}
