#!/bin/bash
# LoRA merging against the numpy reference, runs with LoRAs and explicit
# schedules, bad LoRAs and flags (lora_check.py says what each part checks).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}" "${SP_BUILD:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_helper dump lora_merge_dump
sp_work_dir lora
export OMP_NUM_THREADS=2
"$PY" "$SP_SRC/tests/lora/lora_check.py" "$SP_BIN" "$dump" "$work" ${SP_SEED:-}
