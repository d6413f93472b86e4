#!/usr/bin/env bash
# The fa3 GPU checks in one go, for a visit to an sm_90 machine: the small
# shapes first (so a broken kernel is seen before the long runs start), the
# compute-sanitizer tools on them, then every shape, the benchmark rows and
# the variant table. Each step has a time limit (a deadlocked kernel ends its
# step, not the visit); when a small step fails the long ones are skipped.
#   launch/bench/dev/fa3_gpu_check.sh BIN_DIR [LOG_DIR]
# BIN_DIR holds gpu_test_attention and gpu_test_attention_bench (a CUDA
# build's tests/ folder, built with 90 among CMAKE_CUDA_ARCHITECTURES).
# LOG_DIR (default ./fa3-logs) gets one log per step; a summary is printed
# last. STEPS="..." runs a subset, in this order:
#   small-fa3      gpu_test_attention --small --fa3-only            (60 s)
#   small-all      gpu_test_attention --small                       (120 s)
#   memcheck       compute-sanitizer memcheck, --small --fa3-only   (240 s)
#   racecheck      compute-sanitizer racecheck, the same            (360 s)
#   synccheck      compute-sanitizer synccheck, the same            (240 s)
#   bench-default  gpu_test_attention_bench                         (120 s)
#   fa3-variants   gpu_test_attention_bench --fa3-variants          (420 s)
#   full           gpu_test_attention (every shape)                 (540 s)
# (fa3, fa3-int8 and fa3-fp8 with their variants in each)
#   bench-full     gpu_test_attention_bench --bench                 (300 s)
set -u
bin=${1:?usage: fa3_gpu_check.sh BIN_DIR [LOG_DIR]}
logs=${2:-./fa3-logs}
steps=${STEPS:-small-fa3 small-all memcheck racecheck synccheck bench-default fa3-variants full bench-full}
mkdir -p "$logs"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
t=$bin/gpu_test_attention
b=$bin/gpu_test_attention_bench
summary=()
small_ok=1
# run NAME LIMIT_S CMD...: CMD into $logs/NAME.log, its result into the summary
run() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout -k 10 "$limit" "$@" >"$logs/$name.log" 2>&1
  local rc=$? what=ok
  [ $rc = 0 ] || what="FAILED rc $rc"
  { [ $rc = 124 ] || [ $rc = 137 ]; } && what="TIMED OUT after ${limit}s"
  [ $rc = 77 ] && what=skipped
  summary+=("$(printf '%-14s %-24s %4ds' "$name" "$what" $((SECONDS - t0)))")
  echo "== $name: $what ($((SECONDS - t0)) s)"
  grep -E "FAIL|DIFFERS|rror|azard" "$logs/$name.log" | head -20
  case $name in small-*) [ $rc = 0 ] || small_ok=0 ;; esac
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee "$logs/gpu.txt"
for s in $steps; do
  case $s in
  small-fa3) run $s 60 "$t" --small --fa3-only ;;
  small-all) run $s 120 "$t" --small ;;
  memcheck | racecheck | synccheck)
    run $s $([ $s = racecheck ] && echo 360 || echo 240) "$cs" --tool $s --error-exitcode 3 \
      "$t" --small --fa3-only ;;
  bench-default | fa3-variants | full | bench-full)
    if [ $small_ok = 0 ]; then
      summary+=("$(printf '%-14s %-24s' $s 'skipped (small failed)')")
      continue
    fi
    case $s in
    bench-default) run $s 120 "$b" ;;
    fa3-variants) run $s 420 "$b" --fa3-variants ;;
    full) run $s 540 "$t" ;;
    bench-full) run $s 300 "$b" --bench ;;
    esac ;;
  *) echo "fa3_gpu_check: unknown step $s" >&2 ;;
  esac
done
for f in bench-default fa3-variants bench-full; do
  [ -f "$logs/$f.log" ] && { echo "== $f table"; grep -v '^json ' "$logs/$f.log" | tail -48; }
done
echo "== summary (logs in $logs)"
printf '%s\n' "${summary[@]}"
