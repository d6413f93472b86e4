#!/bin/bash
# A two-expert run (Wan 2.2 A14B loop, tiny fp32 model) against the float64
# reference of the published loop (a14b_parity.py, tests/ref/wan22_ref.py).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir wan22-parity
"$PY" "$SP_SRC/tests/wan22/a14b_parity.py" "$SP_BIN" "$work"
