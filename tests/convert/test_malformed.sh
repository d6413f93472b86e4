#!/bin/bash
# The malformed-checkpoint corpus (malformed.py): every file refused with
# exit 2, no crash, no output.
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir convert-bad
"$PY" "$SP_SRC/tests/convert/malformed.py" "$SP_BIN" "$work"
