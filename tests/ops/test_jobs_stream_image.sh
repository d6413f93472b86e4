#!/usr/bin/env bash
# --jobs - to an image-to-video model (tiny I2V), on 1 and 2 ranks: a
# streamed line's image-latents= gives latents bit-identical to the same
# job in a --jobs file (h5py, and the CRC-32C of run's "wrote" lines); a
# line whose latents are not the grid the stream was planned for (--frames,
# --size), one whose file is missing, one whose file is no HDF5 and an
# image= line (refused: its encoder runs before the model is placed, with
# what to give instead) each fail alone, naming the line and the check,
# and the lines after them still run. A text-to-video model refuses a
# streamed line's image-latents= alone.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir jobs-stream-image
sp_seed
cd "$work" || exit 1
"$PY" - "$S" <<'PY' || exit 1
import sys
import h5py, numpy as np
r = np.random.default_rng(int(sys.argv[1]))
with h5py.File("cond.h5", "w") as f:
    f["context"] = r.standard_normal((7, 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((4, 4096)).astype(np.float32)
# I2V-A14B's image latents [16, F, H/8, W/8]: 9 frames of 48x32.
for name, shape in (("lat_a", (16, 3, 6, 4)), ("lat_b", (16, 3, 6, 4)), ("lat_t", (16, 3, 4, 6))):
    with h5py.File(f"{name}.h5", "w") as f:
        f["latents"] = r.standard_normal(shape).astype(np.float32)
with open("text.h5", "w") as f:
    f.write("not an HDF5 file\n")
PY
M=(--model "synth:wan2.2-i2v-tiny:$S" --steps 2 --frames 9 --device cpu --timeout 30)

# The reference: the same two jobs in a --jobs file (its lines take their
# size from the latents; the command line's --size would be refused).
printf '%s\n' "cond=cond.h5 out=f1.h5 image-latents=lat_a.h5 seed=$((S + 1))" \
  "cond=cond.h5 out=f2.h5 image-latents=lat_b.h5 seed=$((S + 2))" >jobs.txt
if ! "$SP_BIN" run "${M[@]}" --jobs jobs.txt --no-preview >file.log 2>&1; then
  cat file.log; bad "the --jobs file reference: exit non-zero"; exit 1
fi
crc() { sed -n "s/.*wrote $1 .*crc32c:\([0-9a-f]*\)).*/\1/p" "$2"; }

for np in 1 2; do
  rm -f s*.h5
  printf '%s\n' "cond=cond.h5 out=s1.h5 image-latents=lat_a.h5 seed=$((S + 1))" \
    "cond=cond.h5 out=sx.h5 image-latents=lat_t.h5" \
    "cond=cond.h5 out=sy.h5 image=img.png" \
    "cond=cond.h5 out=sz.h5 image-latents=missing.h5" \
    "cond=cond.h5 out=sw.h5 image-latents=text.h5" \
    "cond=cond.h5 out=s2.h5 image-latents=lat_b.h5 seed=$((S + 2))" |
    timeout 120 mpirun -np $np "$SP_BIN" run "${M[@]}" --size 48x32 --no-preview --jobs - \
      >"s$np.log" 2>&1
  rc=$?
  if [ $rc -eq 2 ] && sp_same s1.h5 f1.h5 && sp_same s2.h5 f2.h5 &&
     [ -n "$(crc s1.h5 "s$np.log")" ] && [ "$(crc s1.h5 "s$np.log")" = "$(crc f1.h5 file.log)" ] &&
     [ "$(crc s2.h5 "s$np.log")" = "$(crc f2.h5 file.log)" ] &&
     [ ! -e sx.h5 ] && [ ! -e sy.h5 ] && [ ! -e sz.h5 ] && [ ! -e sw.h5 ]; then
    ok "np $np: streamed image-latents= bit-identical to the --jobs file's (exit $rc)"
  else bad "np $np: exit $rc: $(tail -5 "s$np.log")"; fi
  grep -qF "error: stdin:2: image-latents=lat_t.h5: dataset 'latents' is [16, 3, 4, 6]; the stream was planned for --frames 9 --size 48x32" "s$np.log" &&
    grep -qF "must be [16, 3, 6, 4]" "s$np.log" &&
    ok "np $np: a mismatched grid fails alone, naming the line and the plan" ||
    bad "np $np: mismatched grid: $(grep 'stdin:2' "s$np.log")"
  grep -qF "error: stdin:3: image=img.png: refused on a streamed line (the VAE encoder runs on rank 0 before the model is placed" "s$np.log" &&
    grep -qF "'staticpipe encode --vae VAE --model synth:wan2.2-i2v-tiny:$S --image img.png --frames 9 --size 48x32 -o L.h5'" "s$np.log" &&
    grep -qF "give image-latents=L.h5" "s$np.log" &&
    ok "np $np: image= refused with why and what to give instead" ||
    bad "np $np: image=: $(grep 'stdin:3' "s$np.log")"
  grep -qF "error: stdin:4: image-latents=missing.h5: cannot open" "s$np.log" &&
    grep -qF "error: stdin:5: image-latents=text.h5: not an HDF5 file" "s$np.log" &&
    ok "np $np: a missing and a malformed file fail alone, naming the line" ||
    bad "np $np: missing/malformed: $(grep -E 'stdin:[45]' "s$np.log")"
  [ "$(grep -c 'error:' "s$np.log")" = 4 ] && grep -q "jobs: 2 of 6 done, 4 failed (stdin)" "s$np.log" &&
    ok "np $np: one error per bad line, the summary" || bad "np $np: errors: $(grep error: "s$np.log")"
done

# A text-to-video model takes no image: the line fails alone, the next runs.
printf '%s\n' "cond=cond.h5 out=u1.h5 image-latents=lat_a.h5" "cond=cond.h5 out=u2.h5" |
  timeout 60 "$SP_BIN" run --model "synth:wan2.1-tiny:$S" --steps 1 --frames 5 --size 16x16 \
    --device cpu --no-preview --jobs - >t2v.log 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "stdin:1: image-latents: .* is a text-to-video model" t2v.log &&
  [ ! -e u1.h5 ] && [ -e u2.h5 ] && ok "T2V: a streamed image-latents= line fails alone" ||
  bad "T2V: exit $rc: $(cat t2v.log)"

[ $fail -eq 0 ] && echo "jobs stream image: all checks passed" || echo "jobs stream image: FAILED"
exit $fail
