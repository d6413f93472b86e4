#!/usr/bin/env bash
# A write killed with SIGKILL leaves its hidden temporary file (no handler
# runs); the next write to the same path removes it, and only it: the
# temporaries of a live process and of other paths stay.
set -u
: "${SP_SRC:?}" "${SP_BIN:?}"
. "$SP_SRC/tests/common/script.sh"
sp_work_dir stale
cd "$work" || exit 1

# A real one: init killed outright while it writes a large model.
"$SP_BIN" init --arch wan2.1-14b -q -o "$work/m.h5" & pid=$!
for _ in $(seq 100); do
  [ -n "$(ls -A | grep "^\.m\.h5\.tmp-$pid-")" ] && break
  sleep 0.1
done
sleep 0.5
kill -9 "$pid"
wait "$pid" 2>/dev/null
killed=$(ls -A | grep "^\.m\.h5\.tmp-$pid-" || true)
[ -n "$killed" ] || bad "SIGKILL during init left no temporary file to test with"

# A process that has ended, one that runs (it must keep its file), and a
# temporary of another path.
sh -c 'exit 0' & dead=$!
wait "$dead"
sleep 60 & live=$!
touch ".m.h5.tmp-$dead-3" ".m.h5.tmp-$live-0" ".other.h5.tmp-$dead-0" ".m.h5.tmp-x-1"
# Without -q: the removal is an info line, which -q (warnings only) hides.
"$SP_BIN" init --arch wan2.1-tiny --seed 1 -o "$work/m.h5" 2>"$work/err" || bad "init after the kill failed"
left=$(ls -A)
kill "$live" 2>/dev/null
case "$left" in *"$killed"*) bad "the killed init's $killed is still there";; *) ok "killed init's temporary removed";; esac
case "$left" in *".m.h5.tmp-$dead-3"*) bad "an ended process's temporary is still there";; *) ok "ended process's temporary removed";; esac
for keep in ".m.h5.tmp-$live-0" ".other.h5.tmp-$dead-0" ".m.h5.tmp-x-1" m.h5; do
  case "$left" in *"$keep"*) ok "kept $keep";; *) bad "$keep was removed";; esac
done
grep -q "removed a temporary file that process $pid left behind" "$work/err" &&
  ok "the removal is reported" || bad "no line reports the removal: $(cat "$work/err")"
exit $fail
