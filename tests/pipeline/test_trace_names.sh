#!/usr/bin/env bash
# --trace stays valid JSON whatever a name holds: a run on a host named
# with a quote, a backslash, a control character and a byte that is not
# UTF-8 (set in a UTS namespace of its own, so the machine's name is
# untouched) writes a trace that Python's strict json module reads, whose
# process name carries the quote and backslash as they are and U+FFFD for
# the bad byte.
set -u
: "${SP_SRC:?}" "${SP_BIN:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python_with 'import json, h5py, numpy' "json, h5py and numpy"
command -v unshare >/dev/null || sp_skip "no unshare(1)"
unshare --uts true 2>/dev/null || sp_skip "cannot make a UTS namespace here (needs root)"
sp_work_dir trace_names
sp_seed
sp_tiny "$work/m.h5"
sp_cond 20 "$work/c.h5"
unshare --uts "$PY" - "$SP_BIN" "$work" <<'PYEOF' || bad "traced run under an odd host name"
import os, socket, subprocess, sys
socket.sethostname(b'we"ird\\h\x07\xff')
b, d = sys.argv[1], sys.argv[2]
sys.exit(subprocess.run([b, "run", "--model", f"{d}/m.h5", "--cond", f"{d}/c.h5", "--frames", "5",
                         "--size", "32x32", "--steps", "2", "--device", "cpu", "-q",
                         "--trace", f"{d}/t.json", "-o", f"{d}/a.h5"]).returncode)
PYEOF
"$PY" - "$work/t.json" <<'PYEOF' && ok "the trace is strict JSON naming the host" || bad "trace JSON"
import json, sys
raw = open(sys.argv[1], "rb").read()
raw.decode("utf-8")  # strict: raises on a byte that is not UTF-8
tr = json.loads(raw)
names = [e["args"]["name"] for e in tr["traceEvents"] if e.get("ph") == "M"]
assert names == ['rank 0 (we"ird\\h\x07\ufffd)'], names
assert any(e.get("ph") == "X" for e in tr["traceEvents"]), "no span"
PYEOF
exit $fail
