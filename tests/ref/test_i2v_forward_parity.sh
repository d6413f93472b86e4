#!/usr/bin/env bash
# Parity of `staticpipe forward` on the tiny image-to-video models with the
# float64 references (tests/ref/i2v_parity.py forward): wan2.2-i2v-tiny's
# 36 input channels, wan2.2-ti2v-tiny's per-token timesteps (latent frame 0
# at 0) and one timestep for all; relative L2 <= 1e-5 each.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../common/script.sh"
sp_python
sp_need_bin
sp_work_dir i2v_forward
exec "$PY" "$here/i2v_parity.py" forward --bin "$SP_BIN" --work "$work"
