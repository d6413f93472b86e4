#!/usr/bin/env bash
# convert of Wan 2.2 VAE checkpoints in both key layouts (official
# Wan2_2_VAE / ComfyUI, diffusers AutoencoderKLWan), the model file decoded
# (staticpipe decode) and encoded (the encoder's API) against the float64
# reference, --dtype bf16, inspect --verify, malformed checkpoints
# (tests/vae22/vae22_convert.py).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}" "${SP_BUILD:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_helper driver vae22_test_vae22_driver
sp_work_dir vae22-convert
"$PY" "$SP_SRC/tests/vae22/vae22_convert.py" "$SP_BIN" "$driver" "$work"
