#!/bin/bash
# staticpipe convert --expert high=PATH --expert low=PATH (convert_experts.py).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/find_python.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/sp-wan22-convert.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
"$PY" "$SP_SRC/tests/wan22/convert_experts.py" "$SP_BIN" "$work"
