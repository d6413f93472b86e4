#!/usr/bin/env bash
# Parity of `staticpipe forward` (tiny model) with the float64 numpy reference;
# fails, printing each relative L2 error, on any mismatch (tests/ref/parity.py).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../common/find_python.sh"
if [ -z "${SP_BIN:-}" ] || [ ! -x "$SP_BIN" ]; then
  echo "SP_BIN is not set to the staticpipe binary (ctest sets it)" >&2
  exit 1
fi
exec "$PY" "$here/parity.py" forward --bin "$SP_BIN"
