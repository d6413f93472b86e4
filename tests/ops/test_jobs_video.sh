#!/usr/bin/env bash
# run --vae with video= on several --jobs lines (a stream on 2 ranks, then a
# file on 1): the VAE's weights are read once per run, not once per job
# (one "read the VAE weights" line), and each job's video equals what
# `staticpipe decode` makes of that job's latents (bit-identical datasets).
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir jobs-video
cd "$work" || exit 1
sp_seed
VAE=synth:wan2.1-vae-tiny
"$PY" - $S <<'PYEOF' || exit 1
import sys, h5py, numpy as np
r = np.random.default_rng(int(sys.argv[1]))
with h5py.File("cond.h5", "w") as f:
    f["context"] = r.standard_normal((int(r.integers(1, 32)), 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((int(r.integers(1, 32)), 4096)).astype(np.float32)
PYEOF
same_h5() { # A B: every dataset of A equals B's, bit for bit
  "$PY" - "$1" "$2" <<'PYEOF'
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:3])
names = []
a.visit(lambda n: names.append(n) if isinstance(a[n], h5py.Dataset) else None)
ok = bool(names) and all(n in b and np.array_equal(a[n][...], b[n][...]) for n in names)
sys.exit(0 if ok else 1)
PYEOF
}
B=(--model synth:wan2.1-tiny --steps 2 --frames 5 --size 32x32 --vae $VAE)
for mode in stream file; do
  rm -f s*.h5* v*.h5
  lines=("cond=cond.h5 out=s1.h5 seed=$((S + 1)) video=v1.h5"
         "cond=cond.h5 out=s2.h5 seed=$((S + 2)) video=v2.h5 size=16x32"
         "cond=cond.h5 out=s3.h5 seed=$((S + 3)) video=v3.h5 frames=1")
  if [ $mode = stream ]; then
    printf '%s\n' "${lines[@]}" | mpirun -np 2 "$SP_BIN" run "${B[@]}" --jobs - > log.txt 2>&1; rc=$?
  else
    printf '%s\n' "${lines[@]}" > jobs.txt
    "$SP_BIN" run "${B[@]}" --jobs jobs.txt > log.txt 2>&1; rc=$?
  fi
  n=$(grep -c "decode: read the VAE weights" log.txt)
  [ $rc -eq 0 ] && [ "$n" = 1 ] && ok "$mode: 3 videos, the VAE's weights read once" \
    || bad "$mode: exit $rc, the weights read $n times: $(grep -e error -e 'VAE weights' log.txt | head -5)"
  for k in 1 2 3; do
    "$SP_BIN" decode --vae $VAE --latents s$k.h5 -o d$k.h5 -q 2>/dev/null \
      && same_h5 d$k.h5 v$k.h5 && ok "$mode: video $k equals decode of its latents" \
      || bad "$mode: video $k differs from decode of its latents"
  done
done
[ $fail -eq 0 ] && echo "jobs video: all checks passed" || echo "jobs video: FAILED"
exit $fail
