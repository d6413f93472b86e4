#!/bin/bash
# init --arch umt5-tiny and inspect of text encoders (init_inspect.py). Needs
# python3 with numpy, h5py, sentencepiece, protobuf and regex (launch/deps.sh);
# without them it is skipped, or fails under CI (common/skip.sh). SP_SEED=n
# replays a run.
set -u
: "${SP_SRC:?}" "${SP_BIN:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python_with 'import numpy, h5py, sentencepiece, regex; from sentencepiece import sentencepiece_model_pb2' \
  "numpy, h5py, sentencepiece, protobuf and regex"
sp_work_dir t5init
"$PY" "$SP_SRC/tests/t5/init_inspect.py" "$SP_BIN" "$work" ${SP_SEED:+"$SP_SEED"}
