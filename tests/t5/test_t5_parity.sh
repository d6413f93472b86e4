#!/bin/bash
# The UMT5 text encoder end to end (t5_parity.py): convert of transformers',
# ComfyUI's fp16 and scaled fp8, and Wan's key forms, bit-exact; encode
# against the float64 numpy reference (tests/ref/umt5_ref.py) within 1e-5
# relative L2; threads and reruns bit-identical; the refusals. Needs
# python3 with numpy, h5py, sentencepiece, protobuf and regex (launch/deps.sh);
# without them it is skipped, or fails under CI (common/skip.sh).
# SP_SEED=n replays a run.
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
work=$(mktemp -d "${TMPDIR:-/tmp}/sp-t5.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
"$PY" "$SP_SRC/tests/t5/t5_parity.py" "$SP_BIN" "$work" ${SP_SEED:+"$SP_SEED"}
