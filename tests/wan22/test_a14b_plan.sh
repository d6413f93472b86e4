#!/bin/bash
# The planner counts both experts of a two-expert model: with the same split
# (2 ranks of 80 GiB, nothing streamed) each rank's weight bytes for
# synth:wan2.2-a14b are its bytes for synth:wan2.1-14b (one expert) plus one
# more copy of the same groups, the text plan says it holds two experts,
# and under a small budget blocks are streamed (both experts' copies).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/find_python.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/sp-wan22-plan.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
args=(plan --frames 81 --size 480x832 --ranks 2 --gpu-mem 80gb --json)
"$SP_BIN" "${args[@]}" --model synth:wan2.1-14b >"$work/one.json" || exit 1
"$SP_BIN" "${args[@]}" --model synth:wan2.2-a14b >"$work/two.json" || exit 1
fail=0
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
text=$("$SP_BIN" plan --model synth:wan2.2-a14b --frames 81 --size 480x832 --ranks 2 \
       --gpu-mem 24gb --budget 'cpu,*') || { echo "FAIL: plan at 24gb with cpu,*"; exit 1; }
if ! grep -q "^# 2 experts" <<<"$text" || ! grep -q "streams [0-9]* blocks" <<<"$text"; then
  echo "FAIL: the two-expert plan at 24 GiB does not say two experts and stream blocks:"
  echo "$text"; fail=1
else
  grep "^# 2 experts\|streams" <<<"$text"
fi
exit $fail
