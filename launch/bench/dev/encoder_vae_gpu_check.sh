#!/usr/bin/env bash
# The GPU checks and timings of the UMT5 encoder's fused attention, the VAE
# decoder's tf32 mode and --attn auto's fa3 rule, for a visit to an sm_90
# machine: the small checks first (a broken kernel is seen before the long
# runs start), compute-sanitizer on them, the full tests, then the timings.
# Each step has a time limit; when a small step fails the long ones are
# skipped.
#   launch/bench/dev/encoder_vae_gpu_check.sh BUILD_DIR [LOG_DIR]
# BUILD_DIR: a CUDA build with 90 among CMAKE_CUDA_ARCHITECTURES (its
# staticpipe and tests/gpu_test_*). LOG_DIR (default ./gpu-check-logs) gets
# one log per step; a summary is printed last. STEPS="..." runs a subset, in
# this order (the four groups below each fit a 10-minute command):
#   t5-small       gpu_test_ops -o t5_attention --small               (60 s)
#   t5-memcheck    compute-sanitizer memcheck, the same               (180 s)
#   t5-racecheck   compute-sanitizer racecheck, the same              (240 s)
#   t5-ops         gpu_test_ops -o t5_attention (every row)           (60 s)
#   t5-gpu         gpu_test_t5_gpu (the ops and the encoder vs the CPU) (180 s)
#   vae-small      gpu_test_vae_gpu --small (bf16, fp32, tf32)        (120 s)
#   vae-memcheck   compute-sanitizer memcheck, the same               (300 s)
#   vae-gpu        gpu_test_vae_gpu (every case, three precisions)     (480 s)
#   attention      gpu_test_attention (every shape; auto against its rule;
#                  the long shapes in query chunks and single heads)   (480 s)
#   attn-bench     gpu_test_attention_bench --bench (self 8,190 and 16,380
#                  too: where the rule has no measurement)             (300 s)
#   vae-bench      gpu_test_vae_gpu --bench 60 104 21 --precision all (480 s)
#   t5-bench       launch/bench/bench_t5.sh BUILD_DIR (PyTorch beside) (480 s)
#   vae-algos      gpu_test_vae_gpu --algos 60 104 21 --precision bf16: every
#                  cuDNN algorithm of every decoder conv shape, timed
#                  (launch/bench/README.md; JSON in LOG_DIR/vae-algos.json) (540 s)
#   vae-engines    gpu_test_vae_gpu --engines 60 104 21 --precision bf16: the
#                  same shapes through cuDNN's backend API, every engine
#                  configuration of its heuristics and knob variants, timed
#                  (JSON in LOG_DIR/vae-engines.json)                   (540 s)
# Groups: STEPS="t5-small t5-memcheck t5-racecheck t5-ops t5-gpu vae-small",
# "vae-memcheck vae-gpu", "attention", "attn-bench vae-bench t5-bench",
# "vae-small vae-algos", "vae-small vae-engines".
set -u
root=$(cd "$(dirname "$0")/../../.." && pwd)
B=$(cd "${1:?usage: encoder_vae_gpu_check.sh BUILD_DIR [LOG_DIR]}" && pwd)
logs=${2:-./gpu-check-logs}
steps=${STEPS:-t5-small t5-memcheck t5-racecheck t5-ops t5-gpu vae-small vae-memcheck vae-gpu attention attn-bench vae-bench t5-bench vae-algos vae-engines}
mkdir -p "$logs"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
T=$B/tests
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
  grep -E "FAIL|DIFFER|rror|azard" "$logs/$name.log" | head -20
  case $name in *-small) [ $rc = 0 ] || small_ok=0 ;; esac
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee "$logs/gpu.txt"
for s in $steps; do
  case $s in
  t5-small) run $s 60 "$T/gpu_test_ops" -o t5_attention --small ;;
  t5-memcheck | t5-racecheck)
    run $s $([ $s = t5-racecheck ] && echo 240 || echo 180) "$cs" --tool "${s#t5-}" \
      --error-exitcode 3 "$T/gpu_test_ops" -o t5_attention --small ;;
  vae-small) run $s 120 "$T/gpu_test_vae_gpu" --small ;;
  vae-memcheck) run $s 300 "$cs" --tool memcheck --error-exitcode 3 "$T/gpu_test_vae_gpu" --small ;;
  t5-ops | t5-gpu | vae-gpu | attention | attn-bench | vae-bench | t5-bench | vae-algos | vae-engines)
    if [ $small_ok = 0 ]; then
      summary+=("$(printf '%-14s %-24s' $s 'skipped (small failed)')")
      continue
    fi
    case $s in
    t5-ops) run $s 60 "$T/gpu_test_ops" -o t5_attention ;;
    t5-gpu) run $s 180 "$T/gpu_test_t5_gpu" ;;
    vae-gpu) run $s 480 "$T/gpu_test_vae_gpu" ;;
    attention) run $s 480 "$T/gpu_test_attention" ;;
    attn-bench) run $s 300 "$T/gpu_test_attention_bench" --bench ;;
    vae-bench) run $s 480 "$T/gpu_test_vae_gpu" --bench 60 104 21 --reps 3 --precision all ;;
    t5-bench) run $s 480 bash "$root/launch/bench/bench_t5.sh" "$B" "$logs/bench-t5.json" ;;
    vae-algos) run $s 540 "$T/gpu_test_vae_gpu" --algos 60 104 21 --precision bf16 --json "$logs/vae-algos.json" ;;
    vae-engines) run $s 540 "$T/gpu_test_vae_gpu" --engines 60 104 21 --precision bf16 --json "$logs/vae-engines.json" ;;
    esac ;;
  *) echo "encoder_vae_gpu_check: unknown step $s" >&2 ;;
  esac
done
for f in t5-ops vae-gpu attn-bench vae-bench t5-bench vae-algos vae-engines; do
  [ -f "$logs/$f.log" ] && { echo "== $f"; grep -v -e '^json ' -e '^{"bench":"vae_conv_' "$logs/$f.log" | tail -30; }
done
echo "== summary (logs in $logs)"
printf '%s\n' "${summary[@]}"
