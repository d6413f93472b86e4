#!/usr/bin/env bash
# staticpipe plan --layout and the inventory's links: the JSON of the layouts
# considered (every R x S x U of the ranks listed once, the chosen one the
# fastest that fits, refusals with a reason), the links reaching the
# prediction (NVLink against PCIe), and each refusal of a bad links object
# or layout with exit 2 and a line naming what was wrong.
set -u
BIN=${SP_BIN:?SP_BIN is the staticpipe binary}
. "$SP_SRC/tests/common/script.sh"
sp_python_with "import json" "its json module"
sp_work_dir plan-layout

# inventory N GPU-KIND EXTRA-LINKS: N H200-sized devices on one node
inventory() {
  "$PY" - "$@" <<'PY'
import json, sys
n, gpu, extra = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
links = {"gpu": gpu, "pcie_gen": 5}
if gpu == "nvlink": links["nvlink_gbs"] = 450
links.update(extra)
devs = [{"name": "H200-%d" % i, "total_bytes": "141gb"} for i in range(n)]
print(json.dumps({"devices": devs, "links": links}))
PY
}
M=(--model synth:wan2.1-14b --cfg 5 --frames 81 --size 480x832)

# 1. four NVLink GPUs: every factorization of 4 listed once, the chosen one
# the fastest that fits; the all-to-all's time is its bytes over the link.
inventory 4 nvlink '{}' >"$work/nv.json"
inventory 4 pcie '{}' >"$work/pc.json"
for k in nv pc; do
  "$BIN" plan "${M[@]}" --inventory "$work/$k.json" --layout auto --json >"$work/$k.out" \
    2>"$work/$k.err" || bad "$k: $(cat "$work/$k.err")"
done
"$PY" - "$work/nv.out" "$work/pc.out" <<'PY' || bad "layout JSON"
import json, sys
nv, pc = (json.load(open(p)) for p in sys.argv[1:3])
for c in (nv, pc):
    assert c["predictions"] is True
    names = [e["layout"] for e in c["layouts"]]
    want = sorted("%dx%dx%d" % (r, 4 // (r * u), u) for r in (1, 2, 4) for u in (1, 2, 4) if 4 % (r * u) == 0)
    assert sorted(names) == want, (names, want)
    ok = [e for e in c["layouts"] if e["ok"]]
    best = min(ok, key=lambda e: e["step_ms"])
    assert c["chosen"] == best["layout"], (c["chosen"], best["layout"])
    for e in c["layouts"]:
        if not e["ok"]:
            assert e["why"], e
        else:
            assert abs(e["step_ms"] - e["pipeline_ms"] - e["exchange_ms"]) < 1e-6 * e["step_ms"] + 1e-3
    # 4 replicas with 2 micro-batches: refused
    r4 = [e for e in c["layouts"] if e["layout"] == "4x1x1"][0]
    assert not r4["ok"] and "micro-batch" in r4["why"], r4
# the all-to-all of 1x1x4 from its definition: 2 micro-batches x 40 blocks x 4,
# each 3/4 of 8190 tokens x 5120 x 2 bytes, at 450 (NVLink) and 50.4 GB/s (PCIe Gen5)
def a2a(c):
    return [e for e in c["layouts"] if e["layout"] == "1x1x4"][0]["a2a_ms"]
for c, gbs in ((nv, 450.0), (pc, 0.8 * 63.015)):
    want = 2 * 40 * 4 * (8190 * 5120 * 2 * 0.75) / (gbs * 1e9) * 1e3
    assert abs(a2a(c) - want) < 1e-3 * want, (a2a(c), want)
PY

# 2. the text form: the table, the chosen line, the links line
"$BIN" plan "${M[@]}" --inventory "$work/nv.json" --layout auto >"$work/t.out" 2>&1 || bad "text: $(cat "$work/t.out")"
grep -q "^layout .*: predicted step .* (PREDICTION)" "$work/t.out" || bad "no chosen line: $(cat "$work/t.out")"
grep -q "# links: GPU <-> GPU NVLink 450.0 GB/s.*host 50.4 GB/s" "$work/t.out" || bad "links line: $(cat "$work/t.out")"
grep -q "refused: .*4 replicas" "$work/t.out" || bad "refused row: $(cat "$work/t.out")"

# 3. one layout given: only it; one that cannot be is refused with exit 2
"$BIN" plan "${M[@]}" --inventory "$work/nv.json" --layout 1x2x2 --json >"$work/one.out" 2>&1 || bad "1x2x2: $(cat "$work/one.out")"
"$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); assert c["chosen"]=="1x2x2" and len(c["layouts"])==1' \
  "$work/one.out" || bad "--layout 1x2x2 JSON"

expect2() { sp_refused "$1" "$2" "$BIN" plan "${@:3}"; } # NAME NEEDLE ARGS...
expect2 "heads" "must divide" "${M[@]}" --gpu-mem 141gb --ranks 3 --layout 1x1x3
expect2 "ranks" "must equal" "${M[@]}" --gpu-mem 141gb --ranks 4 --layout 1x1x2
expect2 "layout syntax" "--layout '2x2'" "${M[@]}" --gpu-mem 141gb --ranks 4 --layout 2x2
expect2 "no fit" "--layout 1x1x2" "${M[@]}" --gpu-mem 20gb --ranks 2 --layout 1x1x2
i=0
for case in '{"gpu": "infiniband"}|"gpu" must be' '{"nvlink_gbs": -1}|"nvlink_gbs" must be' \
  '{"pcie_gen": 7}|"pcie_gen" must be' '{"pcie_gbs": 30}|not both' '{"wires": 1}|unknown key "wires"' \
  '{"gpu": "pcie", "nvlink_gbs": 300}|without'; do
  inventory 2 pcie "${case%%|*}" >"$work/b$i.json"
  expect2 "links ${case%%|*}" "${case##*|}" "${M[@]}" --inventory "$work/b$i.json" --layout auto
  i=$((i + 1))
done
echo '{"devices": [{"total_bytes": "8gb"}], "links": {"gpu": "nvlink"}}' >"$work/n.json"
expect2 "nvlink without rate" "needs \"nvlink_gbs\"" "${M[@]}" --inventory "$work/n.json"
echo '{"devices": [{"total_bytes": "8gb"}, {"total_bytes": "8gb", "node": 1}], "links": {}}' >"$work/n2.json"
expect2 "two nodes" "inter_node_gbs" "${M[@]}" --inventory "$work/n2.json"
echo '{"devices": [{"total_bytes": "8gb", "node": -1}]}' >"$work/n3.json"
expect2 "bad node" 'bad value of "node"' "${M[@]}" --inventory "$work/n3.json"
echo '{"devices": [{"total_bytes": "8gb"}], "link": {}}' >"$work/n4.json"
expect2 "top-level key" 'unknown key "link"' "${M[@]}" --inventory "$work/n4.json"

# 4. two nodes: 1x1x2 across them is timed at inter_node_gbs
echo '{"devices": [{"total_bytes": "141gb"}, {"total_bytes": "141gb", "node": 1}],
  "links": {"gpu": "nvlink", "nvlink_gbs": 450, "inter_node_gbs": 25}}' >"$work/two.json"
"$BIN" plan "${M[@]}" --inventory "$work/two.json" --layout 1x1x2 --json >"$work/two.out" 2>&1 || bad "two nodes: $(cat "$work/two.out")"
"$PY" - "$work/two.out" <<'PY' || bad "two nodes: all-to-all not at 25 GB/s"
import json, sys
e = json.load(open(sys.argv[1]))["layouts"][0]
want = 2 * 40 * 4 * (16380 * 5120 * 2 * 0.5) / 25e9 * 1e3
assert abs(e["a2a_ms"] - want) < 1e-3 * want, (e["a2a_ms"], want)
PY

"$BIN" plan --help | grep -q -- "--layout" || bad "--help lacks --layout"
"$BIN" plan --help | grep -q -- "inter_node_gbs" || bad "--help lacks the links"
exit $fail
