#!/usr/bin/env bash
# Self-tests of the image-to-video references (image_ref.py, i2v_ref.py):
# the I2V latent grid against the published expression, both image resizes
# against direct formulas, the mask, the per-token timesteps, the I2V and
# TI2V loops against the text-to-video references. Needs no staticpipe
# binary and no torch.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../common/script.sh"
sp_python
exec "$PY" "$here/i2v_selftest.py"
