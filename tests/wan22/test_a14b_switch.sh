#!/bin/bash
# run --json reports the step that switches experts: 4 steps of shift 12
# have timesteps 999, 972, 922, 799 (MODEL.md "Sampler"), so --boundary
# 0.95 switches at step 2 (switch_step_ms, the mean of steps 1 and 3 in
# other_step_ms, switch_ratio their quotient), on 1 and 2 ranks; with
# --boundary 0.5 every step is high noise and a one-expert model has no
# experts: then there are no such keys.
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir wan22-switch
"$PY" - "$work/cond.h5" <<'PY' || exit 1
import sys, h5py, numpy as np
r = np.random.default_rng(7)
with h5py.File(sys.argv[1], "w") as f:
    f["context"] = r.standard_normal((9, 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((5, 4096)).astype(np.float32)
PY
run=(run --cond "$work/cond.h5" --frames 5 --size 32x32 --seed 3 --steps 4 --shift 12
     --device cpu --no-preview -q --json)
"$SP_BIN" "${run[@]}" --model synth:wan2.2-tiny --boundary 0.95 -o "$work/a.h5" \
  > "$work/switch1.json" || { echo "FAIL: 1 rank"; fail=1; }
mpirun -np 2 "$SP_BIN" "${run[@]}" --model synth:wan2.2-tiny --boundary 0.95 -o "$work/b.h5" \
  > "$work/switch2.json" || { echo "FAIL: 2 ranks"; fail=1; }
"$SP_BIN" "${run[@]}" --model synth:wan2.2-tiny --boundary 0.5 -o "$work/c.h5" \
  > "$work/high.json" || { echo "FAIL: all high noise"; fail=1; }
"$SP_BIN" "${run[@]}" --model synth:wan2.1-tiny --cfg 5 -o "$work/d.h5" > "$work/one.json" ||
  { echo "FAIL: one expert"; fail=1; }
"$PY" - "$work" <<'PY' || fail=1
import json, os, sys
d = sys.argv[1]
ok = True
def load(n):
    try:
        return json.loads(open(os.path.join(d, n)).read().strip().splitlines()[-1])
    except Exception as e:
        print(f"FAIL {n}: no JSON ({e})")
        return {}
for n in ("switch1.json", "switch2.json"):
    j = load(n)
    sw, other, ratio = (j.get(k, 0) for k in ("switch_step_ms", "other_step_ms", "switch_ratio"))
    good = j.get("steps") == 4 and sw > 0 and other > 0 and abs(ratio - sw / other) < 1e-9 * ratio
    # steps 1..3 (one switching, two others) lie within the sampling loop,
    # which also ran step 0
    good = good and sw + 2 * other < 1e3 * j.get("sample_s", 0)
    print(f"{'ok  ' if good else 'FAIL'} {n}: switch {sw:.2f} ms, others {other:.2f} ms, ratio {ratio:.3f}")
    ok &= good
for n in ("high.json", "one.json"):
    j = load(n)
    good = bool(j) and not any(k in j for k in ("switch_step_ms", "other_step_ms", "switch_ratio"))
    print(f"{'ok  ' if good else 'FAIL'} {n}: no switch keys")
    ok &= good
sys.exit(0 if ok else 1)
PY
exit $fail
