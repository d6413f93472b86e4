#!/usr/bin/env bash
# Non-finite values in a run: a model whose weights hold a NaN (written
# past convert, which refuses them) makes every run end with exit 1 and one
# fatal line naming the step and the rank whose computation produced the
# first non-finite value, and no output file.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir nonfinite
sp_seed
sp_tiny "$work/m.h5"
"$PY" - "$work" $S "$SP_SRC" <<'PYEOF' || exit 1
import sys, shutil, h5py, numpy as np
d, r = sys.argv[1], np.random.default_rng(int(sys.argv[2]))
with h5py.File(f"{d}/cond.h5", "w") as f:
    f["context"] = r.standard_normal((int(r.integers(1, 64)), 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((int(r.integers(1, 64)), 4096)).astype(np.float32)
# bf16 NaN (0x7fc0) in one weight: of the first block, of the last block,
# of the head. The dataset checksums no longer match: runs use --no-verify.
for name, ds in (("first", "blocks/0000/ffn.0.weight"), ("last", "blocks/0003/self_attn.o.weight"),
                 ("head", "head/head.head.weight")):
    shutil.copy(f"{d}/m.h5", f"{d}/{name}.h5")
    with h5py.File(f"{d}/{name}.h5", "r+") as f:
        x = f[ds][...]
        x.reshape(-1)[int(r.integers(0, x.size))] = 0x7FC0
        f[ds][...] = x
# The same NaN with every checksum made consistent (dataset and root):
# only a check of the values finds it.
sys.path.insert(0, sys.argv[3] + "/tests/common")
sys.path.insert(0, sys.argv[3] + "/tests/convert")
import h5crc, stlib
def tab(f):
    c = {k: int(np.asarray(f.attrs[k]).reshape(-1)[0]) for k in
         ("dim", "ffn_dim", "heads", "layers", "in_dim", "out_dim", "text_dim", "freq_dim")}
    return [stlib.h5_path(g, b, n) for g, b, n, _ in stlib.table(c)]
shutil.copy(f"{d}/first.h5", f"{d}/consistent.h5")
with h5py.File(f"{d}/consistent.h5", "r+") as f:
    order = tab(f)
    ds = f["blocks/0000/ffn.0.weight"]
    ds.attrs["checksum"] = np.uint32(h5crc.crc32c(ds[...].astype("<u2").tobytes()))
    f.attrs.modify("checksum", np.bytes_(h5crc.model_checksum(f[p].attrs["checksum"] for p in order)))
with h5py.File(f"{d}/m.h5", "r") as f:  # the order is the writer's: the root sum matches
    stored = f.attrs["checksum"]
    stored = stored.decode() if isinstance(stored, bytes) else str(stored)
    assert stored == h5crc.model_checksum(f[p].attrs["checksum"] for p in tab(f)), "table order"
PYEOF
out=$("$SP_BIN" inspect --verify "$work/consistent.h5" 2>&1); rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "error: $work/consistent.h5: /blocks/0000/ffn.0.weight: element .* is NaN"; then
  ok "inspect --verify names the non-finite weight"
else bad "inspect --verify of NaN weights (exit $rc): $out"; fi
B=(--cond "$work/cond.h5" -q --steps 3 --frames 5 --size 32x32 --no-verify)
expect() { # what  np  model  budget  want-rank  want-text
  local what=$1 np=$2 model=$3 budget=$4 rank=$5 text=$6 out rc
  out=$(mpirun -np "$np" "$SP_BIN" run --model "$work/$model.h5" "${B[@]}" --budget "$budget" -o "$work/o.h5" 2>&1); rc=$?
  local line
  line=$(printf '%s\n' "$out" | grep "fatal:" | head -1)
  if [ $rc -eq 1 ] && [ ! -e "$work/o.h5" ] && [ -z "$(ls "$work" | grep '\.tmp')" ] &&
     printf '%s' "$line" | grep -q "^\[rank $rank\] fatal: step 1 of 3: .*$text.*: a non-finite value (NaN)"; then
    ok "$what: $line"
  else bad "$what (exit $rc): $out"; fi
}
expect "1 rank, NaN in block 0" 1 first auto 0 "the head output this rank made"
expect "2 ranks, NaN in block 0: rank 0 named" 2 first "cuda:0,40%;cuda:1,60%" 0 "the activations this rank's blocks 0-"
expect "3 ranks, NaN in block 0: rank 0 named" 3 first "cuda:0,25%;cuda:1,25%;cuda:2,50%" 0 "the activations this rank's blocks 0-0"
expect "2 ranks, NaN in the last block: rank 1 named" 2 last "cuda:0,50%;cuda:1,50%" 1 "the head output this rank made"
expect "3 ranks, NaN in the head: rank 2 named" 3 head "cuda:0,25%;cuda:1,25%;cuda:2,50%" 2 "the head output this rank made"
# The healthy model still runs (and the check costs nothing visible).
mpirun -np 2 "$SP_BIN" run --model "$work/m.h5" "${B[@]}" -o "$work/good.h5" 2>/dev/null && [ -e "$work/good.h5" ] \
  && ok "a healthy model runs" || bad "a healthy model failed"
[ $fail -eq 0 ] && echo "nonfinite: all checks passed" || echo "nonfinite: FAILED"
exit $fail
