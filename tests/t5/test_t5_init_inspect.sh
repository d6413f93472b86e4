#!/bin/bash
# init --arch umt5-tiny and inspect of text encoders (init_inspect.py). Needs
# python3 with numpy, h5py, sentencepiece, protobuf and regex (launch/deps.sh);
# without them it is skipped, or fails under CI (common/skip.sh). SP_SEED=n
# replays a run.
set -u
: "${SP_SRC:?}" "${SP_BIN:?}"
. "$SP_SRC/tests/common/skip.sh"
PY=
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null 2>&1 &&
     "$p" -c 'import numpy, h5py, sentencepiece, regex; from sentencepiece import sentencepiece_model_pb2' >/dev/null 2>&1; then
    PY=$(command -v "$p")
    break
  fi
done
[ -n "$PY" ] || sp_skip "no python3 with numpy, h5py, sentencepiece, protobuf and regex"
work=$(mktemp -d "${TMPDIR:-/tmp}/sp-t5init.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
"$PY" "$SP_SRC/tests/t5/init_inspect.py" "$SP_BIN" "$work" ${SP_SEED:+"$SP_SEED"}
