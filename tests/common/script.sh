# Sourced by every script test first: the preamble they share. Source it
# after "set -u"; ctest sets SP_SRC, SP_BIN and SP_BUILD (SP_SRC defaults to
# the checkout this file is in). It sources skip.sh (sp_skip) itself and
# puts tests/common on PYTHONPATH, so inline Python imports sptest (the
# Python tests' shared module).
#
# sp_need_gpu: ends the test as skipped (exit 77, everywhere, CI included)
#   when no GPU is visible (nvidia-smi -L fails) or SP_BIN was built without
#   CUDA.
# sp_python: PY = a python3 with numpy and h5py (find_python.sh: a failure
#   without one, skipped only with SP_ALLOW_SKIP=1 outside CI).
# sp_mpi: mpirun's environment for the tests (mpi_env.sh: root allowed,
#   oversubscribed, one OpenMP thread per rank); a failure without mpirun.
# sp_need_tool CMD... : sp_skip naming the first CMD not on PATH.
# sp_need_bin: a failure unless SP_BIN is the staticpipe binary.
# sp_helper VAR NAME: VAR = $SP_BUILD/tests/NAME, a helper executable the
#   build makes; a failure when it is not there.
# sp_work_dir NAME: a fresh directory, its path in $work (under TMPDIR,
#   named sp-NAME.XXXXXX), removed with everything in it when the script
#   exits; a failure to make it ends the script with exit 1. MP, when a
#   script sets it to a background process id (an mpirun it waits on), is
#   killed (SIGKILL) at exit first.
# sp_seed [VAR]: VAR (default S) set to SP_SEED, or a fresh $RANDOM, and
#   printed "seed N (replay with SP_SEED=N)".
# sp_tiny FILE [INIT-FLAGS...]: the wan2.1-tiny model written to FILE with
#   --seed $S (after sp_seed) and INIT-FLAGS; a failure ends with exit 1.
# sp_cond MAX FILE...: cond files (PY set), in the order given: each a
#   context then a context_null, (n, 4096) float32 standard normal with n
#   drawn in [1, MAX), all from one numpy default_rng($S); a failure ends
#   with exit 1.
# sp_same A B [DATASET]: exit 0 when DATASET (default latents) of the HDF5
#   files A and B has the same shape and the same bytes.
# sp_python_with IMPORTS WHAT: PY as sp_python_find (python.sh) sets it;
#   when no python3 runs IMPORTS, sp_skip "no python3 with WHAT" (a
#   failure under CI).
# ok MSG / bad MSG: one passed / failed check printed ("ok   MSG",
#   "FAIL MSG"); bad sets fail=1, which the script ends with (exit $fail).
# sp_refused NAME NEEDLE CMD...: runs CMD (after sp_work_dir); bad unless
#   it exits 2 (bad usage or input) with NEEDLE, a fixed string, in its
#   stderr.
SP_SRC=${SP_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
. "$SP_SRC/tests/common/skip.sh"
. "$SP_SRC/tests/common/python.sh"
# sp_last_wins / sp_last_wins_args (args.sh): a base command with what a
# case changes, each repeated option kept at its last place.
. "$SP_SRC/tests/common/args.sh"
export PYTHONPATH="$SP_SRC/tests/common${PYTHONPATH:+:$PYTHONPATH}"

fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

sp_need_gpu() {
  nvidia-smi -L >/dev/null 2>&1 ||
    { echo "skip: no GPU visible (nvidia-smi -L failed)"; exit 77; }
  if [ -n "${SP_BIN:-}" ] && "$SP_BIN" --version 2>/dev/null | grep -q '^cuda: none'; then
    echo "skip: $SP_BIN is built without CUDA"
    exit 77
  fi
}

sp_python() { . "$SP_SRC/tests/common/find_python.sh"; }

sp_mpi() { . "$SP_SRC/tests/common/mpi_env.sh"; }

sp_need_tool() {
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null 2>&1 || sp_skip "$t not found (launch/deps.sh installs it)"
  done
}

# Whether this binary loads FFmpeg's libraries (decode --help says), so
# video outputs can be .mp4; without them run and decode write .h5 only.
sp_has_ffmpeg() { "$SP_BIN" decode --help 2>/dev/null | grep -q "Here: libavformat"; }

sp_need_bin() {
  [ -n "${SP_BIN:-}" ] && [ -x "$SP_BIN" ] || {
    echo "FAIL: SP_BIN is not set to the staticpipe binary (ctest sets it)" >&2
    exit 1
  }
}

sp_helper() {
  local -n sp_helper_var=$1
  sp_helper_var=${SP_BUILD:-}/tests/$2
  [ -n "${SP_BUILD:-}" ] && [ -x "$sp_helper_var" ] || {
    echo "FAIL: SP_BUILD is not set to a build with tests/$2 (ctest sets it)" >&2
    exit 1
  }
}

# The work directory's cleanup: a background mpirun first, then the files
# (made writable again: some tests take the write bit away).
MP=
sp_work_dir() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/sp-$1.XXXXXX") || exit 1
  trap '[ -n "$MP" ] && kill -9 "$MP" 2>/dev/null; chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
}

sp_seed() {
  local -n sp_seed_var=${1:-S}
  sp_seed_var=${SP_SEED:-$RANDOM}
  echo "seed $sp_seed_var (replay with SP_SEED=$sp_seed_var)"
}

sp_tiny() {
  local file=$1
  shift
  "$SP_BIN" init --arch wan2.1-tiny --seed "$S" "$@" -q -o "$file" || exit 1
}

sp_cond() {
  "$PY" - "$S" "$@" <<'PYEOF' || exit 1
import sys, h5py, numpy as np
r, most = np.random.default_rng(int(sys.argv[1])), int(sys.argv[2])
for path in sys.argv[3:]:
    with h5py.File(path, "w") as f:
        f["context"] = r.standard_normal((int(r.integers(1, most)), 4096)).astype(np.float32)
        f["context_null"] = r.standard_normal((int(r.integers(1, most)), 4096)).astype(np.float32)
PYEOF
}

sp_same() {
  "$PY" -c 'import sys, h5py
n = sys.argv[3]; a = h5py.File(sys.argv[1])[n][...]; b = h5py.File(sys.argv[2])[n][...]
sys.exit(0 if a.shape == b.shape and a.tobytes() == b.tobytes() else 1)' "$1" "$2" "${3:-latents}"
}

sp_python_with() {
  sp_python_find "$1" || sp_skip "no python3 with $2"
}

sp_refused() {
  local name=$1 needle=$2 rc
  shift 2
  "$@" >"$work/refused.out" 2>"$work/refused.err"
  rc=$?
  [ $rc -eq 2 ] || bad "$name: exit $rc, want 2"
  grep -qF -- "$needle" "$work/refused.err" ||
    bad "$name: no '$needle' in: $(cat "$work/refused.err")"
}

# sp_refused_early STARTED NAME PATTERN CMD...: CMD exits 2 with PATTERN in
# its log ($work/early.log) and no line matching STARTED (a grep pattern for
# the first sign of work: "step 1/"); ok names the first error line.
sp_refused_early() {
  local started=$1 name=$2 pat=$3 log=$work/early.log rc
  shift 3
  "$@" >"$log" 2>&1
  rc=$?
  if [ $rc -ne 2 ]; then
    bad "$name: exit $rc, expected 2"; sed 's/^/     /' "$log"
  elif ! grep -q -- "$pat" "$log"; then
    bad "$name: no line with '$pat'"; sed 's/^/     /' "$log"
  elif grep -q -- "$started" "$log"; then
    bad "$name: refused only after work had started"
  else
    ok "$name: $(grep -m1 error "$log" | sed 's/^\[rank [0-9]*\] //')"
  fi
}
