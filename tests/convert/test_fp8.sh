#!/bin/bash
# convert of ComfyUI fp8 checkpoints (plain and scaled) and refusal of
# non-finite weights (fp8.py).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/find_python.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/sp-convert-fp8.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
"$PY" "$SP_SRC/tests/convert/fp8.py" "$SP_BIN" "$work"
