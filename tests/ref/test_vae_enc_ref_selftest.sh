#!/usr/bin/env bash
# Self-tests of the VAE encoder references (wan_vae_enc_ref.py, Wan 2.1)
# and of the Wan 2.2 VAE reference (wan_vae22_ref.py): pieces against
# direct formulas, chunked against whole-sequence computation, causality,
# normalisation, the published tensor tables. Needs no staticpipe binary
# and no torch.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../common/script.sh"
sp_python
exec "$PY" "$here/vae_enc_selftest.py"
