#!/usr/bin/env bash
# --version: the project version and the commit the binary was built from
# (git at build time; "unknown" outside a checkout), then the backends.
set -u
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
out=$("$SP_BIN" --version); rc=$?
echo "$out" | sed 's/^/   /'
[ $rc -eq 0 ] || bad "exit $rc"
want=unknown
if command -v git >/dev/null && head=$(git -C "$SP_SRC" rev-parse --short=12 HEAD 2>/dev/null); then want=$head; fi
line1=$(printf '%s\n' "$out" | sed -n 1p)
case "$line1" in
  "staticpipe "*" (commit $want)"|"staticpipe "*" (commit $want-dirty)") ok "commit $want" ;;
  *) bad "first line '$line1' does not name commit $want" ;;
esac
printf '%s\n' "$out" | grep -qE '^cuda: (none \(built without CUDA\)|CUDA runtime .*cuDNN .*NCCL )' && ok "cuda line" || bad "no cuda line"
printf '%s\n' "$out" | grep -q '^ffmpeg: ' && ok "ffmpeg line" || bad "no ffmpeg line"
[ $fail -eq 0 ] && echo "version: all checks passed" || echo "version: FAILED"
exit $fail
