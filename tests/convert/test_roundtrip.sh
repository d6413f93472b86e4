#!/bin/bash
# Round trip of staticpipe convert in every key style and dtype (roundtrip.py).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/find_python.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/sp-convert-rt.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
"$PY" "$SP_SRC/tests/convert/roundtrip.py" "$SP_BIN" "$work"
