# Sourced by the script tests: the preamble they share. Source it after
# "set -u" with SP_SRC set; it sources skip.sh (sp_skip) itself.
#
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
. "$SP_SRC/tests/common/skip.sh"
. "$SP_SRC/tests/common/python.sh"

fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

MP=
sp_work_dir() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/sp-$1.XXXXXX") || exit 1
  trap '[ -n "$MP" ] && kill -9 "$MP" 2>/dev/null; rm -rf "$work"' EXIT
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
