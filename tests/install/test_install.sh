#!/usr/bin/env bash
# `cmake --install BUILD --prefix P` (README.md): P/bin/staticpipe and no
# other file; every shared library it needs found (ldd); it runs from
# there, called by name with P/bin on PATH: --version as the built binary
# says it, and init + inspect --verify of the tiny model.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_need_bin
sp_need_tool cmake ldd
sp_work_dir install
P=$work/prefix

cmake --install "${SP_BUILD:?}" --prefix "$P" > "$work/install.log" 2>&1 ||
  { echo "FAIL cmake --install: $(cat "$work/install.log")"; exit 1; }
files=$(cd "$P" && find . ! -type d | sort)
[ "$files" = "./bin/staticpipe" ] && ok "installed: bin/staticpipe only" ||
  bad "installed files: $(echo $files) (want ./bin/staticpipe only)"
[ -x "$P/bin/staticpipe" ] || { echo "FAIL $P/bin/staticpipe is not an executable"; exit 1; }

missing=$(ldd "$P/bin/staticpipe" 2>&1 | grep 'not found')
[ -z "$missing" ] && ok "every shared library found (ldd)" || bad "ldd: $missing"

want=$("$SP_BIN" --version 2>&1 | head -n 1)
got=$(PATH="$P/bin:$PATH" staticpipe --version 2>&1 | head -n 1)
[ -n "$want" ] && [ "$got" = "$want" ] && ok "staticpipe --version on PATH: $got" ||
  bad "staticpipe --version on PATH: '$got', the built binary says '$want'"

if (cd "$work" && PATH="$P/bin:$PATH" staticpipe init --arch wan2.1-tiny -q -o m.h5 &&
    PATH="$P/bin:$PATH" staticpipe inspect --verify m.h5 > inspect.txt); then
  ok "the installed binary writes and verifies the tiny model"
else
  bad "the installed binary's init / inspect --verify failed"
fi
exit $fail
