#!/usr/bin/env bash
# Attention benchmark, one run: our flash and cudnn backends
# (tests/gpu/test_attention_bench.c, built with the CUDA backend), every
# variant of our flash kernel (its --variants mode), and PyTorch's SDPA with
# its flash and cuDNN backends (attention.py), at 32,760 and 75,600 tokens
# x 40 heads x 128, self and cross (512 rows). Prints the tables ('#'
# header lines) and writes every result as one JSON array to $OUT_JSON
# (default attention-results.json in the current dir).
#
#   launch/bench/bench_attention.sh [BUILD_DIR] [--quick]   (default: build)
# --quick: the backends and torch at self-32760 only (3 timed runs); the
# variants run is the same either way. On an H200 it takes 28 s
# with --quick, 65 s without.
# BUILD_DIR must hold gpu_test_attention_bench (cmake with CUDA on).
# Exit status: nonzero when any check or timing failed.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
quick=0
build=
for a in "$@"; do
  case $a in
    --quick) quick=1 ;;
    -*) echo "usage: $0 [BUILD_DIR] [--quick]" >&2; exit 2 ;;
    *) build=$a ;;
  esac
done
build=${build:-${SP_BUILD:-$src/build}}
bin=$build/tests/gpu_test_attention_bench
[ -x "$bin" ] || bin=$(find "$build" -name gpu_test_attention_bench -type f -perm -u+x | head -1)
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "bench_attention: gpu_test_attention_bench not found under $build (configure with CUDA on and build it)" >&2
  exit 2
fi
py=${PYTHON:-python3}
out_json=${OUT_JSON:-attention-results.json}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

date -u '+# date %Y-%m-%dT%H:%M:%SZ'
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null | sed 's/^/# gpu /'
rc=0
own_flag=--bench torch_flag=
[ "$quick" -eq 1 ] && own_flag= torch_flag=--quick
"$bin" $own_flag 2>&1 | tee "$tmp/own.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
"$bin" --variants 2>&1 | tee "$tmp/variants.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
"$py" "$src/launch/bench/attention.py" $torch_flag 2>&1 | tee "$tmp/torch.txt"
prc=${PIPESTATUS[0]}
[ "$prc" -eq 0 ] || [ "$prc" -eq 77 ] || rc=1
{
  echo "["
  grep -h '^json ' "$tmp/own.txt" "$tmp/variants.txt" "$tmp/torch.txt" | sed 's/^json //' | sed '$!s/$/,/'
  echo "]"
} > "$out_json"
echo "# results: $out_json"
exit $rc
