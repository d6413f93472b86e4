#!/usr/bin/env bash
# staticpipe encode --vae: images (PNG of every colour type, JPEG) and
# videos (.h5, .mp4, .mkv) to latents against the float64 reference and
# the reference decoders (djpeg, the ffmpeg CLI), --frames, and the
# refusals (tests/vae/vae_encode.py).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_need_tool cjpeg djpeg ffmpeg
sp_work_dir vae-encode
"$PY" "$SP_SRC/tests/vae/vae_encode.py" "$SP_BIN" "$work"
