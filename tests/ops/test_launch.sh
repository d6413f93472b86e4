#!/usr/bin/env bash
# launch/run-local.sh: -n 3 runs a 3-rank pipeline whose latents equal the
# single-process run's bit for bit; bad -n is refused; --transport nccl is
# refused on the cpu backend with the reason.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
command -v mpirun >/dev/null || { echo "mpirun not found: run launch/deps.sh"; exit 1; }
export OMP_NUM_THREADS=1
sp_work_dir launch
"$SP_BIN" init --arch wan2.1-tiny --seed $RANDOM -q -o "$work/m.h5" || exit 1
"$PY" -c 'import sys,h5py,numpy as np
r=np.random.default_rng(); f=h5py.File(sys.argv[1],"w")
f["context"]=r.standard_normal((int(r.integers(1,512)),4096)).astype(np.float32)
f["context_null"]=r.standard_normal((int(r.integers(1,512)),4096)).astype(np.float32)' "$work/c.h5" || exit 1
A=(run --model "$work/m.h5" --cond "$work/c.h5" --frames 9 --size 64x48 --steps 2 --seed $RANDOM -q)
"$SP_BIN" "${A[@]}" -o "$work/one.h5" || exit 1
"$SP_SRC/launch/run-local.sh" -n 3 --bin "$SP_BIN" -- "${A[@]}" -o "$work/three.h5" 2>"$work/rl.err" \
  && "$PY" -c 'import sys,h5py
a=h5py.File(sys.argv[1])["latents"][...].tobytes(); b=h5py.File(sys.argv[2])["latents"][...].tobytes()
sys.exit(a != b)' "$work/one.h5" "$work/three.h5" && ok "run-local.sh -n 3: bit-identical to one process" \
  || bad "run-local.sh -n 3: $(cat "$work/rl.err")"
out=$("$SP_SRC/launch/run-local.sh" -n zero --bin "$SP_BIN" -- "${A[@]}" -o "$work/x.h5" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "positive number" && ok "run-local.sh -n zero refused" || bad "-n zero: $rc $out"
out=$("$SP_SRC/launch/run-local.sh" -n 2 --bin "$SP_BIN" -- "${A[@]}" --transport nccl -o "$work/x.h5" 2>&1); rc=$?
if [ $rc -ne 0 ] && echo "$out" | grep -q "\[rank 0\] error: --transport nccl: the cpu backend" && [ ! -e "$work/x.h5" ]; then
  ok "--transport nccl refused on the cpu backend"
else bad "--transport nccl on cpu: $rc $out"; fi
[ $fail -eq 0 ] && echo "launch: all checks passed" || echo "launch: FAILED"
exit $fail
