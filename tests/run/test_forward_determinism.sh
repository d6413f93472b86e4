#!/usr/bin/env bash
# forward is deterministic: two forwards, and forwards with 1 and
# 2 OpenMP threads, give bit-identical predictions; a different timestep
# gives a different one (so the comparison can fail).
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir run-forward-determinism
T=$work
"$SP_BIN" init --arch wan2.1-tiny --seed $RANDOM -q -o "$T/m.h5" || exit 1
"$PY" -c 'import sys,h5py,numpy as np
r=np.random.default_rng()
with h5py.File(sys.argv[1],"w") as f:
    f["latent"]=r.standard_normal((16,3,10,6)).astype(np.float32)
    f["context"]=r.standard_normal((int(r.integers(1,513)),4096)).astype(np.float32)' "$T/in.h5" || exit 1
F=(forward --model "$T/m.h5" --latent "$T/in.h5" --cond "$T/in.h5" --device cpu)
OMP_NUM_THREADS=1 "$SP_BIN" "${F[@]}" --timestep 631 -o "$T/a.h5" 2>/dev/null || exit 1
OMP_NUM_THREADS=2 "$SP_BIN" "${F[@]}" --timestep 631 -o "$T/b.h5" 2>/dev/null || exit 1
OMP_NUM_THREADS=2 "$SP_BIN" "${F[@]}" --timestep 631 -o "$T/c.h5" 2>/dev/null || exit 1
OMP_NUM_THREADS=2 "$SP_BIN" "${F[@]}" --timestep 632 -o "$T/d.h5" 2>/dev/null || exit 1
"$PY" - "$T" <<'PYEOF'
import sys, h5py
d = sys.argv[1]
p = {k: h5py.File(f"{d}/{k}.h5")["pred"][...].tobytes() for k in "abcd"}
ok = p["a"] == p["b"] == p["c"] and p["c"] != p["d"]
print(("ok  " if p["a"] == p["b"] else "FAIL") + " 1 and 2 threads bit-identical")
print(("ok  " if p["b"] == p["c"] else "FAIL") + " rerun bit-identical")
print(("ok  " if p["c"] != p["d"] else "FAIL") + " another timestep gives another prediction")
sys.exit(0 if ok else 1)
PYEOF
