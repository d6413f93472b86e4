#!/usr/bin/env bash
# convert of Wan VAE checkpoints in both key layouts (official WanVAE_,
# diffusers AutoencoderKLWan), the VAE model file decoded against the
# float64 reference, inspect and --verify, malformed checkpoints, synth
# presets and init (tests/vae/vae_convert.py).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}" "${SP_BUILD:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir vae-convert
"$PY" "$SP_SRC/tests/vae/vae_convert.py" "$SP_BIN" "$work"
