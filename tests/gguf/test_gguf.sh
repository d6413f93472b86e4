#!/bin/bash
# The GGUF reader (ranks/import/gguf.c) against gguf-py (gguf_files.py):
# Wan-style files written by GGUFWriter read back pair by pair and tensor by
# tensor (bytes equal, dequantisation bit-exact to gguf.quants.dequantize),
# and malformed files, a FIFO and a directory each refused with a message
# naming the file and the check. Needs python3 with numpy and gguf (pip
# install gguf); without it, skipped (a failure under CI).
set -u
: "${SP_SRC:?}" "${SP_BUILD:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python_with 'import numpy, gguf' "numpy and gguf (pip install gguf)"
sp_work_dir gguf
sp_seed
"$PY" "$SP_SRC/tests/gguf/gguf_files.py" "$SP_BUILD/tests/gguf_dump" "$work" "$S"
