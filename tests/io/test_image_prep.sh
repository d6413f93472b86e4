#!/usr/bin/env bash
# The image preparation of image to video against the float64 references of
# the published steps (tests/io/image_prep_parity.py: the [-1, 1] pixels,
# the I2V grid and bicubic resize, Pillow's LANCZOS and TI2V's crop).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../common/script.sh"
sp_python
sp_helper DUMP io_image_prep_dump
sp_work_dir image_prep
exec "$PY" "$here/image_prep_parity.py" "$DUMP" "$work"
