#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (ctest), then the
# converter's tests under AddressSanitizer + UBSan and a bounded fuzz run.
# GPU tests skip without a GPU. Exit status: 0 only when everything passed.
#
#   launch/test.sh              everything
#   launch/test.sh -L planner   only tests with that ctest label (no sanitizer/fuzz)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash launch/deps.sh || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
bash launch/build.sh || exit 1
status=0
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@" || status=1
if [ $# -eq 0 ]; then
  for extra in launch/sanitize.sh launch/fuzz.sh; do
    if [ -f "$extra" ]; then
      echo "== $extra"
      bash "$extra" || status=1
    fi
  done
fi
if [ $status -eq 0 ]; then echo "test.sh: all passed"; else echo "test.sh: FAILED"; fi
exit $status
