#!/usr/bin/env bash
# Parity of `staticpipe run` on the tiny image-to-video models with the
# float64 references of the published loops (tests/ref/i2v_parity.py run):
# TI2V from a PNG through the Wan 2.2 VAE and without an image, I2V from
# image latents across the expert switch; relative L2 <= 1e-4 each.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../common/script.sh"
sp_python
sp_need_bin
sp_work_dir i2v_run
exec "$PY" "$here/i2v_parity.py" run --bin "$SP_BIN" --work "$work"
