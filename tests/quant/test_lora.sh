#!/bin/bash
# LoRAs on quantized weights on the CPU backend (lora_quant.py): int8 files
# merged against int8 files built with numpy, int8 bypass against merged,
# GGUF-converted and fp8-in-bf16 files refusing merged mode and taking
# bypass (bit-identical to their fp32 twins), 2 ranks bit-identical.
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python_with 'import numpy, h5py, gguf' "numpy, h5py and gguf (pip install gguf)"
sp_mpi
sp_work_dir quant-lora
"$PY" "$SP_SRC/tests/quant/lora_quant.py" "$SP_BIN" "$work"
