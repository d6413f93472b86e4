#!/usr/bin/env bash
# The Wan 2.2 VAE through the product: init, inspect and decode.
#   - `init --arch wan2.2-vae-tiny` writes the file synth:wan2.2-vae-tiny
#     reads: decoding 48-channel latents with either gives the same video
#     bit for bit, (3, 1 + 4 (F - 1), 16h, 16w) in [-1, 1], its PNG frames
#     one per video frame; inspect (text and --json) shows both parts with
#     the tensor counts of the table;
#   - refused with exit 2 and one line before any work: 16-channel latents
#     for the Wan 2.2 VAE, 48-channel latents for a Wan 2.1 VAE, --tile, the
#     Wan 2.2 VAE file where run needs a Wan 2.1 VAE (named by its arch),
#     init --dtype fp8, int8 and q8_0.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_need_bin
B=$SP_BIN
sp_work_dir vae22-decode
T=$work
cd "$T" || exit 1
sp_seed

"$PY" - "$S" <<'EOF2' || exit 1
import sys, h5py, numpy as np
r = np.random.default_rng(int(sys.argv[1]))
with h5py.File("lat.h5", "w") as f:
    f["latents"] = r.standard_normal((48, 2, 2, 3)).astype(np.float32)
with h5py.File("lat16.h5", "w") as f:
    f["latents"] = r.standard_normal((16, 2, 2, 3)).astype(np.float32)
with h5py.File("cond.h5", "w") as f:
    f["context"] = r.standard_normal((9, 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((5, 4096)).astype(np.float32)
EOF2

expect_fail() {
  local name=$1 pat=$2
  shift 2
  "$@" >out.log 2>&1
  local rc=$?
  if [ $rc -ne 2 ]; then
    bad "$name: exit $rc, expected 2"; sed 's/^/     /' out.log
  elif ! grep -q -- "$pat" out.log; then
    bad "$name: no line with '$pat'"; sed 's/^/     /' out.log
  elif grep -q "step 1/\|latent frame 1/" out.log; then
    bad "$name: refused only after work had started"
  else
    ok "$name: $(grep -m1 error out.log | sed 's/^\[rank [0-9]*\] //')"
  fi
}

"$B" init --arch wan2.2-vae-tiny --seed "$S" -q -o vae22.h5 || bad "init --arch wan2.2-vae-tiny"
"$B" decode --vae vae22.h5 --latents lat.h5 -o file.h5 --frames-dir frames -q \
  || bad "decode with the file"
"$B" decode --vae "synth:wan2.2-vae-tiny:$S" --latents lat.h5 -o synth.h5 --json -q >dec.json \
  || bad "decode with synth:"
"$PY" - <<'EOF2' || fail=1
import glob, json, h5py, numpy as np, sys
a = h5py.File("file.h5", "r")["video"][()]
b = h5py.File("synth.h5", "r")["video"][()]
bad = 0
def say(ok, what):
    global bad
    print(("ok   " if ok else "FAIL ") + what)
    bad |= not ok
say(a.shape == (3, 5, 32, 48) and a.dtype == np.float32, "video %s %s: (3, 5, 32, 48) float32"
    % (a.shape, a.dtype))
say(np.isfinite(a).all() and a.min() >= -1 and a.max() <= 1, "the video is within [-1, 1]")
say(np.array_equal(a, b), "the init file and synth: decode to the same video bit for bit")
say(len(glob.glob("frames/*.png")) == 5, "--frames-dir: one PNG per video frame")
j = json.load(open("dec.json"))
say(j["frames"] == 5 and j["height"] == 32 and j["width"] == 48 and j["device"] == "cpu",
    "--json: frames, size, device")
sys.exit(bad)
EOF2

"$B" inspect vae22.h5 >inspect.txt 2>&1 || bad "inspect"
grep -q "preset wan2.2-vae-tiny" inspect.txt && grep -q "^encoder .*86 tensors" inspect.txt &&
  grep -q "^decoder .*110 tensors" inspect.txt && ok "inspect: the preset, 86 + 110 tensors" ||
  { bad "inspect"; cat inspect.txt; }
"$B" inspect synth:wan2.2-vae --json >inspect.json 2>/dev/null || bad "inspect --json"
"$PY" -c "
import json, sys
j = json.load(open('inspect.json'))
ok = (j['arch'] == 'wan2.2-vae' and j['decoder']['params'] == 555051580 and
      j['encoder']['params'] == 149637088 and j['space_factor'] == 16 and j['time_factor'] == 4)
print(('ok   ' if ok else 'FAIL ') + 'inspect --json of synth:wan2.2-vae: the published counts')
sys.exit(0 if ok else 1)" || fail=1

expect_fail "16 channels for the Wan 2.2 VAE" "latents have 16 channels; the Wan 2.2 VAE" \
  "$B" decode --vae vae22.h5 --latents lat16.h5 -o x.h5
expect_fail "48 channels for a Wan 2.1 VAE" "latents have 48 channels" \
  "$B" decode --vae synth:wan2.1-vae-tiny --latents lat.h5 -o x.h5
expect_fail "--tile" "decodes untiled" \
  "$B" decode --vae vae22.h5 --latents lat.h5 -o x.h5 --tile 2x2
expect_fail "the Wan 2.2 VAE where run needs a Wan 2.1 VAE" "wan2.2-vae" \
  "$B" run --model synth:wan2.1-tiny --cond cond.h5 --frames 5 --size 32x32 --steps 1 \
  -o l.h5 --vae vae22.h5 --video v.h5
# each refusal names the flag's value as given (fp8, not the stored format's name)
for d in fp8 int8 q8_0; do
  expect_fail "init --dtype $d" "--dtype $d: only a DiT has $d weights" \
    "$B" init --arch wan2.2-vae-tiny --dtype $d -o x.h5
done
[ -e x.h5 ] && bad "a refused command left x.h5"
exit $fail
