#!/usr/bin/env bash
# Parity of the CPU VAE decoder with the float64 numpy reference at small
# widths, odd latent sizes and F = 1, 2, 5 (tests/vae/vae_parity.py); fails,
# printing each relative L2 error, on any mismatch above 1e-5.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../common/find_python.sh"
driver=${SP_BUILD:-}/tests/vae_test_vae_driver
if [ -z "${SP_BUILD:-}" ] || [ ! -x "$driver" ]; then
  echo "SP_BUILD is not set to a build with tests/vae_test_vae_driver (ctest sets it)" >&2
  exit 1
fi
exec "$PY" "$here/vae_parity.py" --driver "$driver"
