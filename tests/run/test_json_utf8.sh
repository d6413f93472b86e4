#!/usr/bin/env bash
# --json stays valid UTF-8 whatever bytes a path holds: run --jobs with
# one line that succeeds (out= and video= whose names hold the bytes ff fe,
# invalid UTF-8) and one that fails (cond= of such a name, which the error
# message repeats), and run -o of such a name: every stdout line (the
# jobs' lines and the summary) decodes as strict UTF-8 and parses as JSON,
# and each path field is the path with each invalid byte as U+FFFD
# (io_json_string, ranks/io/json_out.h), while the files themselves carry
# the exact bytes.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir json-utf8
cd "$work" || exit 1
sp_seed
sp_tiny m.h5
sp_cond 8 c.h5
bad=$'\xff\xfe'
printf 'cond=c.h5 out=%s.h5 video=%sv.h5 frames=1 size=16x16 steps=1 cfg=1\n' "$bad" "$bad" >jobs
printf 'cond=%sc.h5 out=b.h5 frames=1 size=16x16 steps=1 cfg=1\n' "$bad" >>jobs
"$SP_BIN" run --model m.h5 --vae synth:wan2.1-vae-tiny --jobs jobs --json -q >jobs.out 2>jobs.err
echo "run --jobs: exit $? (one line fails: 1 or 2 expected)"
[ -s "$bad.h5" ] && [ -s "${bad}v.h5" ] && ok "the files carry the path's bytes" ||
  bad "no $bad.h5 or ${bad}v.h5: $(cat jobs.err)"
"$SP_BIN" run --model m.h5 --cond c.h5 --cfg 1 --frames 1 --size 16x16 --steps 1 --json -q \
  -o "${bad}r.h5" >run.out 2>run.err || bad "run -o: $(cat run.err)"
"$PY" - <<'PYEOF' && ok "every --json line valid UTF-8 JSON, the paths with U+FFFD" || bad "--json lines"
import json, sys
R = "\ufffd\ufffd"
def lines(p):
    out = []
    for raw in open(p, "rb").read().splitlines():
        try:
            out.append(json.loads(raw.decode("utf-8", errors="strict")))
        except ValueError as e:
            sys.exit("%s: %r: %s" % (p, raw[:200], e))
    return out
jobs = [j["job"] for j in lines("jobs.out") if "job" in j]
assert len(jobs) == 2, jobs
a, b = sorted(jobs, key=lambda j: j["line"])
assert a["status"] == "ok" and a["out"] == R + ".h5" and a["video"] == R + "v.h5", a
assert a["preview"] == R + ".h5.png", a
assert b["status"] == "error" and b["cond"] == R + "c.h5" and R + "c.h5" in b["error"], b
run = lines("run.out")
assert run and all(isinstance(j, dict) for j in run), run
PYEOF
[ $fail -eq 0 ] && echo "json utf8: all checks passed" || echo "json utf8: FAILED"
exit $fail
