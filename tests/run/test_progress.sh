#!/usr/bin/env bash
# Progress lines of init and encode (comm/log/progress.h). Under a pseudo
# terminal (script(1)): init of umt5-tiny and of wan2.1-tiny draw one line
# "\r[rank 0] init: writing weights: X of Y MB (P%), R MB/s\033[K" redrawn
# in place and ended by one newline, whose last draw is at 100% with Y the
# weights' bytes (inspect: parameters x 2 for bf16); encode and run --t5
# --prompt of synth:umt5-tiny draw "text encoder: encoding: K of 2 layers"
# ending at 2 of 2. With -q, or with stderr a file for a phase shorter
# than 2 s, none of it; with stderr a file for a longer phase (init of
# wan2.1-1.3b with 8 blocks, when it takes that long) a line per tenth,
# each further than the one before, the last at 100%.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
command -v script >/dev/null 2>&1 || sp_skip "script(1) not found (util-linux): no pseudo terminal"
sp_work_dir progress
T=$work
pty() { # LOG CMD...: CMD under a pseudo terminal, its output (stdout and stderr) in LOG
  local log=$1
  shift
  script -qc "$(printf '%q ' "$@")" "$log" >/dev/null 2>&1
}
# draws LOG WHAT UNIT: the last draw's "done of total" of WHAT, after checking
# that the line is redrawn in place and ended once; "" when it is not.
draws() {
  "$PY" - "$@" <<'PYEOF'
import re, sys
raw = open(sys.argv[1], "rb").read().decode().replace("\r\n", "\n")
what, unit = re.escape(sys.argv[2]), re.escape(sys.argv[3])
d = re.findall(r"\r\[rank 0\] %s: ([0-9.]+) of ([0-9.]+) %s \(([0-9]+)%%\), [0-9.]+ %s/s\x1b\[K"
               % (what, unit, unit), raw)
ended = re.findall(r"%s: [^\r\n]*\n" % what, raw)
if d and raw.count(sys.argv[2] + ":") == len(d) and len(ended) == 1 and d[-1][2] == "100":
    print(d[-1][0], d[-1][1], len(d))
PYEOF
}
bytes_of() { # MODEL: its weights' bytes in MB (inspect --json: a text encoder's
  # parameters x 2 (bf16), a DiT's total_bytes)
  "$SP_BIN" inspect "$1" --json | "$PY" -c 'import json, sys; j = json.load(sys.stdin)
print("%.1f" % ((j["params"] * 2 if "params" in j else j["total_bytes"]) / 1e6))'
}

pty "$T/t5.log" "$SP_BIN" init --arch umt5-tiny --seed 1 -o "$T/t5.h5"
read -r done total n <<<"$(draws "$T/t5.log" "init: writing weights" MB)"
want=$(bytes_of "$T/t5.h5")
[ -n "${n:-}" ] && [ "$done" = "$want" ] && [ "$total" = "$want" ] &&
  ok "init umt5-tiny on a terminal: one line, $n draws, ending at $done of $want MB (100%)" ||
  bad "init umt5-tiny on a terminal (want $want MB): $(tr '\r' '~' <"$T/t5.log" | head -c 600)"
pty "$T/dit.log" "$SP_BIN" init --arch wan2.1-tiny --seed 1 -o "$T/dit.h5"
read -r done total n <<<"$(draws "$T/dit.log" "init: writing weights" MB)"
want=$(bytes_of "$T/dit.h5")
[ -n "${n:-}" ] && [ "$done" = "$total" ] && [ "$total" = "$want" ] &&
  ok "init wan2.1-tiny on a terminal: ending at $done of $want MB" ||
  bad "init wan2.1-tiny on a terminal (want $want MB): $(tr '\r' '~' <"$T/dit.log" | head -c 600)"
pty "$T/enc.log" "$SP_BIN" encode --t5 synth:umt5-tiny --prompt "a red fox" -o "$T/c.h5"
read -r done total n <<<"$(draws "$T/enc.log" "text encoder: encoding" layers)"
[ "${done:-}" = 2 ] && [ "$total" = 2 ] && ok "encode on a terminal: ending at 2 of 2 layers" ||
  bad "encode on a terminal: $(tr '\r' '~' <"$T/enc.log" | head -c 600)"
pty "$T/run.log" "$SP_BIN" run --t5 synth:umt5-tiny --prompt "a red fox" --model "$T/dit.h5" \
  --frames 1 --size 16x16 --steps 1 -o "$T/l.h5"
read -r done total n <<<"$(draws "$T/run.log" "text encoder: encoding" layers)"
[ "${done:-}" = 2 ] && grep -q "reading weights" "$T/run.log" &&
  ok "run --t5 --prompt on a terminal: the encoding's line, then the load's" ||
  bad "run --t5 --prompt on a terminal: $(tr '\r' '~' <"$T/run.log" | head -c 600)"

for c in "init --arch umt5-tiny --seed 1 -o $T/q1.h5" "init --arch wan2.1-tiny -o $T/q2.h5" \
         "encode --t5 synth:umt5-tiny --prompt x -o $T/q3.h5"; do
  # shellcheck disable=SC2086
  pty "$T/q.log" "$SP_BIN" $c -q
  grep -qE "writing weights|text encoder:" "$T/q.log" && bad "-q on a terminal: progress in '$c'" ||
    ok "-q on a terminal: no progress ($c)"
  # shellcheck disable=SC2086
  "$SP_BIN" $c >/dev/null 2>"$T/file.log"
  grep -qE "writing weights|text encoder:" "$T/file.log" &&
    bad "stderr a file, a phase under 2 s: progress in '$c'" ||
    ok "stderr a file, a phase under 2 s: none ($c)"
  rm -f "$T"/q[123].h5
done
# A longer phase: wan2.1-1.3b's config with 8 blocks (0.8 GB), a few
# seconds on two cores.
L=(init --arch wan2.1-1.3b --layers 8)
"$SP_BIN" "${L[@]}" -o "$T/big.h5" 2>"$T/big.log" || bad "${L[*]} failed"
if "$PY" - "$T/big.log" <<'PYEOF'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
p = [int(m.group(1)) for m in (re.search(r"init: writing weights: [0-9.]+ of [0-9.]+ MB \(([0-9]+)%\), "
                                         r"[0-9]+ MB/s$", l) for l in lines) if m]
assert all("\r" not in l and "\x1b" not in l for l in lines), "a terminal's line in a log"
assert not p or (p[-1] == 100 and all(b // 10 > a // 10 for a, b in zip(p, p[1:]))), p
print("log lines at %s%%" % p if p else "no log lines (the phase took under 2 s)")
PYEOF
then ok "stderr a file, ${L[*]}: a line per tenth at most, the last at 100%"
else bad "stderr a file, ${L[*]}: $(head -c 800 "$T/big.log")"; fi
rm -f "$T/big.h5"
"$SP_BIN" "${L[@]}" -q -o "$T/big.h5" 2>"$T/bigq.log"
[ -s "$T/bigq.log" ] && bad "-q with stderr a file: $(head -c 300 "$T/bigq.log")" ||
  ok "-q with stderr a file: nothing"
rm -f "$T/big.h5"
[ $fail -eq 0 ] && echo "progress: all checks passed" || echo "progress: FAILED"
exit $fail
