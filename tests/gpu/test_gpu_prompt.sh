#!/bin/bash
# run --t5 --prompt on CUDA (tests/t5/run_prompt.py with SP_DEVICE=cuda):
# the prompt encoded on the GPU (bf16) before the DiT is placed gives
# latents bit-identical to encode --device cuda then run --cond on CUDA,
# under one process and mpirun -np 2 (both ranks on the GPU), --jobs
# prompt= lines too, and the refusals. Skips (77) without a GPU or without
# python3 with numpy, h5py, sentencepiece, protobuf and regex.
set -u
: "${SP_SRC:?}" "${SP_BIN:?}"
. "$SP_SRC/tests/common/script.sh"
sp_need_gpu
sp_mpi
sp_python_with 'import numpy, h5py, sentencepiece, regex; from sentencepiece import sentencepiece_model_pb2' \
  "numpy, h5py, sentencepiece, protobuf and regex"
sp_work_dir gpuprompt
SP_DEVICE=cuda "$PY" "$SP_SRC/tests/t5/run_prompt.py" "$SP_BIN" "$work" ${SP_SEED:+"$SP_SEED"}
