#!/bin/bash
# The C tokenizer against the sentencepiece library (spm_parity.py): models
# trained here, hard and random strings, spiece.model and tokenizer.json,
# Wan's prompt cleaning and truncation: identical ids, every string.
# Needs python3 with sentencepiece, protobuf and regex (launch/deps.sh:
# python3-sentencepiece python3-protobuf python3-regex); without them it is
# skipped, or fails under CI (common/skip.sh). SP_SEED=n replays a run.
set -u
: "${SP_SRC:?}" "${SP_BUILD:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python_with 'import sentencepiece, regex; from sentencepiece import sentencepiece_model_pb2' \
  "sentencepiece, protobuf and regex (apt-get install python3-sentencepiece python3-protobuf python3-regex)"
driver="$SP_BUILD/tests/tok_driver"
[ -x "$driver" ] || { echo "FAIL: $driver not built" >&2; exit 1; }
sp_work_dir tok
"$PY" "$SP_SRC/tests/text/spm_parity.py" "$driver" "$work" ${SP_SEED:+"$SP_SEED"}
