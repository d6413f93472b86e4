#!/usr/bin/env bash
# Parity of the CPU VAE decoder with the float64 numpy reference at small
# widths, odd latent sizes and F = 1, 2, 5 (tests/vae/vae_parity.py); fails,
# printing each relative L2 error, on any mismatch above 1e-5.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../common/script.sh"
sp_python
sp_helper driver vae_test_vae_driver
exec "$PY" "$here/vae_parity.py" --driver "$driver"
