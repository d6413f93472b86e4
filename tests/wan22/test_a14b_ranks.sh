#!/bin/bash
# A two-expert run (switching experts, cfg 4,3, and with a LoRA on the
# high-noise expert) gives bit-identical latents for 1 to 4 ranks of the
# CPU backend, and a --jobs file with two jobs in flight equals their
# separate runs.
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir wan22-ranks
sp_seed seed
"$SP_BIN" init --arch wan2.1-tiny --seed 5 -o "$work/shape.h5" >/dev/null 2>&1 || exit 1
"$PY" - "$work" "$seed" <<'PY' || exit 1
import os, sys
import h5py, numpy as np
sys.path.insert(0, os.path.join(os.environ["SP_SRC"], "tests", "lora"))
import loralib
work, seed = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(seed)
c, _ = loralib.model_config(f"{work}/shape.h5")
loralib.make_loras(rng, c)[1].write(f"{work}/lora.safetensors")
with h5py.File(f"{work}/cond.h5", "w") as f:
    f["context"] = rng.standard_normal((9, 4096)).astype(np.float32)
    f["context_null"] = rng.standard_normal((5, 4096)).astype(np.float32)
PY
base=(run --model "synth:wan2.2-tiny:$seed" --cond "$work/cond.h5" --frames 5 --size 32x32
      --seed "$seed" --steps 6 --device cpu --no-preview -q)
for extra in "" "--lora $work/lora.safetensors:0.9@high"; do
  for n in 1 2 3 4; do
    # shellcheck disable=SC2086
    if ! mpirun -np "$n" "$SP_BIN" "${base[@]}" $extra -o "$work/r$n.h5" >"$work/log$n" 2>&1; then
      cat "$work/log$n"; echo "FAIL: $n ranks ($extra)"; fail=1
    fi
  done
  "$PY" - "$work" "$extra" <<'PY' || fail=1
import sys, h5py, numpy as np
work, extra = sys.argv[1], sys.argv[2] or "no LoRA"
ref = h5py.File(f"{work}/r1.h5", "r")["latents"][...]
ok = bool(np.all(np.isfinite(ref)))
for n in (2, 3, 4):
    a = h5py.File(f"{work}/r{n}.h5", "r")["latents"][...]
    same = np.array_equal(a.view(np.uint32), ref.view(np.uint32))
    print(f"two experts ({extra}): {n} ranks {'bit-identical to' if same else 'DIFFER from'} 1 rank")
    ok &= same
sys.exit(0 if ok else 1)
PY
  cp "$work/r1.h5" "$work/first-$([ -z "$extra" ] && echo base || echo lora).h5"
done
# Two jobs in flight together (2 ranks), each equal to its own run; a line
# with two guidance values and one with a boundary of its own.
cat >"$work/jobs.txt" <<EOF2
cond=$work/cond.h5 out=$work/j1.h5 seed=$seed
cond=$work/cond.h5 out=$work/j2.h5 seed=$((seed + 1)) cfg=2,5 boundary=0.9
EOF2
if ! mpirun -np 2 "$SP_BIN" run --model "synth:wan2.2-tiny:$seed" --jobs "$work/jobs.txt" \
     --frames 5 --size 32x32 --steps 6 --device cpu --no-preview -q >"$work/logj" 2>&1; then
  cat "$work/logj"; echo "FAIL: --jobs"; fail=1
fi
sp_last_wins "$SP_BIN" "${base[@]}" --seed $((seed + 1)) --cfg 2,5 --boundary 0.9 \
  -o "$work/s2.h5" >"$work/logs2" 2>&1 || { cat "$work/logs2"; fail=1; }
"$PY" - "$work" <<'PY' || fail=1
import sys, h5py, numpy as np
w = sys.argv[1]
ok = True
for j, s in (("j1", "first-base"), ("j2", "s2")):
    a = h5py.File(f"{w}/{j}.h5", "r")["latents"][...]
    b = h5py.File(f"{w}/{s}.h5", "r")["latents"][...]
    same = np.array_equal(a.view(np.uint32), b.view(np.uint32))
    print(f"--jobs {j}: {'bit-identical to' if same else 'DIFFERS from'} its own run")
    ok &= same
sys.exit(0 if ok else 1)
PY
exit $fail
