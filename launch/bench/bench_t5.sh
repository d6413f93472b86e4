#!/usr/bin/env bash
# The UMT5-XXL text encoder on one GPU: staticpipe's CUDA encoder against
# the published encoder in plain PyTorch (bf16), in one run:
#
#   launch/bench/bench_t5.sh BUILD_DIR [OUT_JSON]
#
# One 512-token prompt through the full-size encoder. Ours: `staticpipe
# encode --device cuda --t5 synth:umt5-xxl` (the published config, synthetic
# weights generated on the host, so "load" is generation + bf16 rounding +
# the copy up, counted apart) on REPS + 1 copies of the prompt in one call:
# the first sequence (one-time GEMM heuristics) is reported apart, the
# others' mean is the time per prompt. The tokenizer is a small test model
# (tests/fuzz/corpus_tok_spm/byte_fallback.model): the prompt is cut at 512
# tokens either way, and tokenizing is not timed. PyTorch:
# launch/bench/torch_t5.py (random bf16 weights of the published shapes,
# eager attention as published; two warm-ups, median of REPS). Prints a
# table (header lines start with '#') and one JSON line with the ratio ours
# / PyTorch; OUT_JSON gets the JSON too. PYTHON picks the interpreter with
# torch; REPS (default 10). About 2 minutes of an H200, most of it making
# 5.7 billion synthetic weights on the host (OpenMP: one layer took 16 s on
# one core here, so about half a minute on 16).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${1:?usage: bench_t5.sh BUILD_DIR [OUT_JSON]}" && pwd)
out=${2:-bench-t5.json}
py=${PYTHON:-python3}
reps=${REPS:-10}
bin="$B/staticpipe"
[ -x "$bin" ] || { echo "bench_t5.sh: no $bin" >&2; exit 2; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
words=(a red fox running over bright snowy hills under the quiet light of morning tomu muri)
prompt=""
for i in $(seq 1 700); do prompt+="${words[$((i * 7 % ${#words[@]}))]} "; done
for i in $(seq 0 "$reps"); do echo "$prompt"; done > "$T/prompts.txt"

echo "# staticpipe: encode --device cuda, synth:umt5-xxl, $((reps + 1)) x 512 tokens" >&2
t0=$(date +%s.%N)
"$bin" encode --device cuda --t5 synth:umt5-xxl \
  --tokenizer "$root/tests/fuzz/corpus_tok_spm/byte_fallback.model" --prompts "$T/prompts.txt" \
  --no-negative -o "$T/conds" > "$T/ours.log" 2>&1 || { tail -5 "$T/ours.log" >&2; exit 1; }
wall=$("$py" -c "import sys; print(float(sys.argv[1]) - float(sys.argv[2]))" "$(date +%s.%N)" "$t0")
line=$(grep 'encode: cuda:' "$T/ours.log" | tail -1)
toks=$(grep -o 'wrote [^ ]* ([0-9]* tokens' "$T/ours.log" | head -1 | grep -o '[0-9]* tokens' | cut -d' ' -f1)
load=$(echo "$line" | sed -n 's/.*placed in \([0-9.]*\) s.*/\1/p')
first=$(echo "$line" | sed -n 's/.*the first \([0-9.]*\) s.*/\1/p')
each=$(echo "$line" | sed -n 's/.*the others \([0-9.]*\) s each.*/\1/p')
[ -n "$each" ] || { echo "bench_t5.sh: no timing line in the encode log:" >&2; cat "$T/ours.log" >&2; exit 1; }

echo "# PyTorch: launch/bench/torch_t5.py 512 $reps" >&2
"$py" "$root/launch/bench/torch_t5.py" 512 "$reps" > "$T/torch.json" 2> "$T/torch.log" ||
  { tail -5 "$T/torch.log" >&2; exit 1; }

"$py" - "$T/torch.json" "$load" "$first" "$each" "$toks" "$wall" "$out" <<'PYEOF'
import json, sys
t = json.load(open(sys.argv[1]))
load, first, each, toks, wall, out = (float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]),
                                      int(sys.argv[5]), float(sys.argv[6]), sys.argv[7])
ours_ms, torch_ms = 1e3 * each, t["median_ms"]
print("# UMT5-XXL encoder, one prompt of %d tokens, bf16 weights, one GPU" % toks)
print("# %-28s %12s %12s" % ("", "staticpipe", "pytorch"))
print("  %-28s %12.2f %12.2f" % ("forward, ms (steady)", ours_ms, torch_ms))
print("  %-28s %12.2f %12s" % ("first forward, ms", 1e3 * first, "-"))
print("  %-28s %12.1f %12.1f" % ("load / init, s", load, t["init_s"]))
print("  %-28s %12.2f %12s" % ("ratio ours / pytorch", ours_ms / torch_ms, ""))
j = {"bench": "t5", "tokens": toks, "ours_ms": ours_ms, "ours_first_ms": 1e3 * first,
     "ours_load_s": load, "ours_wall_s": wall, "torch_ms": torch_ms, "torch_min_ms": t["min_ms"],
     "torch_init_s": t["init_s"], "torch_peak_bytes": t["peak_bytes"], "torch": t["torch"],
     "ratio": ours_ms / torch_ms}
print(json.dumps(j))
open(out, "w").write(json.dumps(j) + "\n")
PYEOF
