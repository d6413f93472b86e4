#!/bin/bash
# Quantized model files on the CPU backend (cpu_runs.py): int8 files against
# the int8 rule and against a bf16 file run with --precision int8, their
# weights dequantised (--precision bf16) against an fp32 twin, GGUF-
# converted files against the fp32 file of gguf-py's dequantised weights,
# 1-3 pipeline ranks bit-identical. Needs python3 with numpy, h5py and gguf.
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python_with 'import numpy, h5py, gguf' "numpy, h5py and gguf (pip install gguf)"
sp_mpi
sp_work_dir quant-cpu
"$PY" "$SP_SRC/tests/quant/cpu_runs.py" "$SP_BIN" "$work"
