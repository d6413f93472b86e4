#!/usr/bin/env bash
# Layouts with the CUDA stage (skips, 77, without a GPU): replicas exchange
# host velocities only, so --layout 2x1x1 and 2x2x1 with --device cuda (the
# ranks sharing the GPU through the host-staged MPI transport), in both
# orders and with every block streamed, give latents bit-identical to the
# 1-rank GPU run. Sequence-parallel ranks on the CUDA stage:
# tests/gpu/test_gpu_ulysses.sh.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_need_gpu
sp_python
sp_mpi
sp_work_dir layouts-gpu
sp_seed
sp_tiny "$work/m.h5"
sp_cond 513 "$work/cond.h5"
A=(--model "$work/m.h5" --cond "$work/cond.h5" --frames 17 --size 96x80 --steps 4 --cfg 5 --seed $S
   -q --device cuda --transport mpi)
"$SP_BIN" run "${A[@]}" -o "$work/one.h5" || { echo "FAIL 1-rank GPU run"; exit 1; }
for c in "2 2x1x1 micro 0" "2 2x1x1 block 1" "4 2x2x1 micro 1" "4 2x2x1 block 0"; do
  set -- $c
  name="$2-$3-$4"
  if mpirun -np $1 "$SP_BIN" run "${A[@]}" --layout $2 --order $3 --stream-frac $4 \
      -o "$work/$name.h5" 2> "$work/$name.err"; then
    sp_same "$work/one.h5" "$work/$name.h5" && ok "--layout $2 --order $3 --stream-frac $4: bit-identical to 1 rank" \
      || bad "--layout $2 --order $3 --stream-frac $4: latents differ from 1 rank"
  else
    bad "--layout $2 --order $3 --stream-frac $4 failed: $(grep error "$work/$name.err" | head -2)"
  fi
done
exit $fail
