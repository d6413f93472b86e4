#!/usr/bin/env bash
# Parity of the CPU VAE encoder with the float64 numpy reference at small
# widths, odd sizes and T = 1, 5, 9 (tests/vae/vae_enc_parity.py); fails,
# printing each relative L2 error, on any mismatch above 1e-5.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../common/script.sh"
sp_python
sp_helper driver vae_test_vae_enc_driver
exec "$PY" "$here/vae_enc_parity.py" --driver "$driver"
