#!/usr/bin/env bash
# The benchmark scripts that have a small CPU mode keep working: bench_e2e.sh
# (E2E_TINY=1, every row on the tiny presets, videos as .h5 as where FFmpeg
# does not load), bench_quant_step.sh and bench_lora.sh
# (wan2.1-tiny, 5 frames of 32x32) run on the CPU; each exits 0, prints its
# table with a row per run, and writes JSON whose rows carry the numbers
# the table is made of (e2e: 2 steps run and decoded, sampling, load and
# decode within the wall time (the rest not negative), each row's ratio to
# its model's bf16 row; quant step: the four runs, the targets judged; lora:
# each precision's two steps and their ratio, its target judged). An unknown
# row word fails bench_e2e.sh.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir bench-scripts
fail=0
# The scripts call python3 for numpy and h5py: the interpreter the tests use.
PATH=$(dirname "$PY"):$PATH
export OMP_NUM_THREADS=1
B=$(dirname "$SP_BIN")
if E2E_TINY=1 E2E_DEVICE=cpu E2E_VIDEO_EXT=h5 bash "$SP_SRC/launch/bench/bench_e2e.sh" "$B" "$work/e2e" \
  > "$work/e2e.txt" 2> "$work/e2e.err"; then
  echo "ok   bench_e2e.sh (tiny, cpu) exits 0"
else
  cat "$work/e2e.txt" "$work/e2e.err"
  echo "FAIL bench_e2e.sh (tiny, cpu) exits non-zero"
  fail=1
fi
E2E_TINY=1 E2E_DEVICE=cpu E2E_ROWS="t2v-14b/bf16 nosuch/bf16" \
  bash "$SP_SRC/launch/bench/bench_e2e.sh" "$B" "$work/e2e-bad" > "$work/e2e-bad.txt" 2>&1 &&
  { echo "FAIL bench_e2e.sh with an unknown row word exits 0"; fail=1; } ||
  echo "ok   bench_e2e.sh with an unknown row word exits non-zero"
if SP_BENCH_PRESET=wan2.1-tiny SP_BENCH_FRAMES=5 SP_BENCH_SIZE=32x32 SP_BENCH_DEVICE=cpu \
  bash "$SP_SRC/launch/bench/bench_quant_step.sh" "$B" "$work/bq" > "$work/bq.txt" 2> "$work/bq.err"; then
  echo "ok   bench_quant_step.sh (tiny, cpu) exits 0"
else
  cat "$work/bq.txt" "$work/bq.err"
  echo "FAIL bench_quant_step.sh (tiny, cpu) exits non-zero"
  fail=1
fi
if SP_BENCH_PRESET=wan2.1-tiny SP_BENCH_FRAMES=5 SP_BENCH_SIZE=32x32 SP_BENCH_DEVICE=cpu \
  LORA_RANK=8 LORA_ROWS="bf16 fp8" bash "$SP_SRC/launch/bench/bench_lora.sh" "$B" "$work/bl" \
  > "$work/bl.txt" 2> "$work/bl.err"; then
  echo "ok   bench_lora.sh (tiny, cpu) exits 0"
else
  cat "$work/bl.txt" "$work/bl.err"
  echo "FAIL bench_lora.sh (tiny, cpu) exits non-zero"
  fail=1
fi
"$PY" - "$work" <<'PY' || fail=1
import json, math, os, sys
from sptest import check, finish
d = sys.argv[1]
words = ["t2v-14b", "t2v-a14b", "i2v-a14b", "ti2v-5b"]
want = [f"{m}/{p}" for m in words for p in ("bf16", "fp8")]
e = json.load(open(os.path.join(d, "e2e", "e2e.json")))
rows = {r["row"]: r for r in e["rows"]}
check(sorted(rows) == sorted(want), f"e2e rows {sorted(rows)}")
table = open(os.path.join(d, "e2e.txt")).read()
check(all(f"| {w} |" in table for w in want), "e2e table has a line per row")
for w, r in rows.items():
    check(r["rc"] == 0 and r["steps"] == 2 and r["decode_s"] is not None
          and min(r["sample_s"], r["load_s"], r["decode_s"]) > 0 and r["rest_s"] >= 0,
          f"e2e {w}: ran 2 steps and decoded; sampling {r['sample_s']:.2f} + load "
          f"{r['load_s']:.2f} + decode {r['decode_s']:.2f} s within the wall {r['wall_s']:.2f} s")
    b = rows[w.split("/")[0] + "/bf16"]
    check(math.isclose(r["sample_vs_bf16"], r["sample_s"] / b["sample_s"], rel_tol=1e-9),
          f"e2e {w}: sampling against its bf16 row")
q = json.load(open(os.path.join(d, "bq", "quant_step.json")))
check(sorted(q["rows"]) == sorted(["bf16", "fp8", "fp8-19g", "q8_0"]), f"quant step rows {sorted(q['rows'])}")
check(all(k in q["targets"] for k in ("weight-only step <= 1.05x bf16", "fp8 device peak <= 19 GiB")),
      "quant step judges its targets")
lo = json.load(open(os.path.join(d, "bl", "lora_step.json")))
check(lo["rank"] == 8 and sorted(lo["rows"]) == ["bf16", "fp8"], f"lora rows {sorted(lo['rows'])}")
for p, r in lo["rows"].items():
    check(min(r["steady_step_ms_none"], r["steady_step_ms_bypass"]) > 0 and math.isclose(
          r["ratio"], r["steady_step_ms_bypass"] / r["steady_step_ms_none"], rel_tol=1e-9),
          f"lora {p}: both steps measured, the ratio theirs")
check("bf16 bypass <= 1.03x the step without a LoRA" in lo["targets"], "lora judges its target")
sys.exit(finish("bench scripts"))
PY
exit $fail
