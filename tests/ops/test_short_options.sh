#!/usr/bin/env bash
# A short option means one thing across commands: -d is --device (not
# --dtype), -s --size (not --seed), -l --latent (not --layers), -n --steps
# and -r --ranks (plan's --ranks is -r, as in bench).
set -u
. "$SP_SRC/tests/common/script.sh"
sp_work_dir short-options
refused() { # what  command...
  local what=$1; shift
  "$@" >/dev/null 2>&1; local rc=$?
  [ $rc -eq 2 ] && ok "$what refused" || bad "$what: exit $rc, expected 2"
}
refused "init -s (seed)" "$SP_BIN" init --arch wan2.1-tiny -s 3 -q -o "$work/a.h5"
refused "init -d (dtype)" "$SP_BIN" init --arch wan2.1-tiny -d fp32 -q -o "$work/a.h5"
refused "init -l (layers)" "$SP_BIN" init --arch wan2.1-tiny -l 2 -q -o "$work/a.h5"
refused "convert -d (dtype)" "$SP_BIN" convert "$work/none.safetensors" -d fp32 -o "$work/c.h5"
refused "plan -n (ranks)" "$SP_BIN" plan --model synth:wan2.1-tiny -n 2 --gpu-mem 8gb
"$SP_BIN" init --arch wan2.1-tiny --seed 3 --dtype fp32 --layers 2 -q -o "$work/a.h5" && ok "init long forms" || bad "init long forms"
refused "plan -r (ranks; -r is bench's --repeat)" "$SP_BIN" plan --model synth:wan2.1-tiny -r 2 --gpu-mem 8gb
out=$("$SP_BIN" plan --model synth:wan2.1-tiny --ranks 2 --gpu-mem 8gb --frames 5 --size 32x32 2>&1)
printf '%s\n' "$out" | grep -q "^# plan: 2 ranks" && ok "plan --ranks 2" || bad "plan --ranks 2: $out"
for c in init convert plan; do
  "$SP_BIN" $c --help | grep -qE -- '^  -(d|s|l), --(dtype|seed|layers)|^  -[nr], --ranks|^  -t, --tokenizer' \
    && bad "$c --help still lists a dropped short option" || ok "$c --help"
done
# Across every command: each letter that --help lists means one long option
# (encode's -n and -t, init's -p and commcheck's -s, -p, -t, -n once meant
# something else than run's and forward's).
for c in init convert inspect plan run forward bench encode decode commcheck; do
  "$SP_BIN" $c --help 2>/dev/null | sed -n 's/^  -\([A-Za-z]\), --\([a-z0-9_-]*\).*/\1 \2 '"$c"'/p'
done >"$work/letters.txt"
[ "$(wc -l <"$work/letters.txt")" -gt 30 ] && ok "letters listed" || bad "few letters: $(cat "$work/letters.txt")"
clash=$(awk '{ if ($1 in n && n[$1] != $2) print "-" $1 ": --" n[$1] " (" c[$1] ") and --" $2 " (" $3 ")"; n[$1] = $2; c[$1] = $3 }' "$work/letters.txt")
[ -z "$clash" ] && ok "one letter, one option, in every command" || bad "letters with two meanings: $clash"
[ $fail -eq 0 ] && echo "short options: all checks passed" || echo "short options: FAILED"
exit $fail
