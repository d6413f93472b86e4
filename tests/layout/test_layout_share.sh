#!/usr/bin/env bash
# The plan of a run with Ulysses ranks counts each rank's share of the
# tokens, as the run splits them: on wan2.1-tiny's 27 tokens (9 frames,
# 48x48), `run --json` under 1x1x2 and 1x2x2 gives a plan whose ranks hold
# ceil(27 / 2) = 14 tokens, whose activation bytes (the stage's arena
# without weights) are below the one-process plan's, and whose ranks'
# activation messages, as the CPU stages allocate them, hold 14 and 13 rows
# (seq rank 0 and 1): (rows + 7) x dim fp32, dim read from the one-process
# run (27 + 7 rows).
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir layout-share
sp_seed
sp_tiny "$work/m.h5"
"$PY" - "$work" $S <<'PYEOF' || exit 1
import sys, h5py, numpy as np
d, r = sys.argv[1], np.random.default_rng(int(sys.argv[2]))
with h5py.File(f"{d}/a.h5", "w") as f:
    f["context"] = r.standard_normal((7, 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((5, 4096)).astype(np.float32)
PYEOF
ARGS=(--model "$work/m.h5" --cond "$work/a.h5" --frames 9 --size 48x48 --steps 1 --seed $S --cfg 4.5
      -q --json)
"$SP_BIN" run "${ARGS[@]}" -o "$work/one.h5" >"$work/one.json" 2>"$work/one.err" ||
  { echo "FAIL one-process run: $(cat "$work/one.err")"; exit 1; }
for layout in 1x1x2 1x2x2; do
  n=$(echo $layout | awk -Fx '{print $1 * $2 * $3}')
  if ! mpirun -np $n "$SP_BIN" run "${ARGS[@]}" --layout $layout -o "$work/$layout.h5" \
      >"$work/$layout.json" 2>"$work/$layout.err"; then
    echo "FAIL $layout: $(grep -i error "$work/$layout.err" | head -2)"
    fail=1
    continue
  fi
  "$PY" - "$work/one.json" "$work/$layout.json" $layout <<'PYEOF' && echo "ok   $layout" || fail=1
import json, sys
one, run = (json.load(open(p)) for p in sys.argv[1:3])
R, S, U = (int(x) for x in sys.argv[3].split("x"))
L = 27
rows = [L // U + (u < L % U) for u in range(U)]  # contiguous slices, the longer first
assert rows == [14, 13], rows
p1, p = one["plan"], run["plan"]
dim = one["ranks"][0]["act_bytes"] // ((L + 7) * 4)
assert one["ranks"][0]["act_bytes"] == (L + 7) * dim * 4, one["ranks"][0]
assert p["tokens"] == L and p["rank_tokens"] == -(-L // U) == max(rows), p
assert p1["rank_tokens"] == L, p1
for q in p["ranks"]:
    assert q["chunk_rows"] <= max(rows), q
# what each CPU stage allocates: its rows, rank = (r S + s) U + u
for rank, st in enumerate(run["ranks"]):
    u = rank % U
    want = (rows[u] + 7) * dim * 4
    assert st["act_bytes"] == want, (rank, st["act_bytes"], want)
# the one-process plan and the 1x1x2 one have the same single stage: the
# Ulysses rank's arena (with its all-to-all buffers) is the smaller
if S == 1:
    assert p["ranks"][0]["act_bytes"] < p1["ranks"][0]["act_bytes"], (p["ranks"][0], p1["ranks"][0])
PYEOF
done
[ $fail = 0 ] && echo "all ok"
exit $fail
