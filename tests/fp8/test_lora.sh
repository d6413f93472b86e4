#!/bin/bash
# LoRAs with fp8 weights on the CPU backend against numpy-built fp8 files
# (lora_fp8.py says what each part checks).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/find_python.sh"
. "$SP_SRC/tests/common/mpi_env.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/sp-fp8lora.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
"$PY" "$SP_SRC/tests/fp8/lora_fp8.py" "$SP_BIN" "$work"
