#!/usr/bin/env bash
# The weights' load shows its progress on a terminal only: under a pseudo
# terminal (script(1)) stderr gets one line redrawn in place ("\r[rank 0]
# reading weights: X MB, R MB/s", ended by one newline) whose last byte
# count is the bytes the run loaded; with stderr a file (a log) or with -q,
# not one byte of it.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
command -v script >/dev/null 2>&1 || sp_skip "script(1) not found (util-linux): no pseudo terminal"
sp_work_dir run-load-progress
T=$work
S=${SP_SEED:-$RANDOM}
echo "seed $S (replay with SP_SEED=$S)"
"$SP_BIN" init --arch wan2.1-tiny --seed $S -q -o "$T/m.h5" || exit 1
"$PY" - "$T/c.h5" $S <<'PYEOF' || exit 1
import sys, h5py, numpy as np
r = np.random.default_rng(int(sys.argv[2]))
with h5py.File(sys.argv[1], "w") as f:
    f["context"] = r.standard_normal((int(r.integers(1, 8)), 4096)).astype(np.float32)
PYEOF
R=("$SP_BIN" run --model "$T/m.h5" --cond "$T/c.h5" --frames 1 --size 16x16 --steps 1 --cfg 1 --json)
# On a terminal: stdout (the JSON) and stderr both reach the pty's log.
script -qc "$(printf '%q ' "${R[@]}" -o "$T/a.h5")" "$T/tty.log" > /dev/null 2>&1 || bad "run under a pty failed"
if "$PY" - "$T/tty.log" <<'PYEOF'
import sys, re, json
# The pty turns each "\n" into "\r\n": undone first.
raw = open(sys.argv[1], "rb").read().decode().replace("\r\n", "\n")
draws = re.findall(r"\r\[rank 0\] reading weights: ([0-9.]+) MB, [0-9]+ MB/s\x1b\[K", raw)
assert draws, "no progress line"
# One line: every draw but the last is followed by another draw, not a newline.
assert raw.count("reading weights") == len(draws) and len(re.findall(r"reading weights[^\r]*\n", raw)) == 1, raw
summary = [json.loads(l) for l in raw.replace("\r", "").splitlines() if l.startswith("{")][-1]
loaded = summary["ranks"][0]["bytes_loaded"]
# The bytes of every group in its packed layout: at least the file's bytes.
assert abs(float(draws[-1]) * 1e6 - loaded) <= 0.05 * loaded + 1e5, (draws[-1], loaded)
print(f"{len(draws)} draws, last {draws[-1]} MB, bytes_loaded {loaded}")
PYEOF
then ok "terminal: one progress line redrawn in place, ending at the bytes loaded"
else bad "terminal: $(tr '\r' '~' < "$T/tty.log" | head -c 600)"; fi
"${R[@]}" -o "$T/b.h5" > /dev/null 2> "$T/file.log" || bad "run to a log file failed"
grep -q "reading weights" "$T/file.log" && bad "stderr a file: the progress line is in the log" \
  || ok "stderr a file: no progress in the log"
script -qc "$(printf '%q ' "${R[@]}" -q -o "$T/c.h5")" "$T/q.log" > /dev/null 2>&1
grep -q "reading weights" "$T/q.log" && bad "-q on a terminal: progress shown" || ok "-q on a terminal: no progress"
[ $fail -eq 0 ] && echo "load progress: all checks passed" || echo "load progress: FAILED"
exit $fail
