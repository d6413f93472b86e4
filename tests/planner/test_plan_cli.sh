#!/usr/bin/env bash
# staticpipe plan: the README's worked examples on synthetic models (no
# file, no GPU), the JSON checked with python3's json module, the refusals.
set -u
BIN=${SP_BIN:?SP_BIN is the staticpipe binary}
. "$SP_SRC/tests/common/script.sh"
sp_python_with "import json" "its json module"
sp_work_dir plan-cli

# check_json FILE NBLOCKS PYTHON-CONDITION...: every block exactly once, in
# order, contiguous; resident + streamed = range; peak <= budget; then the
# extra conditions (p = the plan, r = p["ranks"]).
check_json() {
  "$PY" - "$@" <<'EOF'
import json, sys
path, nblocks = sys.argv[1], int(sys.argv[2])
p = json.load(open(path))
r = p["ranks"]
seen, nxt = [], 0
for i, q in enumerate(r):
    assert q["rank"] == i, q["rank"]
    assert q["first_block"] == nxt, (i, q["first_block"], nxt)
    rng = list(range(q["first_block"], q["last_block"] + 1))
    assert sorted(q["resident"] + q["streamed"]) == rng, (i, "resident+streamed != range")
    assert q["peak_bytes"] <= q["budget_bytes"], (i, "peak over budget")
    for k in ("weight_bytes", "peak_bytes", "budget_bytes", "predicted_step_ms"):
        assert q[k] >= 0, k
    seen += rng
    nxt = q["last_block"] + 1
assert seen == list(range(nblocks)), "blocks not each once in order"
assert p["predicted_step_ms"] > 0
for cond in sys.argv[3:]:
    assert eval(cond), cond
EOF
}

# 1. Wan-14B bf16 on 2 x 24 GB at 480p: fits, nothing streamed
"$BIN" plan --model synth:wan2.1-14b --frames 81 --size 480x832 --ranks 2 --gpu-mem 24gb --json \
  >"$work/a.json" 2>"$work/a.err" || bad "14B on 2x24: exit $? $(cat "$work/a.err")"
check_json "$work/a.json" 40 'all(not q["streamed"] for q in r)' 'len(r) == 2' \
  'r[0]["last_block"] == 19' || bad "14B on 2x24 JSON"

# 2. on 2 x 12 GB: refused without cpu,* (exit 2, says why and what to do)
"$BIN" plan --model synth:wan2.1-14b --ranks 2 --gpu-mem 12gb --json >"$work/b.json" 2>"$work/b.err"
rc=$?
[ $rc -eq 2 ] || bad "14B on 2x12 without cpu,*: exit $rc, want 2"
grep -q "no plan fits" "$work/b.err" && grep -q "need" "$work/b.err" && grep -q "cpu,\*" "$work/b.err" \
  && grep -q "smallest budget" "$work/b.err" || bad "14B on 2x12 message: $(cat "$work/b.err")"
[ ! -s "$work/b.json" ] || bad "a refused plan wrote to stdout"
# ... and planned with cpu,*: both ranks stream
"$BIN" plan --model synth:wan2.1-14b --ranks 2 --gpu-mem 12gb --budget 'cpu,*' --json \
  >"$work/c.json" 2>"$work/c.err" || bad "14B on 2x12 cpu,*: $(cat "$work/c.err")"
check_json "$work/c.json" 40 'all(q["streamed"] for q in r)' \
  'all(q["first_block"] in q["resident"] for q in r)' || bad "14B on 2x12 cpu,* JSON"

# 3. Wan-1.3B on one 8 GB card
"$BIN" plan --model synth:wan2.1-1.3b --gpu-mem 8gb --json >"$work/d.json" 2>"$work/d.err" \
  || bad "1.3B on 8 GB: $(cat "$work/d.err")"
check_json "$work/d.json" 30 'len(r) == 1' 'not r[0]["streamed"]' || bad "1.3B on 8 GB JSON"

# 4. a faster second card gets more blocks; an inventory file gives the same plan as flags
"$BIN" plan --model synth:wan2.1-14b --gpu-mem 80gb,80gb --speed 0.5,1 --json >"$work/e.json" \
  2>"$work/e.err" || bad "speeds: $(cat "$work/e.err")"
check_json "$work/e.json" 40 'r[1]["last_block"] - r[1]["first_block"] > r[0]["last_block"] - r[0]["first_block"]' \
  || bad "faster card does not get more blocks"
cat >"$work/inv.json" <<'EOF'
{"devices": [{"name": "A", "total_bytes": "80gb", "speed": 0.5, "cc": "9.0", "sm_count": 132},
             {"name": "B", "total_bytes": 85899345920, "free_bytes": "80gb"}]}
EOF
"$BIN" plan --model synth:wan2.1-14b --inventory "$work/inv.json" --json >"$work/f.json" 2>"$work/f.err" \
  || bad "inventory: $(cat "$work/f.err")"
"$PY" -c '
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert [(q["first_block"], q["last_block"]) for q in a["ranks"]] == \
       [(q["first_block"], q["last_block"]) for q in b["ranks"]]
assert b["ranks"][0]["device"] == "A"' "$work/e.json" "$work/f.json" || bad "inventory differs from flags"

# 5. the table form names every rank and the predicted step
"$BIN" plan --model synth:wan2.1-14b --ranks 2 --gpu-mem 24gb,20gb >"$work/t.txt" 2>"$work/t.err" \
  || bad "table: $(cat "$work/t.err")"
grep -q "predicted step" "$work/t.txt" && grep -q "weight GB" "$work/t.txt" \
  && grep -q "gpu 20gb" "$work/t.txt" || bad "table: $(cat "$work/t.txt")"

# 5b. the order of work: one rank streaming over a slow host link runs
# block-major (each streamed block copied once per step, not per
# micro-batch); four all-resident ranks pipeline micro-batch-major; a forced
# order, stream fraction and row cap are obeyed
"$BIN" plan --model synth:wan2.1-14b --gpu-mem 24gb --budget 'cpu,*' --host-gbs 5 --json \
  >"$work/o1.json" 2>"$work/o1.err" || bad "order 1 rank: $(cat "$work/o1.err")"
check_json "$work/o1.json" 40 'p["order"] == "block"' 'r[0]["order"] == "block"' 'r[0]["streamed"]' \
  || bad "1 rank streaming over 5 GB/s is not block-major"
"$BIN" plan --model synth:wan2.1-14b --gpu-mem 24gb --budget 'cpu,*' --host-gbs 5 --order micro \
  --json >"$work/o2.json" 2>"$work/o2.err" || bad "order micro: $(cat "$work/o2.err")"
"$PY" -c '
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert b["order"] == "micro" and all(q["order"] == "micro" for q in b["ranks"])
assert a["predicted_step_ms"] < b["predicted_step_ms"], (a["predicted_step_ms"], b["predicted_step_ms"])' \
  "$work/o1.json" "$work/o2.json" || bad "--order micro not obeyed, or not slower than auto's block"
"$BIN" plan --model synth:wan2.1-14b --ranks 4 --gpu-mem 24gb --json >"$work/o3.json" \
  2>"$work/o3.err" || bad "order 4 ranks: $(cat "$work/o3.err")"
check_json "$work/o3.json" 40 'p["order"] == "micro"' 'all(not q["streamed"] for q in r)' \
  || bad "4 resident ranks are not micro-batch-major"
"$BIN" plan --model synth:wan2.1-14b --gpu-mem 80gb --stream-frac 0.5 --chunk-rows 5000 \
  --order block --json >"$work/o4.json" 2>"$work/o4.err" || bad "forced: $(cat "$work/o4.err")"
check_json "$work/o4.json" 40 'len(r[0]["streamed"]) == 20' 'r[0]["chunk_rows"] == 4096' \
  'p["chunked"]' 'p["order"] == "block"' || bad "--stream-frac 0.5 --chunk-rows 5000 --order block"
"$BIN" plan --model synth:wan2.1-14b --gpu-mem 80gb --order block >"$work/o5.txt" 2>&1 \
  || bad "table with --order: $(cat "$work/o5.txt")"
grep -q "order block" "$work/o5.txt" && grep -q " block " "$work/o5.txt" && grep -q "block-major" "$work/o5.txt" \
  || bad "table lacks the order: $(cat "$work/o5.txt")"
# an infeasible forced fraction fails with the usual report
"$BIN" plan --model synth:wan2.1-14b --gpu-mem 12gb --stream-frac 0.1 >"$work/o6.out" 2>"$work/o6.err"
rc=$?
[ $rc -eq 2 ] && grep -q "no plan fits" "$work/o6.err" && grep -q "stream fraction 0.1" "$work/o6.err" \
  || bad "infeasible --stream-frac: exit $rc: $(cat "$work/o6.err")"

# 6. refusals: exit 2 and a message quoting the bad token
expect2() { sp_refused "$1" "$2" "$BIN" plan "${@:3}"; } # NAME NEEDLE ARGS...
M=(--model synth:wan2.1-14b)
expect2 "bad budget device" "'gpu:0'" "${M[@]}" --gpu-mem 24gb --ranks 2 --budget 'gpu:0,2gb'
expect2 "budget index" "past the last rank" "${M[@]}" --gpu-mem 24gb --ranks 2 --budget 'cuda:2,2gb'
expect2 "budget unit" "unknown unit 'zb'" "${M[@]}" --gpu-mem 24gb --budget 'cuda:0,2zb'
expect2 "budget over card" "more than the" "${M[@]}" --gpu-mem 24gb --budget 'cuda:0,30gb'
expect2 "too many ranks" "at most 40" "${M[@]}" --gpu-mem 80gb --ranks 41
expect2 "gpu-mem count" "one per rank" "${M[@]}" --gpu-mem 24gb,24gb,24gb --ranks 2
expect2 "gpu-mem unit" "no unit" "${M[@]}" --gpu-mem 24
expect2 "no gpus" "--gpu-mem or --inventory" "${M[@]}"
expect2 "no model" "--model is required" --gpu-mem 24gb
expect2 "frames" "4k+1" "${M[@]}" --gpu-mem 80gb --frames 10
expect2 "size" "multiples of 16" "${M[@]}" --gpu-mem 80gb --size 72x48
expect2 "unknown option" "plan --help" "${M[@]}" --gpu-mem 80gb --bogus
expect2 "order" "--order: 'sideways'" "${M[@]}" --gpu-mem 80gb --order sideways
expect2 "stream fraction" "--stream-frac: '1.5'" "${M[@]}" --gpu-mem 80gb --stream-frac 1.5
expect2 "stream fraction text" "--stream-frac: 'half'" "${M[@]}" --gpu-mem 80gb --stream-frac half
expect2 "chunk rows" "--chunk-rows: '0'" "${M[@]}" --gpu-mem 80gb --chunk-rows 0
echo '{"devices": [{"name": "A", "total": "8gb"}]}' >"$work/bad.json"
expect2 "inventory key" '"total"' "${M[@]}" --inventory "$work/bad.json"

# 7. --help lists every option with its default; GNU permutation
"$BIN" plan --help >"$work/h.txt" || bad "--help exit"
for o in --model --frames --size --ranks --gpu-mem --inventory --budget --speed --cfg --batch \
  --dtype --tflops --host-gbs --peer-gbs --prefetch --reserve --order --stream-frac --chunk-rows \
  "default auto" --json --help "default 81" \
  "default 480x832" "powers of 1024"; do
  grep -qF -- "$o" "$work/h.txt" || bad "--help lacks $o"
done

# 8. plan and run share the job's facts and its one validator: any cfg
# other than 1 is two micro-batches (CFG needs the unconditional branch),
# and a frame count is refused by both with the same words.
"$BIN" plan --model synth:wan2.1-tiny --gpu-mem 8gb --cfg 0.5 >"$work/cfg.txt" 2>&1 \
  || bad "plan --cfg 0.5: $(cat "$work/cfg.txt")"
grep -q "2 micro-batches (cfg 0.5" "$work/cfg.txt" || bad "plan --cfg 0.5 is not 2 micro-batches: $(cat "$work/cfg.txt")"
"$BIN" plan --model synth:wan2.1-tiny --gpu-mem 8gb --cfg 0.5 --json >"$work/cfg.json" 2>&1
"$PY" -c 'import json,sys; assert json.load(open(sys.argv[1]))["micro_batches"] == 2' "$work/cfg.json" \
  || bad "plan --cfg 0.5 --json: micro_batches is not 2"
for f in 4098 10 0; do
  "$BIN" plan --model synth:wan2.1-tiny --gpu-mem 8gb --frames $f >/dev/null 2>"$work/pf.err"; prc=$?
  "$BIN" run --model synth:wan2.1-tiny --cond "$work/none.h5" -o "$work/none-out.h5" --frames $f \
    >/dev/null 2>"$work/rf.err"; rrc=$?
  pe=$(grep error: "$work/pf.err"); re=$(grep error: "$work/rf.err")
  [ $prc -eq 2 ] && [ $rrc -eq 2 ] || bad "--frames $f: plan exit $prc, run exit $rrc, want 2 and 2"
  [ -n "$pe" ] && [ "$pe" = "$re" ] || bad "--frames $f: plan says '$pe', run says '$re'"
done
"$BIN" plan --model synth:wan2.1-tiny --gpu-mem 8gb --frames 4097 --size 16x16 >/dev/null 2>"$work/pf.err" \
  || bad "plan --frames 4097 (the limit) refused: $(cat "$work/pf.err")"

[ $fail -eq 0 ] && echo "test_plan_cli: all checks passed"
exit $fail
