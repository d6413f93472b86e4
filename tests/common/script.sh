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
