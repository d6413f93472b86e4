#!/usr/bin/env bash
# staticpipe bench across GPU pairs, with the topology query replaced by a
# test file (SP_TEST_TOPOLOGY): --devices is a sweep dimension passed to
# run; each row names the link between consecutive ranks' GPUs as the file
# describes it (NVLink, PCIe, the same GPU, unknown, several hops) and the
# activation rate its run probed; every output has the environment (the
# CPU build's: no CUDA libraries, the MPI library's version, the commit):
# the CSV's in bench-env.csv, the others' as their first lines; the JSON's
# numbers are numbers. A --devices index beyond
# the GPUs and a bad topology file are refused before anything runs.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir bench-topo
"$SP_BIN" init --arch wan2.1-tiny --seed 3 -q -o "$work/m.h5" || exit 1
"$PY" -c 'import sys,h5py,numpy as np
r=np.random.default_rng(2)
with h5py.File(sys.argv[1],"w") as f:
    f["context"]=r.standard_normal((12,4096)).astype(np.float32)
    f["context_null"]=r.standard_normal((12,4096)).astype(np.float32)' "$work/c.h5" || exit 1
# Four GPUs: 0-1 on NVLink through NVSwitches, 0-2 on PCIe across the
# sockets, 1-2 not described.
cat > "$work/topo.json" <<'EOF'
{"driver": "570.86.15",
 "gpus": ["NVIDIA H200", "NVIDIA H200", "NVIDIA H200", "NVIDIA L40S"],
 "links": [{"gpus": [0, 1], "type": "nvlink", "gen": 4, "width": 18, "path": "NVSwitch"},
           {"gpus": [2, 0], "type": "pcie", "gen": 5, "width": 16, "path": "SYS"}]}
EOF
export SP_TEST_TOPOLOGY="$work/topo.json"
"$SP_BIN" bench --model "$work/m.h5" --cond "$work/c.h5" --ranks 1,2,3 --devices 0,1,2 \
  --devices 2,0 --devices 3,3 --frames 5 --size 32x48 --steps 2 \
  --launcher "mpirun --oversubscribe" -o "$work/b" 2> "$work/bench.log"; rc=$?
"$SP_BIN" bench --model "$work/m.h5" --cond "$work/c.h5" --ranks 2 --devices 0,1 --devices 0,2 \
  --frames 5 --size 32x48 --dry-run -o "$work/dry" > "$work/dry.txt" 2>> "$work/bench.log"; rc_dry=$?
"$SP_BIN" bench --model "$work/m.h5" --cond "$work/c.h5" --ranks 2 --devices 0,4 \
  -o "$work/bad" 2> "$work/bad.log"; rc_bad=$?
echo '{"gpus": ["A"], "links": [{"gpus": [0, 1], "type": "nvlink"}]}' > "$work/badtopo.json"
SP_TEST_TOPOLOGY="$work/badtopo.json" "$SP_BIN" bench --model "$work/m.h5" --cond "$work/c.h5" \
  -o "$work/bad" 2>> "$work/bad.log"; rc_bad="$rc_bad $?"
[ -e "$work/bad" ] && rc_bad="$rc_bad made-output"
# The commit the binary names must be this checkout's HEAD or one before it
# (a commit made since the build); outside a git checkout, "unknown".
git -C "$SP_SRC" rev-parse HEAD > /dev/null 2>&1 && commit=git || commit=unknown
mpi=$(mpirun --version 2>/dev/null | head -1)

"$PY" - "$work" $rc $rc_dry "$rc_bad" "$commit" "$mpi" <<'PYEOF'
import csv, json, os, re, subprocess, sys
T, rc, rc_dry, rc_bad, commit, mpi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
d = f"{T}/b"
ok = True
def check(c, what):
    global ok
    print(("ok   " if c else "FAIL ") + what)
    ok = ok and c

check(rc == 0, f"sweep over --ranks x --devices: exit 0 (got {rc})")
doc = json.load(open(f"{d}/bench.json"))
rows = doc["rows"]
check(len(rows) == 9, f"one row per ranks x devices ({len(rows)})")
check([(r["ranks"], r["devices"]) for r in rows]
      == [(n, g) for n in (1, 2, 3) for g in ("0,1,2", "2,0", "3,3")], "rows in sweep order")

# The links, as the file describes them; rank r takes LIST[r mod length].
NV = {"type": "nvlink", "gen": 4, "width": 18, "path": "NVSwitch"}
PCI = {"type": "pcie", "gen": 5, "width": 16, "path": "SYS"}
UNK = {"type": "unknown", "gen": None, "width": None, "path": None}
SAME = {"type": "same", "gen": None, "width": None, "path": None}
want = {
    (1, "0,1,2"): ([0], [], None),
    (1, "2,0"): ([2], [], None),
    (1, "3,3"): ([3], [], None),
    (2, "0,1,2"): ([0, 1], [NV], "NVLink 4 x18 (NVSwitch)"),
    (2, "2,0"): ([2, 0], [PCI], "PCIe 5 x16 (SYS)"),
    (2, "3,3"): ([3, 3], [SAME], "same GPU"),
    (3, "0,1,2"): ([0, 1, 2], [NV, UNK], "GPU 0-1: NVLink 4 x18 (NVSwitch); GPU 1-2: unknown"),
    (3, "2,0"): ([2, 0, 2], [PCI, PCI], "GPU 2-0: PCIe 5 x16 (SYS); GPU 0-2: PCIe 5 x16 (SYS)"),
    (3, "3,3"): ([3, 3, 3], [SAME, SAME], "GPU 3-3: same GPU; GPU 3-3: same GPU"),
}
links_ok = True
for r in rows:
    gpus, links, text = want[(r["ranks"], r["devices"])]
    got = [{k: l[k] for k in ("type", "gen", "width", "path")} for l in (r["links"] or [])]
    hops = [(l["from"], l["to"]) for l in (r["links"] or [])]
    good = (r["gpus"] == gpus and got == links and r["link"] == text
            and hops == list(zip(gpus, gpus[1:])))
    if not good:
        print("     ", r["ranks"], r["devices"], r["gpus"], r["link"], got)
    links_ok = links_ok and good
check(links_ok, "each row's GPUs and the links between them, from the topology file")
check(all(r["status"] == 0 for r in rows), "every configuration ran")
check(all((r["act_gbs"] is None) == (r["ranks"] == 1) and (r["act_gbs"] is None or r["act_gbs"] > 0)
          for r in rows), "a probed activation rate for every row with a hop, none on 1 rank")
# One latent shape: one activation message size whatever the ranks.
acts = {r["act_mb"] for r in rows if r["ranks"] > 1}
check(len(acts) == 1 and acts.pop() > 0, "one activation message size for one shape")
check(all(r["step_ms"] > 0 and r["video_s"] > 0 and r["steps_per_s"] > 0 and r["step_ms_sd"] is None
          for r in rows), "step time, seconds per clip, steps per second; no deviation from one run")

# Numbers are numbers.
num_keys = ("ranks", "frames", "height", "width", "status", "repeat", "runs", "step_ms",
            "steady_step_ms", "video_s", "steps_per_s", "predicted_step_ms", "streamed_fraction",
            "h2d_gb_per_step", "load_s", "load_gbs", "mem_vs_plan")
check(all(type(r[k]) in (int, float) for r in rows for k in num_keys),
      "numeric JSON fields are numbers")
check(all(r["frames"] == 5 and type(r["frames"]) is int and r["height"] == 32 and r["width"] == 48
          for r in rows), "frames, height, width as integers (5, 32, 48)")

# The environment header, the same in every output.
env = doc["environment"]
keys = ["gpu", "driver", "cuda_runtime", "cuda_driver", "cudnn", "nccl", "mpi", "commit", "build",
        "host", "date"]
check(list(env) == keys, f"environment keys ({list(env)})")
check(env["gpu"] == "NVIDIA H200 x3, NVIDIA L40S x1" and env["driver"] == "570.86.15",
      "GPUs and driver from the topology")
if env["build"] == "cpu":
    check(all(env[k] == "none" for k in ("cuda_runtime", "cuda_driver", "cudnn", "nccl")),
          "a CPU build: no CUDA libraries")
else:  # a CUDA build (CI compiles one) on a machine without a GPU driver
    check(env["build"] == "cuda" and env["cuda_runtime"] != "none" and env["cudnn"] != "none",
          f"a CUDA build: its runtime and cuDNN named ({env['build']}, {env['cuda_runtime']}, "
          f"{env['cudnn']})")
ver = re.search(r"(\d+\.\d+(\.\d+)?)", mpi)
check(ver is not None and ver.group(1) in env["mpi"], f"MPI version ({env['mpi']!r}, {mpi!r})")
m = re.fullmatch(r"([0-9a-f]{12})(-dirty)?", env["commit"])
if commit == "git":
    built = m and subprocess.run(["git", "-C", os.environ["SP_SRC"], "merge-base", "--is-ancestor",
                                  m.group(1), "HEAD"]).returncode == 0
else:
    built = env["commit"] == "unknown"
check(bool(built), f"the commit built ({env['commit']}): HEAD or an ancestor")
check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", env["date"]) is not None, "date")
head = [f"{k}: {env[k]}" for k in keys]
csv_lines = open(f"{d}/bench.csv").read().splitlines()
envcsv = list(csv.reader(open(f"{d}/bench-env.csv")))
check(csv_lines[0].startswith("ranks,devices,link,") and envcsv[0] == ["key", "value"]
      and envcsv[1:] == [[k, env[k]] for k in keys], "CSV: the header line first, the "
      "environment in bench-env.csv")
md = open(f"{d}/bench.md").read().splitlines()
check(md[:len(keys)] == ["- " + h for h in head], "markdown header list")
check(open(f"{d}/bench-step.dat").read().splitlines()[:len(keys)] == ["# " + h for h in head],
      "plot data header lines")
c = list(csv.DictReader(csv_lines))
check([x["link"] for x in c] == [r["link"] or "" for r in rows]
      and [x["devices"] for x in c] == [r["devices"] for r in rows], "CSV devices and link")
check(sum("NVLink 4 x18 (NVSwitch)" in l for l in md) == 2, "markdown link column")

check(rc_dry == 0, "dry run")
dry = open(f"{T}/dry.txt").read().splitlines()
check(len(dry) == 2 and "--devices 0,1" in dry[0] and "--devices 0,2" in dry[1],
      "each run is given its --devices")
check(rc_bad.split() == ["2", "2"], f"bad --devices index, bad topology file: exit 2, nothing written ({rc_bad})")
log = open(f"{T}/bad.log").read()
check("--devices: '0,4': GPU 4, but 4 GPUs are visible" in log and "link 0: GPUs 0 and 1" in log,
      "each refusal says why")
sys.exit(0 if ok else 1)
PYEOF
