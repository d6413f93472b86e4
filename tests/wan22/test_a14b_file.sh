#!/bin/bash
# The two-expert model file: layout, weights, validation, checksums (a14b_file.py).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir wan22-file
"$PY" "$SP_SRC/tests/wan22/a14b_file.py" "$SP_BIN" "$work"
