#!/bin/bash
# LoRA bypass mode on a two-expert model (wan2.2-tiny): per-expert pairs,
# equal to merged within 1e-5 and to the float64 two-expert reference,
# bit-identical over 1-4 ranks and in --jobs lines (bypass_experts.py).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir lora-experts
"$PY" "$SP_SRC/tests/lora/bypass_experts.py" "$SP_BIN" "$work" ${SP_SEED:-}
