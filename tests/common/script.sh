# Sourced by the script tests: the preamble they share. Source it after
# "set -u" with SP_SRC set; it sources skip.sh (sp_skip) itself.
#
# sp_work_dir NAME: a fresh directory, its path in $work (under TMPDIR,
#   named sp-NAME.XXXXXX), removed with everything in it when the script
#   exits; a failure to make it ends the script with exit 1.
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

sp_work_dir() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/sp-$1.XXXXXX") || exit 1
  trap 'rm -rf "$work"' EXIT
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
