#!/usr/bin/env bash
# Parity of `staticpipe run` (tiny model) with the float64 numpy reference;
# fails, printing each relative L2 error, on any mismatch (tests/ref/parity.py).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../common/script.sh"
sp_python
sp_need_bin
exec "$PY" "$here/parity.py" run --bin "$SP_BIN"
