#!/bin/bash
# Non-finite weights, one rule for every network (nonfinite.py): convert
# refuses a value infinite once stored (a text encoder in bf16, a VAE with
# --dtype bf16) and a ComfyUI scale_weight of 0 or below; inspect --verify
# refuses a text encoder or VAE file holding an infinity. Needs python3
# with numpy, h5py and sentencepiece (the shared inputs of
# tests/golden/inputs.py).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python_with 'import h5py, numpy, sentencepiece' "h5py, numpy and sentencepiece"
sp_work_dir nonfinite
"$PY" "$SP_SRC/tests/golden/inputs.py" "$SP_BIN" "$work/in" >/dev/null || { echo "FAIL inputs"; exit 1; }
"$PY" "$SP_SRC/tests/convert/nonfinite.py" "$SP_BIN" "$work"
