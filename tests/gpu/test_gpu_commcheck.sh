#!/usr/bin/env bash
# commcheck on device buffers: p2p, all-to-all (comm_tp_alltoallv) and
# exchange, every byte checked, over the host-staged MPI transport with two
# ranks sharing one GPU, and over NCCL (the all-to-all as one grouped call)
# with one GPU per rank when two or more are visible; a corrupted byte of
# rank 1 is caught in every pattern. Skips (77) without a GPU.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_need_gpu
sp_mpi
export NCCL_NVLS_ENABLE=0
BIN=${SP_BIN:?SP_BIN is the staticpipe binary}
sp_work_dir gpu-commcheck
TMP=$work
ngpu=$(nvidia-smi -L | grep -c "^GPU")
# check TRANSPORT GPUS: with CUDA_VISIBLE_DEVICES=GPUS, a clean run (exit 0, every row ok) and a corrupted one
# (exit 1, a FAIL line from a receiver of rank 1 for each pattern)
check() {
  local tp=$1
  export CUDA_VISIBLE_DEVICES=$2
  timeout 300 mpirun -np 2 "$BIN" commcheck --device cuda --transport $tp --sizes 4kb,1mb \
    --iters 2 --timeout 60 --json >"$TMP/$tp.json" 2>"$TMP/$tp.err" ||
    { bad "$tp: exit $?: $(tail -3 "$TMP/$tp.err")"; return; }
  python3 - "$TMP/$tp.json" $tp <<'PY' || bad "$tp: JSON"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ok"] is True, r
assert sorted({x["pattern"] for x in r["results"]}) == ["alltoall", "exchange", "p2p"], r
for x in r["results"]:
    assert x["ok"] is True and x["transport"] == sys.argv[2] and x["memory"].startswith("cuda:"), x
PY
  timeout 300 mpirun -np 2 "$BIN" commcheck --device cuda --transport $tp --sizes 4kb --iters 1 \
    --timeout 60 --corrupt-rank 1 >"$TMP/$tp.bad" 2>"$TMP/$tp.baderr"
  [ $? -eq 1 ] || bad "$tp corrupted by rank 1: exit not 1"
  for p in p2p alltoall exchange; do
    grep -qE "FAIL $p [0-9]+ bytes \(cuda:[0-9]+\): rank [0-9]+ received from rank 1:" \
      "$TMP/$tp.baderr" || bad "$tp: no FAIL line for $p: $(grep FAIL "$TMP/$tp.baderr")"
  done
  [ $fail = 0 ] && echo "ok   $tp: every pattern checked, the corrupted byte caught"
}
check mpi 0 # two ranks on GPU 0
if [ "$ngpu" -ge 2 ]; then check nccl 0,1; else echo "nccl: needs 2 GPUs, $ngpu visible: not run"; fi
exit $fail
