#!/usr/bin/env bash
# Step caching (run --cache) against the uncached run, measured in the same
# run of this script:
#
#   launch/bench/bench_cache.sh BUILD_DIR [OUT_JSON]
#
# Runs `staticpipe run` once with --cache off and once per method of
# METHODS, from the same seeded noise and the same random context, and
# reports for each: micro-batch steps skipped (run --json), the sampling
# loop's wall time (sample_s) and its ratio to the uncached run's, and the
# relative L2 of the latents against the uncached ones. Prints a table
# (header lines start with '#') and one JSON line; OUT_JSON gets the JSON.
#
# Settings (environment; defaults run in about a minute on 2 CPU cores):
#   MODEL    synth:wan2.1-1.3b        (synth:PRESET or a model file)
#   SIZE     128x128, FRAMES 9, STEPS 50, CFG 5, SEED 1
#   DEVICE   cpu                      (or cuda: the CUDA stage's step cache)
#   NP       1                        (ranks: mpirun -np NP when above 1)
#   REPS     1                        (runs of each setting, round robin; the
#                                      fastest sampling loop counts: on a
#                                      shared machine the others wait)
#   METHODS  the published thresholds of the model's size: for a 14B model
#            (MODEL contains 14b) teacache:0.14 teacache:0.2 magcache:0.12,
#            else teacache:0.05 teacache:0.08 magcache:0.12
#   PYTHON   a python3 with numpy and h5py
# The 14B 480p configuration on a GPU:
#   MODEL=synth:wan2.1-14b SIZE=480x832 FRAMES=81 STEPS=50 CFG=5 DEVICE=cuda \
#     launch/bench/bench_cache.sh build
# Synthetic weights say nothing of visual quality, and their time embedding
# changes far more from step to step than a trained model's, so TeaCache's
# published thresholds skip nothing on them (MagCache's criterion is a
# table of the published model's ratios and skips as published).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${1:?usage: bench_cache.sh BUILD_DIR [OUT_JSON]}" && pwd)
out=${2:-bench-cache.json}
py=${PYTHON:-python3}
model=${MODEL:-synth:wan2.1-1.3b}
size=${SIZE:-128x128}
frames=${FRAMES:-9}
steps=${STEPS:-50}
cfg=${CFG:-5}
seed=${SEED:-1}
dev=${DEVICE:-cpu}
np_=${NP:-1}
case "$model" in
*14b*) methods=${METHODS:-teacache:0.14 teacache:0.2 magcache:0.12} ;;
*) methods=${METHODS:-teacache:0.05 teacache:0.08 magcache:0.12} ;;
esac
bin="$B/staticpipe"
[ -x "$bin" ] || { echo "bench_cache.sh: no $bin" >&2; exit 2; }
"$py" -c 'import numpy, h5py' 2>/dev/null ||
  { echo "bench_cache.sh: $py has no numpy and h5py (set PYTHON)" >&2; exit 2; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$py" - "$T/cond.h5" "$seed" <<'PYEOF' || exit 1
import sys, h5py, numpy as np
r = np.random.default_rng(int(sys.argv[2]))
with h5py.File(sys.argv[1], "w") as f:
    f["context"] = r.standard_normal((77, 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((126, 4096)).astype(np.float32)
PYEOF
pre=()
[ "$np_" -gt 1 ] && pre=(mpirun -np "$np_")
args=(--model "$model" --cond "$T/cond.h5" --size "$size" --frames "$frames" --steps "$steps"
      --cfg "$cfg" --seed "$seed" --device "$dev" -q --no-preview --json)
names=(off $methods)
reps=${REPS:-1}
for r in $(seq 1 "$reps"); do
  for m in "${names[@]}"; do
    echo "# run $r/$reps --cache $m ($model, ${frames}x$size, $steps steps, cfg $cfg, $dev, $np_ rank(s))" >&2
    "${pre[@]}" "$bin" run "${args[@]}" --cache "$m" -o "$T/$m.h5" > "$T/$m.$r.json" 2> "$T/$m.err" ||
      { tail -3 "$T/$m.err" >&2; exit 1; }
  done
done

"$py" - "$T" "$out" "$model" "$size" "$frames" "$steps" "$cfg" "$dev" "$np_" "$reps" "${names[@]}" <<'PYEOF'
import json, sys, h5py, numpy as np
d, out, model, size, frames, steps, cfg, dev, nranks, reps = sys.argv[1:11]
names = sys.argv[11:]
def load(n):
    js = [json.loads(open("%s/%s.%d.json" % (d, n, r)).read().strip().splitlines()[-1])
          for r in range(1, int(reps) + 1)]
    j = min(js, key=lambda x: x["sample_s"])
    with h5py.File("%s/%s.h5" % (d, n), "r") as f:
        return j, f["latents"][()].astype(np.float64)
base_j, base = load("off")
rows = []
for n in names:
    j, lat = load(n)
    c = j.get("cache", {})
    rows.append({"cache": n, "sample_s": j["sample_s"],
                 "ratio": j["sample_s"] / base_j["sample_s"],
                 "skipped": c.get("skipped_micro_batch_steps", 0),
                 "micro_batch_steps": c.get("micro_batch_steps", 0),
                 "skipped_steps": c.get("skipped_steps", []),
                 "rel_l2": float(np.linalg.norm(lat - base) / np.linalg.norm(base))})
print("# step caching: %s, %s frames %s, %s steps, cfg %s, %s, %s rank(s), fastest of %s; "
      "ratios against --cache off in the same run" % (model, frames, size, steps, cfg, dev,
                                                      nranks, reps))
print("# %-16s %9s %10s %8s %10s" % ("cache", "skipped", "sample_s", "ratio", "rel_L2"))
for r in rows:
    tot = r["micro_batch_steps"] or int(steps) * (2 if float(cfg) != 1 else 1)
    print("  %-16s %4d/%-4d %10.2f %8.3f %10.3e" % (r["cache"], r["skipped"], tot,
                                                  r["sample_s"], r["ratio"], r["rel_l2"]))
j = {"bench": "cache", "model": model, "size": size, "frames": int(frames),
     "steps": int(steps), "cfg": float(cfg), "device": dev, "ranks": int(nranks),
     "reps": int(reps), "runs": rows}
print(json.dumps(j))
open(out, "w").write(json.dumps(j) + "\n")
PYEOF
