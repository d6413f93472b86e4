#!/bin/bash
# The CPU dequantisers of GGUF's ggml types (kernels/kern_quant.h) against
# gguf-py's numpy dequantisation (llama.cpp's gguf package), bit for bit:
# quant_ref.py writes random block bytes (finite f16 scales) and quantised
# tensors of every type with odd row counts and 1-5 blocks per row, with
# gguf-py's fp32 and bf16 results; quant_check dequantises them whole and
# in row ranges and compares. Needs python3 with numpy and gguf
# (pip install gguf); without it, skipped (a failure under CI).
set -u
: "${SP_SRC:?}" "${SP_BUILD:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python_with 'import numpy, gguf.quants' "numpy and gguf (pip install gguf)"
sp_work_dir quant-gguf
sp_seed
"$PY" "$SP_SRC/tests/kernels/quant_ref.py" "$work" "$S" || exit 1
"$SP_BUILD/tests/quant_check" "$work"
