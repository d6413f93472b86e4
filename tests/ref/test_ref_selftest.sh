#!/usr/bin/env bash
# Self-tests of the float64 numpy reference (schedule, RoPE, patchify,
# samplers on a toy flow with a known solution, forward vs a loop
# formulation). Needs no staticpipe binary.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../common/script.sh"
sp_python
exec "$PY" "$here/selftest.py"
