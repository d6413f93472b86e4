#!/usr/bin/env bash
# --jobs files built to mislead the parser: a NUL byte inside a line (which
# would end it early for string functions and smuggle the rest in as a
# second job), a key given twice, control characters in a key (which must
# reach the log escaped, never raw).
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir jobs-hostile
sp_seed
sp_tiny "$work/m.h5"
"$PY" - "$work" $S <<'PYEOF' || exit 1
import sys, h5py, numpy as np
d, r = sys.argv[1], np.random.default_rng(int(sys.argv[2]))
with h5py.File(f"{d}/a.h5", "w") as f:
    f["context"] = r.standard_normal((int(r.integers(1, 64)), 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((int(r.integers(1, 64)), 4096)).astype(np.float32)
# One line: a job, a NUL, padding up to the old 8191-byte read, then what
# would be read as a line of its own.
first = f"cond={d}/a.h5 out={d}/x1.h5 seed=1".encode() + b"\0"
first += b" " * (8191 - len(first))
with open(f"{d}/nul.txt", "wb") as f:
    f.write(first + f"cond={d}/a.h5 out={d}/x2.h5 seed=2\n".encode())
with open(f"{d}/nul2.txt", "wb") as f:
    f.write(f"cond={d}/a.h5 out={d}/w1.h5 seed=1\0cond={d}/a.h5 out={d}/w2.h5\n".encode())
with open(f"{d}/dup.txt", "wb") as f:
    f.write(f"cond={d}/a.h5 out={d}/y1.h5 seed=1 seed=2\n".encode())
with open(f"{d}/ctl.txt", "wb") as f:
    f.write(f"cond={d}/a.h5 out={d}/z1.h5 se\x1b[2Jed=1\r\x07=2\n".encode())
PYEOF
B=(--model "$work/m.h5" -q --steps 1 --frames 1 --size 32x32)
raw_controls() { LC_ALL=C grep -c "$(printf '[\001-\010\013-\037\177]')" "$1"; }

"$SP_BIN" run "${B[@]}" --jobs "$work/nul.txt" >/dev/null 2>"$work/nul.err"; rc=$?
if [ $rc -ne 0 ] && [ ! -e "$work/x1.h5" ] && [ ! -e "$work/x2.h5" ] && grep -q "nul.txt:1: line longer than" "$work/nul.err"; then
  ok "NUL byte in a long line: the line is refused whole, no hidden second job"
else bad "NUL byte, long line (exit $rc, x1 $([ -e "$work/x1.h5" ] && echo written), x2 $([ -e "$work/x2.h5" ] && echo written)): $(cat "$work/nul.err")"; fi
"$SP_BIN" run "${B[@]}" --jobs "$work/nul2.txt" >/dev/null 2>"$work/nul2.err"; rc=$?
if [ $rc -ne 0 ] && [ ! -e "$work/w1.h5" ] && grep -q "nul2.txt:1: line holds a NUL byte" "$work/nul2.err"; then
  ok "NUL byte in a short line: refused, not cut at the NUL"
else bad "NUL byte, short line (exit $rc): $(cat "$work/nul2.err")"; fi

"$SP_BIN" run "${B[@]}" --jobs "$work/dup.txt" >/dev/null 2>"$work/dup.err"; rc=$?
if [ $rc -ne 0 ] && [ ! -e "$work/y1.h5" ] && grep -q "dup.txt:1: key 'seed' is given twice" "$work/dup.err"; then
  ok "duplicate key refused"
else bad "duplicate key (exit $rc): $(cat "$work/dup.err")"; fi

"$SP_BIN" run "${B[@]}" --jobs "$work/ctl.txt" >/dev/null 2>"$work/ctl.err"; rc=$?
if [ $rc -ne 0 ] && [ "$(raw_controls "$work/ctl.err")" -eq 0 ] && grep -qF 'se\x1b[2Jed' "$work/ctl.err"; then
  ok "control characters in a key: escaped in the log"
else bad "control characters (exit $rc): $(cat -v "$work/ctl.err")"; fi

[ $fail -eq 0 ] && echo "jobs_hostile: all checks passed" || echo "jobs_hostile: FAILED"
exit $fail
