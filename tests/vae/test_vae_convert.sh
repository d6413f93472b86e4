#!/usr/bin/env bash
# convert of Wan VAE checkpoints in both key layouts (official WanVAE_,
# diffusers AutoencoderKLWan), the VAE model file decoded against the
# float64 reference, inspect and --verify, malformed checkpoints, synth
# presets and init (tests/vae/vae_convert.py).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}" "${SP_BUILD:?}"
. "$SP_SRC/tests/common/find_python.sh"
driver=$SP_BUILD/tests/vae_test_vae_driver
if [ ! -x "$driver" ]; then
  echo "no $driver: build the tests first" >&2
  exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/sp-vae-convert.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
"$PY" "$SP_SRC/tests/vae/vae_convert.py" "$SP_BIN" "$driver" "$work"
