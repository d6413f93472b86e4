#!/bin/bash
# run --t5 --prompt on CUDA (tests/t5/run_prompt.py with SP_DEVICE=cuda):
# the prompt encoded on the GPU (bf16) before the DiT is placed gives
# latents bit-identical to encode --device cuda then run --cond on CUDA,
# under one process and mpirun -np 2 (both ranks on the GPU), --jobs
# prompt= lines too, and the refusals. Skips (77) without a GPU or without
# python3 with numpy, h5py, sentencepiece, protobuf and regex.
set -u
: "${SP_SRC:?}" "${SP_BIN:?}"
if ! nvidia-smi -L >/dev/null 2>&1; then echo "skip: no GPU visible (nvidia-smi -L failed)"; exit 77; fi
. "$SP_SRC/tests/common/skip.sh"
. "$SP_SRC/tests/common/mpi_env.sh"
PY=
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null 2>&1 &&
     "$p" -c 'import numpy, h5py, sentencepiece, regex; from sentencepiece import sentencepiece_model_pb2' >/dev/null 2>&1; then
    PY=$(command -v "$p")
    break
  fi
done
[ -n "$PY" ] || sp_skip "no python3 with numpy, h5py, sentencepiece, protobuf and regex"
work=$(mktemp -d "${TMPDIR:-/tmp}/sp-gpuprompt.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
SP_DEVICE=cuda "$PY" "$SP_SRC/tests/t5/run_prompt.py" "$SP_BIN" "$work" ${SP_SEED:+"$SP_SEED"}
