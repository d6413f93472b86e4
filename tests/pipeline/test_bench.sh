#!/usr/bin/env bash
# staticpipe bench: a sweep over ranks and budgets on the CPU
# backend writes JSON, CSV, a markdown table and the plot; a configuration
# that cannot run (a 2-rank budget on 1 rank) is reported in its row and
# the sweep goes on; the runs' latents are not kept. A second sweep over
# the streamed fraction and the order passes both to run, reports the order
# run and each row's step time against its stream-frac 0 row (vs_base),
# and plots one series per order; it runs each configuration twice (-r 2)
# and each row's mean and standard deviation are those of its two runs'
# own JSON. The CSV starts with its header line (the environment in
# bench-env.csv); the plot puts the dimension that varies on x: ranks for
# the first sweep, one panel per frames x budget (a 2x2 grid), the
# streamed share for the second, one panel. Bad list values and too many
# configurations are refused before anything runs. A sweep over two models
# (their stored formats) and two precisions (a dry run) gives each run its
# --model and --precision.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir bench
"$SP_BIN" init --arch wan2.1-tiny --seed 2 -q -o "$work/m.h5" || exit 1
"$PY" -c 'import sys,h5py,numpy as np
r=np.random.default_rng(1)
with h5py.File(sys.argv[1],"w") as f:
    f["context"]=r.standard_normal((20,4096)).astype(np.float32)
    f["context_null"]=r.standard_normal((20,4096)).astype(np.float32)' "$work/c.h5" || exit 1
"$SP_BIN" bench --model "$work/m.h5" --cond "$work/c.h5" --ranks 1,2 --budget auto \
  --budget "cuda:0,25%;cuda:1,*" --frames 5,9 --size 32x32 --steps 2 \
  --launcher "mpirun --oversubscribe" -o "$work/b" 2> "$work/bench.log"; rc=$?
"$SP_BIN" bench --model "$work/m.h5" --cond "$work/c.h5" --stream-frac 0,1 --order micro,block \
  --frames 5 --size 32x32 --steps 2 -r 2 --extra "--attn simple" -o "$work/s" 2> "$work/sweep.log"; rc_s=$?
"$SP_BIN" bench --model "$work/m.h5" --model synth:wan2.1-tiny --precision bf16,fp8 \
  --cond "$work/c.h5" --frames 5 --size 32x32 --dry-run -o "$work/p" > "$work/dry.txt" \
  2> "$work/dry.log"; rc_p=$?
# Refused up front (exit 2, no output folder): a value out of range, an
# unknown order, a flag bench sets itself in --extra, more than 256 runs.
rc_bad=
for bad in "--stream-frac 0,1.5" "--order micro,fast" "--extra --order=block" "--precision fp16" \
           "--ranks 1,2,3,4,5,6,7,8,9 --frames 1,5,9,13,17,21,25,29 --order micro,block,auto,micro" \
           "-r 0" "--devices 0,x" "--extra --devices=1"; do
  # shellcheck disable=SC2086 # the flags are split on purpose
  "$SP_BIN" bench --model "$work/m.h5" --cond "$work/c.h5" $bad -o "$work/bad" 2>> "$work/bad.log"
  rc_bad="$rc_bad $?"
done
[ -e "$work/bad" ] && rc_bad="$rc_bad made-output"
"$PY" - "$work/b" $rc "$work/s" $rc_s "$rc_bad" "$work/bad.log" $rc_p "$work/dry.txt" "$work/m.h5" <<'PYEOF'
import csv, json, os, shutil, sys
d, rc, s, rc_s, rc_bad, bad_log = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6]
rc_p, dry, model = int(sys.argv[7]), open(sys.argv[8]).read().splitlines(), sys.argv[9]
ok = True
def check(c, what):
    global ok
    print(("ok   " if c else "FAIL ") + what)
    ok = ok and c
def is_png(path):
    return open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
def table(path):
    """The CSV's rows; its first line is the header."""
    with open(path) as f:
        assert f.readline().startswith("ranks,devices,"), path
        f.seek(0)
        return list(csv.DictReader(f))
def blocks(path):
    """The plot data: its x line, and per block its header and its points'
    x values."""
    text = open(path).read()
    x = [l for l in text.splitlines() if l.startswith("# x: ")]
    out = []
    for b in text.split("\n\n\n"):
        lines = [l for l in b.splitlines() if l and not l.startswith("# ") or l.startswith("# order")]
        if lines and lines[0].startswith("# order"):
            out.append((lines[0], [float(l.split()[0]) for l in lines[1:]]))
    return x, out
def md_rows(path):
    return [l for l in open(path) if l.startswith("| ") and not l.startswith("| ranks")]

rows = json.load(open(f"{d}/bench.json"))["rows"]
check(len(rows) == 2 * 2 * 2, f"one row per configuration ({len(rows)})")
bad = [r for r in rows if r["status"] != 0]
check(len(bad) == 2 and all(r["ranks"] == 1 and "%" in r["budget"] for r in bad),
      "the 2-rank ratio budget on 1 rank fails, alone")
good = [r for r in rows if r["status"] == 0]
# (The CPU backend's predicted times use the GPU rate model, so for the
# tiny model they round to zero: only their presence is checked.)
check(all(r["step_ms"] > 0 and r["steady_step_ms"] > 0 and r["predicted_step_ms"] >= 0
          for r in good), "measured and predicted step times")
check(all(r["order"] in ("micro", "block") and r["vs_base"] is None and r["stream_frac"] is None
          for r in good), "without --order and --stream-frac: the order run, no vs_base")
check(all(r["load_gbs"] > 0 and r["h2d_gb_per_step"] == 0 and r["mem_vs_plan"] == 0 for r in good),
      "load rate; no host-to-device bytes or device peak on the CPU backend")
check(rc == 1, f"exit 1 when a configuration failed (got {rc})")
c = table(f"{d}/bench.csv")
check(len(c) == 8 and set(c[0]) >= {"ranks", "budget", "step_ms", "predicted_ms", "streamed",
                                   "steady_step_ms", "order", "vs_base", "load_gbs", "mem_vs_plan"},
      "CSV")
check(len(md_rows(f"{d}/bench.md")) == 8, "markdown table")
check(not any(n.endswith(".h5") for n in os.listdir(d)), "no latents kept")
env = {r["key"]: r["value"] for r in csv.DictReader(open(f"{d}/bench-env.csv"))}
check({"gpu", "commit", "mpi", "host"} <= set(env), "bench-env.csv: the environment")
x, bl = blocks(f"{d}/bench-step.dat")
gp = open(f"{d}/bench-step.gp").read()
heads = sorted(h for h, _ in bl)
want = sorted("# order micro; frames %d, budget %s: x steady_step_ms predicted_ms label" % (f, b)
              for f in (5, 9) for b in ("auto", "cuda:0,25%;cuda:1,*"))
check(x == ["# x: ranks"] and heads == want and all(set(v) <= {1.0, 2.0} for _, v in bl)
      and sum(len(v) for _, v in bl) == 6 and "set multiplot layout 2,2" in gp
      and "set xlabel 'ranks'" in gp, "ranks x budget x frames: ranks on x, a panel per frames "
      "and budget, the 6 successful rows (%s, %s)" % (x, heads))
if shutil.which("gnuplot"):
    check(is_png(f"{d}/bench-step.png"), "PNG plot")

# The sweep over --stream-frac 0,1 x --order micro,block on one rank.
check(rc_s == 0, f"stream-frac x order sweep: exit 0 (got {rc_s})")
rows = json.load(open(f"{s}/bench.json"))["rows"]
check(len(rows) == 4, f"stream-frac x order: one row per configuration ({len(rows)})")
check([(r["stream_frac"], r["order_asked"]) for r in rows]
      == [(0, "micro"), (0, "block"), (1, "micro"), (1, "block")], "rows in sweep order")
check(all(r["status"] == 0 and r["order"] == r["order_asked"] for r in rows),
      "the order run is the order asked")
# The CPU backend runs every block resident, but the plan streams what
# --stream-frac asks.
check(all(r["streamed_fraction"] == r["stream_frac"] for r in rows),
      "the plan streams the fraction asked (0 and 1)")
check(all(r["vs_base"] == 1.0 for r in rows if r["stream_frac"] == 0), "vs_base 1 at stream-frac 0")
base = {r["order"]: r["steady_step_ms"] for r in rows if r["stream_frac"] == 0}
check(all(abs(r["vs_base"] - r["steady_step_ms"] / base[r["order"]]) < 1e-9
          for r in rows if r["stream_frac"] == 1), "vs_base at stream-frac 1: over its order's base")
c = table(f"{s}/bench.csv")
check(len(c) == 4 and [x["order"] for x in c] == ["micro", "block"] * 2
      and [x["stream_frac"] for x in c] == ["0", "0", "1", "1"], "stream-frac x order: CSV")
check(len(md_rows(f"{s}/bench.md")) == 4, "stream-frac x order: markdown table")
# -r 2: each row is its two runs, as their own JSON says (run-K-J.json).
def runs(k):
    return [json.load(open(f"{s}/run-{k}-{j}.json")) for j in (1, 2)]
def mean_sd(xs):
    m = sum(xs) / len(xs)
    return m, (sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5
def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))
stats_ok = True
for k, r in enumerate(rows):
    rr = runs(k)
    want = {"step_ms": [x["step_ms"] for x in rr],
            "steady_step_ms": [x["steady_step_ms"] for x in rr],
            "video_s": [x["sample_s"] for x in rr],
            "steps_per_s": [x["steps"] / x["sample_s"] for x in rr]}
    for key, xs in want.items():
        m, sd = mean_sd(xs)
        stats_ok = stats_ok and close(r[key], m) and close(r[key + "_sd"], sd)
    stats_ok = stats_ok and r["runs"] == 2 and r["repeat"] == 2
    stats_ok = stats_ok and r["act_gbs"] is None and r["act_mb"] is None and r["link"] is None
check(stats_ok, "-r 2: mean and standard deviation of each row's two runs; no link on 1 rank")
check(all(x["runs"] == "2" and float(x["steady_step_ms_sd"]) >= 0 and float(x["video_s"]) > 0
          and float(x["steps_per_s"]) > 0 for x in c), "-r 2: CSV runs, deviations, s/video, steps/s")
check(all(" ± " in l for l in md_rows(f"{s}/bench.md")), "-r 2: markdown mean ± deviation")
dat = open(f"{s}/bench-step.dat").read()
x, bl = blocks(f"{s}/bench-step.dat")
check(dat.count("# order ") == 2 and "# order micro" in dat and "# order block" in dat
      and x == ["# x: streamed share of the blocks"] and all(v == [0.0, 1.0] for _, v in bl)
      and "multiplot" not in open(f"{s}/bench-step.gp").read(),
      "plot data: the streamed share on x, one panel, one block per order")
if shutil.which("gnuplot"):
    check(is_png(f"{s}/bench-step.png"), "stream-frac x order: PNG plot")

want = [(m, p) for m in (model, "synth:wan2.1-tiny") for p in ("bf16", "fp8")]
got = [(l.split("--model ")[1].split()[0], l.split("--precision ")[1].split()[0]) for l in dry
       if "--model " in l and "--precision " in l]
check(rc_p == 0 and got == want, f"model x precision sweep: each run its --model and --precision ({got})")
check(rc_bad.split() == ["2"] * 8, f"bad values and too many configurations: exit 2, nothing written ({rc_bad.strip()})")
log = open(bad_log).read()
check(all(w in log for w in ("--stream-frac: '1.5'", "--order: 'fast'", "--extra: '--order=block'",
                              "--precision: 'fp16'",
                              "more than 256", "--repeat: '0'", "--devices: 'x'",
                              "--extra: '--devices=1'")), "each refusal names its flag")
sys.exit(0 if ok else 1)
PYEOF
