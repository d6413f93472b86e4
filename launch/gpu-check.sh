#!/usr/bin/env bash
# Runs the GPU tests and first timings of a CUDA build on this machine, one
# log per step under OUTDIR, a summary line per step on stdout:
#
#   launch/gpu-check.sh BUILD_DIR [OUTDIR] [--quick]
#
# Steps: the op table (tests/gpu/test_ops), attention against the CPU,
# end-to-end forward GPU vs CPU, compute-sanitizer memcheck on the tiny
# model's forward and memcheck/racecheck on small attention shapes, every
# ctest test labelled gpu, then
# (unless --quick) the forward of synth:wan2.1-1.3b and -14b at 480x832x81
# with each attention backend, and the attention benchmark.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${1:?usage: gpu-check.sh BUILD_DIR [OUTDIR] [--quick]}" && pwd)
O=${2:-$root/gpu-check-out}
quick=0; [ "${3:-}" = "--quick" ] && quick=1
mkdir -p "$O"
export SP_BIN=$B/staticpipe SP_SRC=$root SP_BUILD=$B
export PATH=$PATH:/usr/local/cuda/bin NCCL_NVLS_ENABLE=0
. "$root/tests/common/find_python.sh"
echo "# gpu-check $(date -u +%FT%TZ) on $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
status=0
step() { # name command...
  local name=$1; shift
  local t0=$SECONDS
  "$@" > "$O/$name.log" 2>&1
  local rc=$?
  [ $rc -ne 0 ] && [ $rc -ne 77 ] && status=1
  printf '%-22s exit %3d  %4ds  %s\n' "$name" $rc $((SECONDS - t0)) "$(grep -E 'FAIL|fail|error|passed|TFLOP' "$O/$name.log" | tail -n 1 | cut -c1-110)"
}
T=$(mktemp -d)
"$SP_BIN" init --arch wan2.1-tiny --seed 5 -q -o "$T/tiny.h5"
"$PY" - "$T" <<'PYEOF'
import sys, h5py, numpy as np
r = np.random.default_rng(7)
with h5py.File(sys.argv[1] + "/small.h5", "w") as f:
    f["latent"] = r.standard_normal((16, 3, 8, 8)).astype(np.float32)
    f["context"] = r.standard_normal((40, 4096)).astype(np.float32)
with h5py.File(sys.argv[1] + "/480p.h5", "w") as f:
    f["latent"] = r.standard_normal((16, 21, 60, 104)).astype(np.float32)
    f["context"] = r.standard_normal((512, 4096)).astype(np.float32)
PYEOF

step ops "$B/tests/gpu_test_ops"
step attention "$B/tests/gpu_test_attention"
step forward_e2e bash "$root/tests/gpu/test_gpu_forward.sh"
step run_e2e bash "$root/tests/gpu/test_gpu_run.sh"
step memcheck_forward compute-sanitizer --tool memcheck --error-exitcode 1 "$SP_BIN" forward \
  --model "$T/tiny.h5" --latent "$T/small.h5" --cond "$T/small.h5" --timestep 700 --device cuda -o "$T/p.h5"
step memcheck_attention compute-sanitizer --tool memcheck --error-exitcode 1 "$B/tests/gpu_test_attention" --small
step racecheck_flash compute-sanitizer --tool racecheck --error-exitcode 1 "$B/tests/gpu_test_attention" --small --flash-only
# Every test labelled gpu (the ones above among them), each written for a
# path that only a GPU can check: ctest's summary is the step's line.
step ctest_gpu ctest --test-dir "$B" -L gpu --output-on-failure
if [ $quick -eq 0 ]; then
  for m in 1.3b 14b; do
    for a in cudnn flash; do
      step "forward_${m}_$a" "$SP_BIN" forward --model "synth:wan2.1-$m" --latent "$T/480p.h5" \
        --cond "$T/480p.h5" --timestep 999 --device cuda --attn $a -o "$T/pred_${m}_$a.h5"
    done
  done
  step attention_bench "$B/tests/gpu_test_attention_bench" --bench
fi
rm -rf "$T"
exit $status
