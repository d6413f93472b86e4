#!/bin/bash
# convert of ComfyUI fp8 checkpoints (plain and scaled) and refusal of
# non-finite weights (fp8.py).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir convert-fp8
"$PY" "$SP_SRC/tests/convert/fp8.py" "$SP_BIN" "$work"
