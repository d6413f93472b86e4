#!/usr/bin/env bash
# --noise equal to the seed's noise gives the same latents as --seed (issue
# 5): the seeded run saves its initial noise with --save-noise, a second run
# starts from that file. Also: the saved noise is standard normal, another
# seed gives other noise, and two ranks draw the same noise as one.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir run-seed-noise
T=$work
"$SP_BIN" init --arch wan2.1-tiny --seed 3 -q -o "$T/m.h5" || exit 1
"$PY" -c 'import sys,h5py,numpy as np
r=np.random.default_rng()
with h5py.File(sys.argv[1],"w") as f:
    f["context"]=r.standard_normal((33,4096)).astype(np.float32)
    f["context_null"]=r.standard_normal((12,4096)).astype(np.float32)' "$T/cond.h5" || exit 1
S=$RANDOM
A=(--model "$T/m.h5" --cond "$T/cond.h5" --frames 9 --size 64x48 --steps 3 -q)
"$SP_BIN" run "${A[@]}" --seed $S --save-noise "$T/noise.h5" -o "$T/seed.h5" || { echo "FAIL seeded run"; exit 1; }
"$SP_BIN" run "${A[@]}" --noise "$T/noise.h5" -o "$T/file.h5" || { echo "FAIL --noise run"; exit 1; }
"$SP_BIN" run "${A[@]}" --seed $((S + 1)) --save-noise "$T/noise2.h5" -o "$T/seed2.h5" || { echo "FAIL other seed"; exit 1; }
mpirun -np 2 "$SP_BIN" run "${A[@]}" --seed $S --save-noise "$T/noise_np2.h5" -o "$T/np2.h5" || { echo "FAIL np 2"; exit 1; }
"$PY" - "$T" $S <<'PYEOF'
import os, sys, h5py, numpy as np
d, seed = sys.argv[1], int(sys.argv[2])
f = lambda n, k: h5py.File(os.path.join(d, n))[k][...]
ok = True
def check(cond, what):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok = ok and cond
n = f("noise.h5", "noise")
check(n.shape == (16, 3, 8, 6), f"saved noise shape {n.shape}")
check(int(h5py.File(os.path.join(d, "noise.h5")).attrs["seed"]) == seed, "saved noise records its seed")
z = n.astype(np.float64).ravel()
check(abs(z.mean()) < 0.1 and abs(z.std() - 1) < 0.1, f"noise mean {z.mean():.3f}, std {z.std():.3f}")
check(f("seed.h5", "latents").tobytes() == f("file.h5", "latents").tobytes(),
      "--noise of the seed's noise: latents bit-identical to --seed")
check(f("noise2.h5", "noise").tobytes() != n.tobytes(), "another seed gives other noise")
check(f("noise_np2.h5", "noise").tobytes() == n.tobytes() and
      f("np2.h5", "latents").tobytes() == f("seed.h5", "latents").tobytes(),
      "2 ranks: same noise and latents as 1")
sys.exit(0 if ok else 1)
PYEOF
