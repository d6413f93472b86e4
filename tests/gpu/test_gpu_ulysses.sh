#!/usr/bin/env bash
# Ulysses on the CUDA stage (DESIGN.md "Layouts"), on one GPU whose ranks
# share it through the host-staged MPI transport: --layout 1x1x2 (2 ranks),
# 2x1x2 and 1x2x2 (4 ranks) against the 1-rank GPU run, with CFG and
# --cfg 1, both orders, streamed blocks, row-chunked transients, an uneven
# split of the tokens (27: 14 + 13), wan2.2-tiny's two experts and
# --layout auto (with two GPUs, 1x1x2 over NCCL too). With the flash
# backend the latents must be bit-identical: a Ulysses rank's GEMMs run
# the algorithm chosen for every token's rows
# (kern_cuda_gemm_pin_rows), and the flash kernel computes each (query
# row, head) on its own, whatever the heads of the call (H on one rank,
# H/U on a Ulysses rank). With the default backend (auto: cuDNN where it
# takes the shape) cuDNN picks its kernel per shape, the head count
# included, so the latents are bit-identical or within the bf16 end-to-end
# bound (STYLE.md 9: relative L2 2e-2); the test prints which. Skips (77)
# without a GPU.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_need_gpu
sp_python
sp_mpi
sp_work_dir gpu-ulysses
T=$work
S=${SP_SEED:-$RANDOM}
echo "seed $S (replay with SP_SEED=$S)"
"$SP_BIN" init --arch wan2.1-tiny --seed $S -q -o "$T/m.h5" || exit 1
"$SP_BIN" init --arch wan2.2-tiny --seed $((S + 1)) -q -o "$T/m22.h5" || exit 1
"$PY" - "$T/cond.h5" $S <<'PYEOF' || exit 1
import sys, h5py, numpy as np
r = np.random.default_rng(int(sys.argv[2]))
with h5py.File(sys.argv[1], "w") as f:
    f["context"] = r.standard_normal((int(r.integers(1, 513)), 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((int(r.integers(1, 513)), 4096)).astype(np.float32)
PYEOF
# cmp a.h5 b.h5: "same", or the relative L2 of b against a
cmp_latents() {
  "$PY" -c 'import sys,h5py,numpy as np
a=h5py.File(sys.argv[1])["latents"][...]; b=h5py.File(sys.argv[2])["latents"][...]
if a.shape != b.shape: print("shape %s against %s" % (b.shape, a.shape)); sys.exit()
if a.tobytes() == b.tobytes(): print("same"); sys.exit()
a = a.astype(np.float64); print("%.3e" % (np.linalg.norm(b - a) / np.linalg.norm(a)))' "$1" "$2"
}
# ranks of a layout (auto: on 2 ranks)
ranks() { [ "$1" = auto ] && echo 2 || echo "$1" | awk -Fx '{print $1 * $2 * $3}'; }
# 48x48 pixels, 9 frames: 27 tokens; 96x80, 17 frames: 150 tokens
SMALL=(--frames 9 --size 48x48)
WIDE=(--frames 17 --size 96x80)
A=(--cond "$T/cond.h5" --seed $S -q --device cuda)

# one NAME ARGS...: the 1-rank GPU run, the reference
one() {
  local name=$1
  shift
  "$SP_BIN" run "$@" -o "$T/$name.h5" 2> "$T/$name.err" ||
    { echo "FAIL 1-rank GPU run $name: $(grep error "$T/$name.err" | head -2)"; exit 1; }
}
# check NAME REF LAYOUT EXACT ARGS...: the run under mpirun against REF;
# EXACT 1: bit-identical; 0: bit-identical or within 2e-2 (see above)
check() {
  local name=$1 ref=$2 layout=$3 exact=$4
  shift 4
  if ! mpirun -np "$(ranks "$layout")" "$SP_BIN" run "$@" --layout "$layout" -o "$T/$name.h5" \
      > "$T/$name.out" 2> "$T/$name.err"; then
    bad "$name: --layout $layout failed: $(grep error "$T/$name.err" | head -2)"
    return
  fi
  local d
  d=$(cmp_latents "$T/$ref.h5" "$T/$name.h5")
  if [ "$d" = same ]; then
    ok "$name: --layout $layout bit-identical to 1 rank"
  elif [ "$exact" = 0 ] && "$PY" -c "import sys; sys.exit(0 if float('$d') <= 2e-2 else 1)" 2>/dev/null; then
    ok "$name: --layout $layout within $d relative L2 of 1 rank (<= 2e-2; cuDNN's kernel follows the head count)"
  else
    bad "$name: --layout $layout differs from 1 rank: $d"
  fi
}

F=(--model "$T/m.h5" "${A[@]}" --steps 3 --attn flash --transport mpi)
one cfg "${F[@]}" "${SMALL[@]}" --cfg 5
one nocfg "${F[@]}" "${SMALL[@]}" --cfg 1
one wide "${F[@]}" "${WIDE[@]}" --cfg 5
check cfg-1x1x2 cfg 1x1x2 1 "${F[@]}" "${SMALL[@]}" --cfg 5
check cfg-2x1x2-block cfg 2x1x2 1 "${F[@]}" "${SMALL[@]}" --cfg 5 --order block
check cfg-1x2x2 cfg 1x2x2 1 "${F[@]}" "${SMALL[@]}" --cfg 5
check cfg-1x2x2-stream-block cfg 1x2x2 1 "${F[@]}" "${SMALL[@]}" --cfg 5 --stream-frac 1 --order block
check nocfg-1x1x2 nocfg 1x1x2 1 "${F[@]}" "${SMALL[@]}" --cfg 1
check nocfg-1x2x2 nocfg 1x2x2 1 "${F[@]}" "${SMALL[@]}" --cfg 1
# 75 rows a rank in chunks of 64 and 11
check wide-1x1x2 wide 1x1x2 1 "${F[@]}" "${WIDE[@]}" --cfg 5
check wide-1x1x2-chunked wide 1x1x2 1 "${F[@]}" "${WIDE[@]}" --cfg 5 --chunk-rows 64
check auto-2 cfg auto 1 "${F[@]}" "${SMALL[@]}" --cfg 5

# Two experts (wan2.2-tiny): each step's expert on every Ulysses rank.
F22=(--model "$T/m22.h5" "${A[@]}" --transport mpi --attn flash "${SMALL[@]}" --steps 4)
one e "${F22[@]}"
check experts-1x1x2 e 1x1x2 1 "${F22[@]}"
check experts-1x2x2 e 1x2x2 1 "${F22[@]}"

# The default attention backend.
D=(--model "$T/m.h5" "${A[@]}" --transport mpi --steps 3 "${SMALL[@]}" --cfg 5)
one dflt "${D[@]}"
check dflt-1x1x2 dflt 1x1x2 0 "${D[@]}"
check dflt-2x1x2 dflt 2x1x2 0 "${D[@]}"

# With two GPUs or more, each rank on a GPU of its own: the all-to-alls
# over NCCL.
if [ "$(nvidia-smi -L | grep -c '^GPU')" -ge 2 ]; then
  check nccl-1x1x2 cfg 1x1x2 1 --model "$T/m.h5" "${A[@]}" --steps 3 --attn flash \
    --transport nccl "${SMALL[@]}" --cfg 5
else
  echo "(one GPU: the all-to-alls over NCCL not run)"
fi
exit $fail
