#!/bin/bash
# The planner counts both experts of a two-expert model: with the same split
# (2 ranks of 80 GiB, nothing streamed) each rank's weight bytes for
# synth:wan2.2-a14b are its bytes for synth:wan2.1-14b (one expert) plus one
# more copy of the same groups, the text plan says it holds two experts,
# and says per rank how it holds them: resident, swap or stream.
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir wan22-plan
args=(plan --frames 81 --size 480x832 --ranks 2 --gpu-mem 80gb --json)
"$SP_BIN" "${args[@]}" --model synth:wan2.1-14b >"$work/one.json" || exit 1
"$SP_BIN" "${args[@]}" --model synth:wan2.2-a14b >"$work/two.json" || exit 1
"$PY" - "$work" <<'PY' || fail=1
import json, sys
w = sys.argv[1]
one, two = (json.load(open(f"{w}/{n}.json")) for n in ("one", "two"))
ok = True
# One expert's group sizes, from the config (MODEL.md "Configs"): a 14B
# block is 702,788,608 bytes in bf16.
block = 702788608
for a, b in zip(one["ranks"], two["ranks"]):
    same_split = (a["first_block"], a["last_block"]) == (b["first_block"], b["last_block"])
    nb = a["last_block"] - a["first_block"] + 1
    extra = b["weight_bytes"] - a["weight_bytes"]
    # the second copy of the rank's blocks and embeddings or head (within the
    # alignment of each group)
    good = same_split and not a["streamed"] and not b["streamed"] and \
        nb * block <= extra <= nb * block + 2 * 10 ** 9 and abs(extra - a["weight_bytes"]) < 4096
    print(f"rank {a['rank']}: blocks {a['first_block']}-{a['last_block']}, one expert "
          f"{a['weight_bytes']} bytes, two {b['weight_bytes']}: {'ok' if good else 'FAIL'}")
    ok &= good
sys.exit(0 if ok else 1)
PY
# The choice per rank (planner/plan.h PLAN_EXPERTS_*): 80 GiB holds both
# experts' shares (resident); 24 GiB one share of the blocks only (swap at
# the switch, both shares in pinned host memory: 40 blocks of 702,788,608
# bytes per expert, half per rank, twice); 12 GiB not even that (stream).
common=(plan --model synth:wan2.2-a14b --frames 81 --size 480x832 --ranks 2)
want() { # GPU-MEM BUDGET PATTERN...
  local mem=$1 budget=$2; shift 2
  local text
  text=$("$SP_BIN" "${common[@]}" --gpu-mem "$mem" --budget "$budget") ||
    { echo "FAIL: plan at $mem with $budget"; fail=1; return; }
  for pat in "$@"; do
    if ! grep -q -- "$pat" <<<"$text"; then
      echo "FAIL: the plan at $mem ($budget) lacks '$pat':"; echo "$text"; fail=1; return
    fi
  done
  echo "$mem: $(grep -c "experts: " <<<"$text") ranks: $(grep "^# rank 0 experts" <<<"$text")"
}
want 80gb auto "^# 2 experts" "^# rank 0 experts: resident" "^# rank 1 experts: resident"
host=$(( 20 * 702788608 * 2 ))
want 24gb 'cpu,*' "^# rank 0 experts: swap at the switch" "^# rank 1 experts: swap at the switch" \
  "both experts' $("$PY" -c "print(f'{$host / 2**30:.2f}')") GB in pinned host memory" \
  "predicted switch cost [0-9.]* ms"
want 12gb 'cpu,*' "streams [0-9]* blocks" "^# rank [01] experts: stream"
# Without a cpu entry nothing goes to host memory: no swap at 24 GiB.
if "$SP_BIN" "${common[@]}" --gpu-mem 24gb >/dev/null 2>&1; then
  echo "FAIL: a 24 GiB plan without a cpu entry was made"; fail=1
fi
exit $fail
