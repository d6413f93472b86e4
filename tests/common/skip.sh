# Sourced by the script tests. sp_skip REASON ends a test that cannot run
# here because a tool is missing (python with numpy, clang with libFuzzer, a
# helper binary): outside CI it prints "skip: REASON" and exits 77
# (skipped); when CI is set (CI runs with CI=true) a missing tool is a
# failure, so it prints the reason and exits 1. GPU tests without a GPU do
# not use it: they skip everywhere, with the reason printed.
sp_skip() {
  if [ -n "${CI:-}" ] && [ "${CI}" != false ] && [ "${CI}" != 0 ]; then
    echo "FAIL: $* (CI=$CI: a missing tool fails here instead of skipping)" >&2
    exit 1
  fi
  echo "skip: $*"
  exit 77
}
