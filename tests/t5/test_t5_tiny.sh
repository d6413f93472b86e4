#!/bin/bash
# The built-in tiny text encoder (tiny_encoder.py): init --arch umt5-tiny
# stores ranks/text/tiny/spiece-tiny.model by itself, its ids equal the
# sentencepiece library's, encode at the tiny DiTs' width 4096 against the
# float64 reference, synth:umt5-tiny the same. Needs python3 with numpy,
# h5py, sentencepiece, protobuf and regex (launch/deps.sh); without them
# it is skipped, or fails under CI (common/skip.sh). SP_SEED=n replays a run.
set -u
: "${SP_SRC:?}" "${SP_BIN:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python_with 'import numpy, h5py, sentencepiece, regex; from sentencepiece import sentencepiece_model_pb2' \
  "numpy, h5py, sentencepiece, protobuf and regex"
sp_helper driver tok_driver
sp_work_dir t5tiny
"$PY" "$SP_SRC/tests/t5/tiny_encoder.py" "$SP_BIN" "$driver" "$work" ${SP_SEED:+"$SP_SEED"}
