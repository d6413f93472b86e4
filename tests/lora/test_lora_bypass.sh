#!/bin/bash
# LoRA bypass mode: equal to merged mode on the CPU backend within 1e-5,
# bit-identical over 1-4 ranks, --jobs lines switching LoRAs equal to their
# own runs, refused inputs (bypass_check.py says what each part checks).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir lora-bypass
"$PY" "$SP_SRC/tests/lora/bypass_check.py" "$SP_BIN" "$work" ${SP_SEED:-}
