#!/bin/bash
# fp8 model files against an independent e4m3 quantiser: convert --dtype
# fp8 (BF16 and ComfyUI fp8 checkpoints), init --dtype fp8, the fp8 file
# against a bf16 file run with --precision fp8, malformed files refused
# (weights.py).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir fp8-weights
"$PY" "$SP_SRC/tests/fp8/weights.py" "$SP_BIN" "$work"
