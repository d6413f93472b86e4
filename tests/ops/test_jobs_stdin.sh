#!/usr/bin/env bash
# --jobs - with a standard input that cannot carry jobs (ranks/pipeline/
# jobs.h): closed, or a device, is refused with exit 2 before anything is
# read (a closed descriptor 0 is not taken by the model file and read as
# jobs); a stream's line that never ends (cat /dev/zero |) fails as soon as
# it is too long and the stream ends (exit 2) instead of reading forever; a prompt= line without --t5 says so,
# the same on a stream as in a file; a file whose every line is bad is
# refused with the lines' reasons and no plan, clean under valgrind's
# memcheck (nothing read uninitialised).
set -u
. "$SP_SRC/tests/common/script.sh"
sp_work_dir jobs-stdin
sp_seed
sp_python_with 'import h5py, numpy' 'h5py and numpy'
cd "$work" || exit 1
sp_tiny m.h5
sp_cond 16 c.h5
B=("$SP_BIN" run --model m.h5 --steps 2 --frames 5 --size 32x32 -q)

out=$(timeout 20 "${B[@]}" --jobs - <&- 2>&1); rc=$?
[ $rc -eq 2 ] && printf '%s' "$out" | grep -q "standard input is closed" &&
  ! printf '%s' "$out" | grep -q "jobs:" && ok "--jobs - with stdin closed: refused" ||
  bad "stdin closed: exit $rc: $(printf '%s' "$out" | head -3)"
out=$(timeout 20 "${B[@]}" --jobs - </dev/zero 2>&1); rc=$?
[ $rc -eq 2 ] && printf '%s' "$out" | grep -q "standard input is a device" &&
  ok "--jobs - </dev/zero: refused" || bad "</dev/zero: exit $rc: $(printf '%s' "$out" | head -3)"
out=$(cat /dev/zero | timeout 30 "${B[@]}" --jobs - 2>&1); rc=$?
[ $rc -eq 2 ] && printf '%s' "$out" | grep -q "stdin:1: line longer than 8190 bytes" &&
  printf '%s' "$out" | grep -q "stdin:1: no end of line within" &&
  ok "a stream line that never ends: refused at once, then the stream ends" ||
  bad "cat /dev/zero |: exit $rc: $(printf '%s' "$out" | head -3)"

printf 'prompt="a red fox" out=p.h5\n' >prompt.txt
out=$(timeout 60 "${B[@]}" --jobs prompt.txt 2>&1); rc=$?
[ $rc -eq 2 ] && printf '%s' "$out" | grep -q "prompt.txt:1: prompt= needs --t5" &&
  ok "a file's prompt= without --t5" || bad "file prompt=: exit $rc: $out"
out=$(timeout 60 "${B[@]}" --jobs - <prompt.txt 2>&1); rc=$?
[ $rc -eq 2 ] && printf '%s' "$out" | grep -q "stdin:1: prompt= needs --t5" &&
  ! printf '%s' "$out" | grep -q internal && ok "a stream's prompt= without --t5: the same message" ||
  bad "stream prompt=: exit $rc: $out"

printf 'garbage\nout=x.h5\n' >bad.txt
out=$(timeout 60 "${B[@]}" --jobs bad.txt 2>&1); rc=$?
[ $rc -eq 2 ] && printf '%s' "$out" | grep -q "bad.txt:1: 'garbage' is not key=value" &&
  ! printf '%s' "$out" | grep -q "# plan" && ok "every line bad: refused, no plan" ||
  bad "every line bad: exit $rc: $out"
if command -v valgrind >/dev/null 2>&1; then
  valgrind -q --error-exitcode=99 --undef-value-errors=yes --suppressions=/dev/null \
    "${B[@]}" --jobs bad.txt >vg.out 2>&1; rc=$?
  grep -q "uninitialised" vg.out && bad "every line bad: memcheck: $(grep -m3 -A4 uninitialised vg.out)" ||
    ok "every line bad: nothing read uninitialised (valgrind, exit $rc)"
else
  echo "skip valgrind: not installed"
fi
exit $fail
