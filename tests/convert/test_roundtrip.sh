#!/bin/bash
# Round trip of staticpipe convert in every key style and dtype (roundtrip.py).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir convert-rt
"$PY" "$SP_SRC/tests/convert/roundtrip.py" "$SP_BIN" "$work"
