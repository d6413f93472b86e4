#!/bin/bash
# The malformed-checkpoint corpus (malformed.py): every file refused with
# exit 2, no crash, no output.
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/find_python.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/sp-convert-bad.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
"$PY" "$SP_SRC/tests/convert/malformed.py" "$SP_BIN" "$work"
