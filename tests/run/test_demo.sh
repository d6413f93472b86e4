#!/usr/bin/env bash
# launch/demo.sh end to end with this build's binary (SP_DEMO_BIN: nothing
# installed or built): exit 0; the three tiny models initialised, the
# prompt made into latents, a preview and a video by one run, and the
# 2-rank run's latents said to be bit-identical; no Python called (every
# python on PATH is a stand-in that fails and leaves a mark); the latents'
# CRC-32C that run logs equals the one computed here from the file
# (tests/common/h5crc.py, from the definition) and the 2-rank file's
# latents equal the first's byte for byte; the video an MP4 of 17 frames of
# 128x128 where FFmpeg's libraries load (ffprobe), and with them made
# missing (SP_FFMPEG_LIBDIR on an empty folder) an .h5 video
# [3, 17, 128, 128], the demo saying so. The last lines name each output.
set -u
: "${SP_SRC:?}" "${SP_BIN:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_need_tool mpirun
sp_work_dir demo
mkdir -p "$work/nopy"
for p in python python3 "$(basename "$PY")"; do
  printf '#!/bin/sh\necho "demo called %s" >> %s/python.called\nexit 99\n' "$p" "$work" >"$work/nopy/$p"
  chmod +x "$work/nopy/$p"
done
demo() { # OUTDIR [ENV...]: the demo with python hidden, its output in OUTDIR.log
  local d=$1
  shift
  env "$@" PATH="$work/nopy:$PATH" SP_DEMO_BIN="$SP_BIN" bash "$SP_SRC/launch/demo.sh" "$d" \
    "two cats dancing in the rain" >"$d.log" 2>&1
}
# The latents of run.log's CRC line, of the file, and the file's latents.
crc_check() { # DIR
  "$PY" - "$1" <<'PYEOF'
import re, sys, h5py
from h5crc import crc32c
d = sys.argv[1]
logged = re.findall(r"latents crc32c:([0-9a-f]{8})", open(d + "/run.log").read())
with h5py.File(d + "/latents.h5", "r") as f:
    a = f["latents"][...]
with h5py.File(d + "/latents_np2.h5", "r") as f:
    b = f["latents"][...]
want = "%08x" % crc32c(a.astype("<f4").tobytes())
ok = logged == [want] and a.shape == (16, 5, 16, 16) and a.tobytes() == b.tobytes()
print(f"logged {logged}, computed {want}, shape {a.shape}, 2 ranks same bytes: {a.tobytes() == b.tobytes()}")
sys.exit(0 if ok else 1)
PYEOF
}

demo "$work/d1"
rc=$?
[ $rc -eq 0 ] && ok "demo.sh exits 0" || bad "demo.sh: exit $rc: $(tail -n 20 "$work/d1.log")"
[ -e "$work/python.called" ] && bad "the demo called Python: $(cat "$work/python.called")" ||
  ok "no Python called"
for f in t5.h5 dit.h5 vae.h5 latents.h5 latents.h5.png latents_np2.h5; do
  [ -s "$work/d1/$f" ] || bad "no $f"
done
grep -q "init: wrote .*t5.h5 (umt5-tiny, bf16, seed 1, tokenizer the built-in tiny)" "$work/d1.log" &&
  ok "umt5-tiny initialised with its built-in tokenizer" || bad "no built-in tokenizer line"
grep -q "run --t5 $work/d1/t5.h5 --prompt two\\\\ cats" "$work/d1.log" &&
  grep -q "demo: latents of 1 rank and 2 ranks bit-identical (crc32c:" "$work/d1.log" &&
  ok "one run --t5 --prompt; 1 and 2 ranks said bit-identical" || bad "the run or the comparison: $(grep demo: "$work/d1.log")"
crc_check "$work/d1" && ok "the logged CRC-32C is the latents'; 2 ranks the same bytes" ||
  bad "the latents' CRC-32C or the 2-rank latents"
if sp_has_ffmpeg; then
  [ -s "$work/d1/video.mp4" ] && grep -q "ffplay $work/d1/video.mp4" "$work/d1.log" &&
    ok "the video is an MP4, with how to play it" || bad "no video.mp4 or no way to play it"
  if command -v ffprobe >/dev/null 2>&1; then
    s=$(ffprobe -v error -count_frames -show_entries stream=width,height,nb_read_frames -of csv=p=0 \
      "$work/d1/video.mp4")
    [ "$s" = "128,128,17" ] && ok "ffprobe: 17 frames of 128x128" || bad "ffprobe: $s"
  fi
else
  echo "skip the MP4 checks: FFmpeg's libraries do not load here"
fi
grep -q "video    $work/d1/video" "$work/d1.log" && grep -q "latents  $work/d1/latents.h5" "$work/d1.log" &&
  grep -q "preview  $work/d1/latents.h5.png" "$work/d1.log" &&
  ok "the end names the video, the latents and the preview" || bad "outputs not named: $(tail -n 8 "$work/d1.log")"

# FFmpeg's libraries missing: an .h5 video, said so.
mkdir -p "$work/noffmpeg"
demo "$work/d2" SP_FFMPEG_LIBDIR="$work/noffmpeg"
rc=$?
[ $rc -eq 0 ] && ok "demo.sh without FFmpeg exits 0" || bad "without FFmpeg: exit $rc: $(tail -n 20 "$work/d2.log")"
grep -q "FFmpeg's libraries are not found here" "$work/d2.log" && [ ! -e "$work/d2/video.mp4" ] &&
  "$PY" -c 'import sys, h5py; sys.exit(h5py.File(sys.argv[1])["video"].shape != (3, 17, 128, 128))' \
    "$work/d2/video.h5" && grep -q "frames-dir" "$work/d2.log" &&
  ok "without FFmpeg: said so, an .h5 video [3, 17, 128, 128], how to get PNG frames" ||
  bad "without FFmpeg: $(grep -i ffmpeg "$work/d2.log")"
crc_check "$work/d2" >/dev/null && [ "$(grep -o 'crc32c:[0-9a-f]*)' "$work/d1.log" | tail -n 1)" = \
  "$(grep -o 'crc32c:[0-9a-f]*)' "$work/d2.log" | tail -n 1)" ] &&
  ok "the same latents without FFmpeg" || bad "the latents differ without FFmpeg"
[ $fail -eq 0 ] && echo "demo: all checks passed" || echo "demo: FAILED"
exit $fail
