#!/usr/bin/env bash
# Self-tests of the float64 numpy reference of the Wan 2.1 VAE decoder
# (tests/ref/wan_vae_selftest.py): each piece against a direct formula, the
# chunked decode against the whole-sequence one, the published tensor
# shapes. Needs no staticpipe binary.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../common/script.sh"
sp_python
exec "$PY" "$here/../ref/wan_vae_selftest.py"
