#!/bin/bash
# staticpipe convert --expert high=PATH --expert low=PATH (convert_experts.py).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir wan22-convert
"$PY" "$SP_SRC/tests/wan22/convert_experts.py" "$SP_BIN" "$work"
