#!/usr/bin/env bash
# Builds REV (default: the merge base with main, else HEAD) in a worktree
# without CUDA, runs the golden commands with it and with BIN (default the
# build/ of this checkout), and compares the outputs bit for bit.
#
#   tests/golden/against.sh [REV] [BIN] [compare.py options]
#
# Work files go to ${SP_GOLDEN_DIR:-/tmp/sp-golden}; the base build is kept
# there per commit, so a second comparison against the same base is quick.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
rev=${1:-HEAD}
bin=$(realpath "${2:-$root/build/staticpipe}")
shift $(($# < 2 ? $# : 2))
dir=${SP_GOLDEN_DIR:-/tmp/sp-golden}
sha=$(git -C "$root" rev-parse --short=12 "$rev")
base=$dir/base-$sha
mkdir -p "$dir"
if [ ! -x "$base/build/staticpipe" ]; then
  rm -rf "$base"
  git -C "$root" worktree add --detach "$base" "$sha" >/dev/null
  echo "golden: building $sha (CPU only) in $base/build"
  STATICPIPE_CUDA=OFF SP_BUILD_DIR=$base/build bash "$base/launch/build.sh" >"$dir/build-$sha.log" 2>&1 ||
    { tail -20 "$dir/build-$sha.log"; exit 1; }
fi
rm -rf "$dir/old" "$dir/new"
# The inputs are made by the base binary, once, and shared by both runs.
bash "$root/tests/golden/run.sh" "$base/build/staticpipe" "$dir/old" "$dir/inputs-$sha"
bash "$root/tests/golden/run.sh" "$bin" "$dir/new" "$dir/inputs-$sha"
. "$root/tests/common/python.sh"
sp_python_find 'import h5py'
"$PY" "$root/tests/golden/compare.py" "$dir/old" "$dir/new" "$@"
