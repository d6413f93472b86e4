#!/usr/bin/env bash
# --trace (CPU backend): a valid Chrome trace with
# one process per rank and spans for every micro-batch's blocks; on a
# 2-rank pipeline with CFG the trace shows the stages working on different
# micro-batches at the same time (rank 1 runs micro-batch 0 while rank 0
# runs micro-batch 1); the traced run's latents equal an untraced one.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir trace
"$SP_BIN" init --arch wan2.1-tiny --seed 9 -q -o "$work/m.h5" || exit 1
"$PY" -c 'import sys,h5py,numpy as np
r=np.random.default_rng(1)
with h5py.File(sys.argv[1],"w") as f:
    f["context"]=r.standard_normal((64,4096)).astype(np.float32)
    f["context_null"]=r.standard_normal((16,4096)).astype(np.float32)' "$work/c.h5" || exit 1
A=(--model "$work/m.h5" --cond "$work/c.h5" --frames 17 --size 96x96 --steps 4 --budget "cuda:0,50%;cuda:1,*" -q)
mpirun -np 2 "$SP_BIN" run "${A[@]}" --trace "$work/trace.json" -o "$work/a.h5" || { echo "FAIL traced run"; exit 1; }
mpirun -np 2 "$SP_BIN" run "${A[@]}" -o "$work/b.h5" || { echo "FAIL untraced run"; exit 1; }
"$PY" - "$work" <<'PYEOF'
import json, sys, h5py
d = sys.argv[1]
tr = json.load(open(f"{d}/trace.json"))
ev = [e for e in tr["traceEvents"] if e.get("ph") == "X"]
ok = True
def check(c, what):
    global ok
    print(("ok   " if c else "FAIL ") + what)
    ok = ok and c
check({e["pid"] for e in ev} == {0, 1}, "one process per rank")
blocks = {(e["pid"], e["args"]["step"], e["args"]["micro_batch"]): e for e in ev if e["name"] == "blocks"}
check(len(blocks) == 2 * 4 * 2, f"a blocks span per rank, step and micro-batch ({len(blocks)})")
check(all(any(e["name"] == n for e in ev) for n in ("embed", "head", "sampler", "recv act", "step")),
      "embed, head, sampler, wait and step spans")
overlap = 0
for s in range(4):
    a, b = blocks[(1, s, 0)], blocks[(0, s, 1)]
    if a["ts"] < b["ts"] + b["dur"] and b["ts"] < a["ts"] + a["dur"]:
        overlap += 1
check(overlap >= 3, f"rank 1 on micro-batch 0 while rank 0 is on micro-batch 1: {overlap} of 4 steps")
same = h5py.File(f"{d}/a.h5")["latents"][...].tobytes() == h5py.File(f"{d}/b.h5")["latents"][...].tobytes()
check(same, "tracing changes nothing in the latents")
sys.exit(0 if ok else 1)
PYEOF
