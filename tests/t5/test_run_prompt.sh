#!/bin/bash
# run --t5 --prompt and prompt= on --jobs lines against encode + run --cond,
# bit for bit, under one process and mpirun -np 2, and the refusals
# (run_prompt.py). Needs python3 with numpy, h5py, sentencepiece, protobuf
# and regex (launch/deps.sh); without them it is skipped, or fails under CI
# (common/skip.sh). SP_SEED=n replays a run.
set -u
: "${SP_SRC:?}" "${SP_BIN:?}"
. "$SP_SRC/tests/common/script.sh"
sp_mpi
sp_python_with 'import numpy, h5py, sentencepiece, regex; from sentencepiece import sentencepiece_model_pb2' \
  "numpy, h5py, sentencepiece, protobuf and regex"
sp_work_dir runprompt
"$PY" "$SP_SRC/tests/t5/run_prompt.py" "$SP_BIN" "$work" ${SP_SEED:+"$SP_SEED"}
