#!/bin/bash
# The two-expert model file: layout, weights, validation, checksums (a14b_file.py).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/find_python.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/sp-wan22-file.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
"$PY" "$SP_SRC/tests/wan22/a14b_file.py" "$SP_BIN" "$work"
