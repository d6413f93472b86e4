#!/usr/bin/env bash
# Latents to video through the product: `staticpipe decode` and
# `run --vae --video` on the tiny models.
#   - run's video equals decode's of the same latents, bit for bit, .h5 from
#     1 and 2 ranks; its PNG frames and its MP4 hold that video (the
#     independent checks of tests/io/check_video.py: PNG levels exactly,
#     ffprobe codec, size, fps and frame count, the decoded pixels within
#     what 4:2:0 and the codec cost);
#   - --fps reaches the file;
#   - --vae-precision tf32 is taken (on the CPU: the fp32 video), an unknown
#     precision refused;
#   - bad input exits 2 with one clear line before any work, leaving
#     nothing: the wrong channel count or rank, NaN latents, a DiT file as
#     the VAE, an output in a missing directory (for run: before sampling),
#     an unknown extension, --video without --vae, FFmpeg missing (.h5 still
#     works);
#   - --jobs with video=: a job whose video path is bad fails alone.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
for tool in ffmpeg ffprobe; do
  command -v $tool >/dev/null 2>&1 || sp_skip "$tool not found (launch/deps.sh installs it)"
done
B=$SP_BIN
CHK=$SP_SRC/tests/io/check_video.py
sp_work_dir vae-decode
T=$work
cd "$T" || exit 1
VAE=synth:wan2.1-vae-tiny
MODEL=synth:wan2.1-tiny
SHAPE=(--frames 5 --size 32x32 --steps 2)

"$PY" - <<'EOF' || exit 1
import h5py, numpy as np
r = np.random.default_rng(7)
with h5py.File("cond.h5", "w") as f:
    f["context"] = r.standard_normal((9, 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((5, 4096)).astype(np.float32)
with h5py.File("ch8.h5", "w") as f:
    f["latents"] = np.zeros((8, 2, 4, 4), np.float32)
with h5py.File("rank3.h5", "w") as f:
    f["latents"] = np.zeros((16, 4, 4), np.float32)
with h5py.File("nan.h5", "w") as f:
    z = np.zeros((16, 2, 4, 4), np.float32)
    z[5, 1, 2, 3] = np.nan
    f["latents"] = z
EOF

# expect_fail NAME PATTERN CMD...: exit 2, PATTERN in the log, no step run.
expect_fail() { sp_refused_early "step 1/" "$@"; }

# ---- the same video from run (1 and 2 ranks) and from decode
"$B" run --model $MODEL --cond cond.h5 "${SHAPE[@]}" -q -o lat1.h5 --vae $VAE --video run1.h5 \
  || bad "run --video (1 rank)"
mpirun -np 2 "$B" run --model $MODEL --cond cond.h5 "${SHAPE[@]}" -q -o lat2.h5 --vae $VAE \
  --video run2.h5 --fps 24 || bad "run --video (2 ranks)"
"$B" decode --vae $VAE --latents lat1.h5 -o dec.h5 -q || bad "decode to .h5"
"$B" decode --vae $VAE --latents lat1.h5 -o dec.mp4 --frames-dir frames --fps 12 -q \
  || bad "decode to .mp4 and PNG frames"
"$PY" - <<'EOF' || fail=1
import h5py, numpy as np, sys
v = {n: h5py.File(n + ".h5", "r") for n in ("run1", "run2", "dec")}
a = v["dec"]["video"][()]
bad = 0
if a.shape != (3, 5, 32, 32) or a.dtype != np.float32:
    print("FAIL decode's video is %s %s, expected float32 (3, 5, 32, 32)" % (a.dtype, a.shape)); bad = 1
if not (np.isfinite(a).all() and a.min() >= -1 and a.max() <= 1):
    print("FAIL decode's video is outside [-1, 1]"); bad = 1
frac = float(np.mean(np.abs(a) == 1))
if frac > 0.5:
    print("FAIL %.0f%% of the video is clamped: the tiny VAE says nothing" % (100 * frac)); bad = 1
for n in ("run1", "run2"):
    if not np.array_equal(v[n]["video"][()], a):
        print("FAIL %s.h5 differs from decode's video of the same latents" % n); bad = 1
    else:
        print("ok   %s.h5 equals decode's video bit for bit" % n)
for n, fps in (("run1", 16), ("run2", 24), ("dec", 16)):
    if float(v[n].attrs["fps"]) != fps:
        print("FAIL %s.h5 fps %s, expected %s" % (n, v[n].attrs["fps"], fps)); bad = 1
sys.exit(bad)
EOF
"$PY" "$CHK" png frames dec.h5 >chk.log 2>&1 && ok "PNG frames hold decode's video exactly" \
  || { bad "PNG frames"; cat chk.log; }
"$PY" "$CHK" video dec.mp4 dec.h5 12 h264 1 >chk.log 2>&1 \
  && ok "dec.mp4: h264, 32x32, 12 fps, 5 frames, pixels within the codec's bound" \
  || { bad "dec.mp4"; cat chk.log; }

# ---- --vae-precision: tf32 is taken (on the CPU, whose decoder is fp32 whatever is asked,
# the video of the default); an unknown one is refused
"$B" decode --vae $VAE --latents lat1.h5 -o dec_tf32.h5 -q --device cpu --vae-precision tf32 \
  || bad "decode --vae-precision tf32"
"$B" decode --vae $VAE --latents lat1.h5 -o dec_cpu.h5 -q --device cpu || bad "decode on the cpu"
"$PY" - <<'EOF' || fail=1
import h5py, numpy as np, sys
a, b = (h5py.File(n, "r")["video"][()] for n in ("dec_tf32.h5", "dec_cpu.h5"))
if not np.array_equal(a, b):
    print("FAIL --vae-precision tf32 on the CPU changed the video"); sys.exit(1)
print("ok   --vae-precision tf32 on the CPU: the fp32 video")
EOF
expect_fail "an unknown --vae-precision" "is not bf16, fp32 or tf32" \
  "$B" decode --vae $VAE --latents lat1.h5 -o x.h5 --vae-precision fp16

# ---- refusals before any work
expect_fail "8 latent channels" "latents have 8 channels" \
  "$B" decode --vae $VAE --latents ch8.h5 -o x.h5
expect_fail "latents of rank 3" "3 dimensions" "$B" decode --vae $VAE --latents rank3.h5 -o x.h5
expect_fail "NaN latents" "non-finite" "$B" decode --vae $VAE --latents nan.h5 -o x.h5
"$B" init --preset wan2.1-tiny --layers 1 -q -o dit.h5 || bad "init a DiT file"
expect_fail "a DiT file as --vae" "this command needs a wan2.1-vae VAE decoder" \
  "$B" decode --vae dit.h5 --latents lat1.h5 -o x.h5
expect_fail "decode into a missing directory" "cannot write to directory" \
  "$B" decode --vae $VAE --latents lat1.h5 -o nodir/x.mp4
expect_fail "an unknown extension" "unknown video extension" \
  "$B" decode --vae $VAE --latents lat1.h5 -o x.avi
expect_fail "run --video into a missing directory" "cannot write to directory" \
  "$B" run --model $MODEL --cond cond.h5 "${SHAPE[@]}" -o late.h5 --vae $VAE --video nodir/v.mp4
[ -e late.h5 ] && bad "the refused run left late.h5"
expect_fail "run --video without --vae" "needs --vae" \
  "$B" run --model $MODEL --cond cond.h5 "${SHAPE[@]}" -o late.h5 --video v.mp4
expect_fail "an output that is the latents" "is the same file as --latents" \
  "$B" decode --vae $VAE --latents lat1.h5 -o lat1.h5
expect_fail "a device node as the output" "is a character device" \
  "$B" decode --vae $VAE --latents lat1.h5 -o /dev/null
expect_fail "run --video naming the model's output" "is the same file as" \
  "$B" run --model $MODEL --cond cond.h5 "${SHAPE[@]}" -o late.h5 --vae $VAE --video late.h5

# ---- ComfyUI's .latent in: the same video as from the .h5, within the
# float32 rounding of the raw-space round trip
"$B" run --model $MODEL --cond cond.h5 "${SHAPE[@]}" -q -o lat1.latent || bad "run -o .latent"
"$B" decode --vae $VAE --latents lat1.latent -o dec_latent.h5 -q || bad "decode --latents .latent"
"$PY" - <<'EOF' && ok "decode of the .latent equals that of the .h5 within 1e-5" || fail=1
import h5py, numpy as np, sys
a = h5py.File("dec.h5", "r")["video"][()].astype(np.float64)
b = h5py.File("dec_latent.h5", "r")["video"][()].astype(np.float64)
e = np.linalg.norm(a - b) / np.linalg.norm(a)
print("     relative L2 %.2e" % e)
sys.exit(0 if e <= 1e-5 else 1)
EOF
mkdir -p noffmpeg
SP_FFMPEG_LIBDIR=$T/noffmpeg expect_fail "FFmpeg missing" "FFmpeg is not available" \
  "$B" decode --vae $VAE --latents lat1.h5 -o x.mp4
SP_FFMPEG_LIBDIR=$T/noffmpeg "$B" decode --vae $VAE --latents lat1.h5 -o x.h5 -q \
  && ok "without FFmpeg an .h5 video is still written" || bad "no .h5 without FFmpeg"
ls -a | grep -q '\.tmp-' && bad "a temporary file was left: $(ls -a | grep '\.tmp-')"

# ---- plan --vae: the CUDA decoder's bytes on the last rank, in its peak
for size in 480x832 720x1280; do
  "$B" plan --model synth:wan2.1-14b --ranks 2 --gpu-mem 80gb --size $size --json \
    >plan_$size.json 2>/dev/null || bad "plan --size $size"
  "$B" plan --model synth:wan2.1-14b --ranks 2 --gpu-mem 80gb --size $size --json \
    --vae synth:wan2.1-vae >planv_$size.json 2>/dev/null || bad "plan --vae --size $size"
done
"$PY" - <<'EOF' && ok "plan --vae: the decoder's bytes sit in the last rank's peak" || fail=1
import json, sys
def load(n):
    return json.load(open(n))["ranks"]
bad = 0
dec = {}
for size in ("480x832", "720x1280"):
    a, b = load("plan_%s.json" % size), load("planv_%s.json" % size)
    d = [r["decoder_bytes"] for r in b]
    dec[size] = d[-1]
    if d[0] != 0 or d[-1] <= 0 or any(r["decoder_bytes"] for r in a):
        print("FAIL %s: decoder bytes %s" % (size, d)); bad = 1
    same = b[-1]["first_block"] == a[-1]["first_block"] and b[-1]["chunk_rows"] == a[-1]["chunk_rows"]
    if same and b[-1]["peak_bytes"] != a[-1]["peak_bytes"] + d[-1]:
        print("FAIL %s: the last rank's peak %d is not %d + %d"
              % (size, b[-1]["peak_bytes"], a[-1]["peak_bytes"], d[-1])); bad = 1
if not dec["720x1280"] > dec["480x832"]:
    print("FAIL the decoder needs no more at 720p than at 480p: %s" % dec); bad = 1
sys.exit(bad)
EOF

# ---- --jobs: video= per line; a bad video path fails its job alone
cat >jobs.txt <<EOF
cond=cond.h5 out=j1.h5 video=j1.mp4
cond=cond.h5 out=j2.h5 video=nodir/j2.mp4
cond=cond.h5 out=j3.h5 video=j3v.h5 fps=8
EOF
"$B" run --model $MODEL "${SHAPE[@]}" --vae $VAE --jobs jobs.txt -q >jobs.log 2>&1
rc=$?
if [ $rc -ne 0 ] && [ -s j1.mp4 ] && [ -s j3v.h5 ] && [ ! -e j2.h5 ] &&
   grep -q "nodir/j2.mp4" jobs.log; then
  ok "jobs: the bad video line failed alone (exit $rc), the others wrote their videos"
else
  bad "jobs with video= (exit $rc)"; sed 's/^/     /' jobs.log
fi
exit $fail
