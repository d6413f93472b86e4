#!/usr/bin/env bash
# --version: the project version and the commit the binary was built from
# (git at build time; "unknown" outside a checkout), then the backends.
set -u
. "$SP_SRC/tests/common/script.sh"
out=$("$SP_BIN" --version); rc=$?
echo "$out" | sed 's/^/   /'
[ $rc -eq 0 ] || bad "exit $rc"
line1=$(printf '%s\n' "$out" | sed -n 1p)
got=$(printf '%s' "$line1" | sed -n 's/^staticpipe [0-9.]* (commit \([0-9a-f]*\|unknown\)\(-dirty\)\{0,1\})$/\1/p')
if command -v git >/dev/null && git -C "$SP_SRC" rev-parse --verify -q HEAD >/dev/null; then
  # A checkout: the commit printed is one of this repository's (the binary
  # may be older than HEAD when a commit followed the build).
  if [ -n "$got" ] && [ "$got" != unknown ] && git -C "$SP_SRC" rev-parse --verify -q "$got^{commit}" >/dev/null; then
    ok "commit $got (HEAD $(git -C "$SP_SRC" rev-parse --short=12 HEAD))"
  else bad "first line '$line1' does not name a commit of $SP_SRC"; fi
else
  [ "$got" = unknown ] && ok "outside a checkout: unknown" || bad "first line '$line1', expected commit unknown"
fi
printf '%s\n' "$out" | grep -qE '^cuda: (none \(built without CUDA\)|CUDA runtime .*cuDNN .*NCCL )' && ok "cuda line" || bad "no cuda line"
printf '%s\n' "$out" | grep -q '^ffmpeg: ' && ok "ffmpeg line" || bad "no ffmpeg line"
[ $fail -eq 0 ] && echo "version: all checks passed" || echo "version: FAILED"
exit $fail
