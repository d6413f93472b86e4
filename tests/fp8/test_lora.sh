#!/bin/bash
# LoRAs with fp8 weights on the CPU backend against numpy-built fp8 files
# (lora_fp8.py says what each part checks).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir fp8lora
"$PY" "$SP_SRC/tests/fp8/lora_fp8.py" "$SP_BIN" "$work"
