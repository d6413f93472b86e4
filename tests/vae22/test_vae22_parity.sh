#!/usr/bin/env bash
# Parity of the CPU Wan 2.2 VAE, encoder and decoder, with the float64 numpy
# reference at small widths, odd sizes, F = 1, 2, 3 latent frames and T = 1,
# 5, 9 video frames, three configs (tests/vae22/vae22_parity.py); fails,
# printing each relative L2 error, on any mismatch above 1e-5.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../common/script.sh"
sp_python
sp_helper driver vae22_test_vae22_driver
exec "$PY" "$here/vae22_parity.py" --driver "$driver"
