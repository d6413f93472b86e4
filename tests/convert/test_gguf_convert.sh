#!/bin/bash
# convert of GGUF checkpoints written by gguf-py (gguf_convert.py): the
# blocks' linear weights kept in their formats byte for byte, the rest
# gguf-py's dequantisation, a CPU forward bit-identical to an fp32 file of
# gguf-py's dequantised weights, two experts, refusals. Needs python3 with
# numpy, h5py and gguf (pip install gguf); without them, skipped (a failure
# under CI).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python_with 'import numpy, h5py, gguf' "numpy, h5py and gguf (pip install gguf)"
sp_work_dir convert-gguf
"$PY" "$SP_SRC/tests/convert/gguf_convert.py" "$SP_BIN" "$work"
