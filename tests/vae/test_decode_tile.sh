#!/usr/bin/env bash
# `staticpipe decode --tile` on the tiny synthetic VAE (CPU):
#   - --tile equal to the latent (and larger) gives the untiled video bit
#     for bit (the tiled path with one tile);
#   - 2 x 2 tiles give a different video of the same shape in [-1, 1], and
#     --json reports the tiles;
#   - bad --tile / --tile-overlap values exit 2 with one line, before any
#     work, leaving no output.
# How much tiling changes the video is tests/vae/test_vae_tile.c's.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
B=$SP_BIN
sp_work_dir vae-decode-tile
T=$work
cd "$T" || exit 1
VAE=synth:wan2.1-vae-tiny
SEED=${SP_SEED:-$RANDOM}
echo "seed $SEED (replay with SP_SEED=$SEED)"

"$PY" - "$SEED" <<'EOF2' || exit 1
import sys, h5py, numpy as np
r = np.random.default_rng(int(sys.argv[1]))
with h5py.File("lat.h5", "w") as f:
    f["latents"] = r.standard_normal((16, 2, 4, 6)).astype(np.float32)
EOF2

"$B" decode --vae $VAE --latents lat.h5 -o whole.h5 -q || bad "untiled decode"
"$B" decode --vae $VAE --latents lat.h5 -o one.h5 -q --tile 4x6 || bad "--tile 4x6"
"$B" decode --vae $VAE --latents lat.h5 -o big.h5 -q --tile 9x9 --tile-overlap 3 \
  || bad "--tile 9x9"
"$B" decode --vae $VAE --latents lat.h5 -o four.h5 -q --tile 3x4 --tile-overlap 2 --json \
  > four.json || bad "--tile 3x4"
"$PY" - <<'EOF2' || fail=1
import json, h5py, numpy as np
v = {n: h5py.File(n + ".h5", "r")["video"][()] for n in ("whole", "one", "big", "four")}
bad = 0
for n in ("one", "big"):
    if not np.array_equal(v[n], v["whole"]):
        print("FAIL --tile covering the latent (%s): not the untiled bits" % n); bad = 1
    else:
        print("ok   --tile covering the latent (%s): the untiled bits" % n)
f = v["four"]
if f.shape != v["whole"].shape or not np.all(np.abs(f) <= 1) or np.array_equal(f, v["whole"]):
    print("FAIL 2 x 2 tiles: shape %s, range [%g, %g], equal %s" % (f.shape, f.min(), f.max(),
          np.array_equal(f, v["whole"]))); bad = 1
else:
    print("ok   2 x 2 tiles: relative L2 %.3f from untiled" %
          (np.linalg.norm(f - v["whole"]) / np.linalg.norm(v["whole"])))
j = json.load(open("four.json"))
if j.get("tiles") != [2, 2] or j.get("tile") != [3, 4]:
    print("FAIL --json tiles %s tile %s, expected [2, 2] [3, 4]" % (j.get("tiles"), j.get("tile"))); bad = 1
else:
    print("ok   --json reports 2 x 2 tiles of 3x4")
raise SystemExit(bad)
EOF2

# expect_fail NAME PATTERN ARGS...: exit 2, PATTERN in one error line, no output file.
expect_fail() {
  local name=$1 pat=$2
  shift 2
  rm -f x.h5
  "$B" decode --vae $VAE --latents lat.h5 -o x.h5 "$@" >out.log 2>&1
  local rc=$?
  if [ $rc -ne 2 ]; then
    bad "$name: exit $rc, expected 2"; sed 's/^/     /' out.log
  elif [ "$(grep -c error out.log)" -ne 1 ] || ! grep -q -- "$pat" out.log; then
    bad "$name: not one error line with '$pat'"; sed 's/^/     /' out.log
  elif [ -e x.h5 ] || grep -q "latent frame" out.log; then
    bad "$name: refused only after decoding had started"
  else
    ok "$name: $(grep -m1 error out.log | sed 's/^\[rank [0-9]*\] //')"
  fi
}
expect_fail "--tile 0x4" "--tile" --tile 0x4
expect_fail "--tile 3" "--tile" --tile 3
expect_fail "--tile 3xq" "--tile" --tile 3xq
expect_fail "--tile -2x4" "--tile" --tile -2x4
expect_fail "overlap not below a split side" "overlap not below" --tile 3x4 --tile-overlap 3
expect_fail "--tile-overlap -1" "--tile-overlap" --tile 3x4 --tile-overlap -1
expect_fail "--tile-overlap without --tile" "needs --tile" --tile-overlap 2
exit $fail
