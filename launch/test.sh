#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs the
# tests. Two tiers (tests/README.md; tests/CMakeLists.txt labels them):
#
#   launch/test.sh          the quick tier, within 10 minutes on 2 cores from
#                           a clean clone, the build included: a build
#                           without CUDA in build-cpu/, the tests labelled
#                           quick (the unit tests, the numpy references, one
#                           multi-rank run per transport, the install), then
#                           the sanitizer subset (launch/sanitize.sh: the
#                           tests labelled sanitize, ASan + UBSan build in
#                           build-asan/)
#   launch/test.sh --full   the full suite (.ci/run): a build with the CUDA
#                           backend for the default GPU architectures in
#                           build/ (nvcc needed; without it the CPU engine
#                           alone, said in the summary, a failure under
#                           CI=true), every test (multi-rank runs under
#                           mpirun, Slurm, fuzzing: ctest -L fuzz; GPU tests
#                           skip without a GPU), then the sanitizer pass
#   launch/test.sh [--full] CTEST-ARGS...
#                           only those tests on that tier's build, e.g.
#                           -L pipeline, -R 'ops.test_jobs.sh', no sanitizer
#
# Env: SP_BUILD_DIR (the build folder), SP_JOBS (parallel jobs, default
# nproc). The last line says passed or FAILED, the counts and every skipped
# test by name (a skipped test never counts as passed); the lines before it
# say why each was skipped and how to run the rest.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
tier=quick
if [ "${1:-}" = --full ]; then tier=full; shift; fi
jobs=${SP_JOBS:-$(nproc)}
t0=$SECONDS
bash launch/deps.sh || exit 1
# mpirun refuses to run as root unless told twice; the tests' ranks set it
# too (tests/common/mpi_env.sh).
if [ "$(id -u)" = 0 ]; then
  echo "test.sh: running as root: mpirun needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" \
    "(set here; export them to call mpirun as root yourself)"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1

notes=()
if [ $tier = quick ]; then
  build=${SP_BUILD_DIR:-$root/build-cpu}
  STATICPIPE_CUDA=OFF SP_BUILD_DIR=$build SP_JOBS=$jobs bash launch/build.sh >/dev/null || exit 1
  select=(-L quick)
else
  build=${SP_BUILD_DIR:-$root/build}
  SP_BUILD_DIR=$build SP_JOBS=$jobs bash launch/build.sh >/dev/null || exit 1
  select=()
  if ! grep -q '^STATICPIPE_CUDA:BOOL=ON' "$build/CMakeCache.txt"; then
    notes+=("the CUDA code was not compiled (no nvcc found, or STATICPIPE_CUDA=OFF)")
    if [ -n "${CI:-}" ] && [ "$CI" != false ] && [ "$CI" != 0 ]; then
      notes+=("CI=$CI: the full suite must compile the CUDA code: FAILED")
      cuda_missing=1
    fi
  fi
fi
[ $# -gt 0 ] && select=("$@")

logs=$(mktemp -d "${TMPDIR:-/tmp}/sp-test.XXXXXX") || exit 1
trap 'rm -rf "$logs"' EXIT
status=0
echo "== ctest --test-dir $build ${select[*]} (tier: $tier)"
ctest --test-dir "$build" --output-on-failure -j"$jobs" "${select[@]}" 2>&1 | tee "$logs/ctest.out"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
cp "$build/Testing/Temporary/LastTest.log" "$logs/ctest.log" 2>/dev/null
if [ $# -eq 0 ]; then
  echo "== launch/sanitize.sh (the tests labelled sanitize, ASan + UBSan)"
  JOBS=$jobs bash launch/sanitize.sh 2>&1 | tee "$logs/sanitize.out"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  cp "${SANITIZE_BUILD:-$root/build-asan}/Testing/Temporary/LastTest.log" "$logs/sanitize.log" 2>/dev/null
fi
[ "${cuda_missing:-0}" = 1 ] && status=1

# The summary, from ctest's result lines ("12/57 Test #3: NAME ...   Passed")
# and, for each skipped test, the first line of its output that says skip
# (LastTest.log keeps every test's output).
passed=0
failed=()
skipped=()
for run in ctest sanitize; do
  [ -f "$logs/$run.out" ] || continue
  tag=
  [ $run = sanitize ] && tag=" (asan)"
  while read -r name result; do
    case $result in
      Passed) passed=$((passed + 1)) ;;
      Skipped)
        skipped+=("$name$tag")
        why=$(awk -v t="$name" '
          /^[0-9]+\/[0-9]+ Testing: / { on = ($3 == t); out = 0; next }
          on && /^Output:/ { out = 1; next }
          out && tolower($0) ~ /skip/ { sub(/^skip: /, ""); print; exit }
        ' "$logs/$run.log" 2>/dev/null)
        echo "  $name$tag: ${why:-(no reason printed)}" >>"$logs/why" ;;
      *) failed+=("$name$tag ($result)") ;;
    esac
  done < <(sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) [ .]*\**\([A-Za-z][A-Za-z ]*[a-z]\).*/\1 \2/p' \
    "$logs/$run.out")
done
dt=$((SECONDS - t0))
took="$((dt / 60))m$(printf '%02d' $((dt % 60)))s"
echo
echo "== summary (tier: $tier, build: $build)"
for n in "${notes[@]}"; do echo "note: $n"; done
if [ -s "$logs/why" ]; then
  echo "skipped, and why:"
  cat "$logs/why"
fi
[ ${#failed[@]} -eq 0 ] || echo "failed: ${failed[*]}"
if [ $tier = quick ]; then
  echo "the rest: launch/test.sh --full (the full suite, as .ci/run runs it); one label:" \
    "launch/test.sh -L LABEL; one test: launch/test.sh -R NAME; the GPU tests on a GPU machine:" \
    "launch/test.sh --full -L gpu (tests/README.md)"
fi
[ ${#failed[@]} -eq 0 ] && [ $passed -gt 0 ] || status=1
verdict=passed
[ $status -eq 0 ] || verdict=FAILED
echo "test.sh: $tier tier $verdict in $took: $passed passed, ${#failed[@]} failed, ${#skipped[@]} skipped${skipped:+: ${skipped[*]}}"
exit $status
