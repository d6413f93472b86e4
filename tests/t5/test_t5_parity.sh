#!/bin/bash
# The UMT5 text encoder end to end (t5_parity.py): convert of transformers',
# ComfyUI's fp16 and scaled fp8, and Wan's key forms, bit-exact; encode
# against the float64 numpy reference (tests/ref/umt5_ref.py) within 1e-5
# relative L2; threads and reruns bit-identical; the refusals. Needs
# python3 with numpy, h5py, sentencepiece, protobuf and regex (launch/deps.sh);
# without them it is skipped, or fails under CI (common/skip.sh).
# SP_SEED=n replays a run.
set -u
: "${SP_SRC:?}" "${SP_BIN:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python_with 'import numpy, h5py, sentencepiece, regex; from sentencepiece import sentencepiece_model_pb2' \
  "numpy, h5py, sentencepiece, protobuf and regex"
sp_work_dir t5
"$PY" "$SP_SRC/tests/t5/t5_parity.py" "$SP_BIN" "$work" ${SP_SEED:+"$SP_SEED"}
