#!/usr/bin/env bash
# End to end on one GPU: a prompt (and, for image to video, an image) to a
# video in one command, as a user runs it:
#
#   launch/bench/bench_e2e.sh BUILD_DIR [OUT_DIR]      (default OUT_DIR bench-e2e)
#
# Each row is one `staticpipe run --t5 T5.h5 --prompt ... --model
# synth:MODEL --vae synth:VAE --video OUT` with synthetic weights (timing
# only: the video is noise; T5.h5 is `init --arch umt5-xxl` with a small test
# tokenizer, written once into E2E_MODEL_DIR, default OUT_DIR/model: 11 GB,
# a minute or two), each model at its published defaults (frames,
# size, steps, guidance, shift: the model file's, which run takes when the
# flags are left out). E2E_ROWS picks rows, MODEL/PRECISION words (default
# all eight):
#   t2v-14b    synth:wan2.1-14b, 81 frames of 480x832, 50 steps (Wan 2.1)
#   t2v-a14b   synth:wan2.2-a14b, 81 frames of 480x832, 40 steps (Wan 2.2)
#   i2v-a14b   synth:wan2.2-i2v-a14b from an 832x480 PNG (--max-area
#              480*832), 81 frames, 40 steps, the Wan 2.1 VAE's encoder
#   ti2v-5b    synth:wan2.2-ti2v-5b from a 1280x704 PNG, 121 frames of
#              704x1280, the Wan 2.2 VAE (encoder and decoder)
# PRECISION: one of launch/bench/bench_precision.sh's words (bf16; fp8:
# --precision fp8, W8A8 with the weights quantised at load; fp8-fast-int8attn,
# fp8-fast-fp8attn: the same with fast fp8 accumulation and 8-bit attention).
# Per row: the command's wall time; of it the sampling (run --json
# sample_s), the weights' load (the slowest rank's load_s: making the
# synthetic weights on the host, their bf16 rounding and the copy up) and
# the VAE decode (run's "decoded in" line); the rest is the text encoder,
# the image's encode and writing the outputs. Each row's sampling and wall
# time are also given as a ratio to the bf16 row of the same model when the
# run has one. The video is an .mp4 where FFmpeg's libraries load, else .h5
# (E2E_VIDEO_EXT=h5 or mp4 chooses).
# Table on stdout, OUT_DIR/e2e.json. Each row runs under E2E_TIMEOUT seconds
# (default 590); a row that fails or times out is reported and the others
# run. Times on an H100 (RESULTS.md): 14B bf16 about 5 minutes, A14B about
# 4; an unattended 10-minute window holds one or two rows.
# E2E_TINY=1 runs the same rows on the tiny presets (5 frames of 64x64, 2
# steps, the tiny text encoder and VAEs) on E2E_DEVICE (default cuda), for
# a check of the script itself (E2E_TINY=1 E2E_DEVICE=cpu).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${1:?usage: bench_e2e.sh BUILD_DIR [OUT_DIR]}" && pwd)
OUT=${2:-bench-e2e}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SP=$B/staticpipe
ROWS=${E2E_ROWS:-t2v-14b/bf16 t2v-14b/fp8 t2v-a14b/bf16 t2v-a14b/fp8 i2v-a14b/bf16 i2v-a14b/fp8 ti2v-5b/bf16 ti2v-5b/fp8}
DEV=${E2E_DEVICE:-cuda}
LIMIT=${E2E_TIMEOUT:-590}
TINY=${E2E_TINY:-0}
PROMPT="A red fox runs through fresh snow in a pine forest at dawn, low sun, soft light"
export NCCL_NVLS_ENABLE=0
. "$root/launch/bench/bench_precision.sh"
[ -x "$SP" ] || { echo "bench_e2e.sh: no $SP" >&2; exit 2; }
vx=${E2E_VIDEO_EXT:-}
if [ -z "$vx" ]; then
  vx=h5
  "$SP" decode --help 2>/dev/null | grep -q "Here: libavformat" && vx=mp4
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# The input images: smooth colour fields with noise, at each model's size.
python3 - "$T" <<'PY' || exit 1
import struct, sys, zlib
import numpy as np
t = sys.argv[1]
r = np.random.default_rng(7)
def png(path, w, h):
    yy, xx = np.mgrid[0:h, 0:w]
    u8 = np.clip(127.5 + 90 * np.sin(xx[..., None] * 0.013 + yy[..., None] * 0.021 + r.uniform(0, 6, 3))
                 + r.normal(0, 12, (h, w, 3)), 0, 255).astype(np.uint8)
    raw = b"".join(b"\x00" + u8[y].tobytes() for y in range(h))
    def chunk(k, d):
        return struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d) & 0xFFFFFFFF)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
png(f"{t}/i2v.png", 832, 480)
png(f"{t}/ti2v.png", 1280, 704)
png(f"{t}/tiny.png", 96, 64)
PY
# The text encoder: a synthetic one has no tokenizer, so the full-size rows
# read a file made once with the tokenizer of the tests (the prompt is far
# below 512 tokens either way).
MD=${E2E_MODEL_DIR:-$OUT/model}
T5=$MD/umt5-xxl.h5
if [ "$TINY" != 1 ] && [ ! -f "$T5" ]; then
  mkdir -p "$MD"
  echo "# making $T5 (init --arch umt5-xxl with a test tokenizer)" >&2
  "$SP" init --arch umt5-xxl -q --tokenizer "$root/tests/fuzz/corpus_tok_spm/byte_fallback.model" \
    -o "$T5" || { echo "FAIL: init umt5-xxl"; exit 1; }
fi
# The row's model arguments (MODEL word) into args; 1 for an unknown word.
# Full size, or with E2E_TINY=1 the tiny preset of the same family.
model_args() {
  local t5=$T5 v21=wan2.1-vae v22=wan2.2-vae img=$T/i2v.png area=480*832 small=()
  local m14=wan2.1-14b a14=wan2.2-a14b i2v=wan2.2-i2v-a14b ti2v=wan2.2-ti2v-5b
  if [ "$TINY" = 1 ]; then
    t5=synth:umt5-tiny v21=wan2.1-vae-tiny v22=wan2.2-vae-tiny img=$T/tiny.png area=64*64
    m14=wan2.1-tiny a14=wan2.2-tiny i2v=wan2.2-i2v-tiny ti2v=wan2.2-ti2v-tiny
    small=(--frames 5 --steps 2)
  fi
  args=(--t5 "$t5" --prompt "$PROMPT" "${small[@]}")
  case $1 in
    t2v-14b) args+=(--model "synth:$m14" --vae "synth:$v21") ;;
    t2v-a14b) args+=(--model "synth:$a14" --vae "synth:$v21") ;;
    i2v-a14b) args+=(--model "synth:$i2v" --vae "synth:$v21" --image "$img" --max-area "$area") ;;
    ti2v-5b)
      [ "$TINY" = 1 ] || img=$T/ti2v.png
      args+=(--model "synth:$ti2v" --vae "synth:$v22" --image "$img") ;;
    *) return 1 ;;
  esac
  [ "$TINY" = 1 ] && case $1 in t2v-*) args+=(--size 64x64) ;; ti2v-*) args+=(--max-area 64*64) ;; esac
  return 0
}
fail=0
for row in $ROWS; do
  model=${row%/*} prec=${row#*/} name=${row//\//-}
  if ! model_args "$model"; then echo "FAIL $row: unknown model word '$model'"; fail=1; continue; fi
  if ! bench_precision "$prec"; then
    echo "FAIL $row: unknown precision '$prec' (one of $BENCH_PRECISION_WORDS)"; fail=1; continue
  fi
  args+=("${prec_args[@]}")
  echo "=== $row: staticpipe run ${args[*]} --device $DEV" >&2
  t0=$(date +%s.%N)
  timeout "$LIMIT" "$SP" run "${args[@]}" --device "$DEV" --json --no-preview \
    -o "$T/$name.latent.h5" --video "$T/$name.video.$vx" > "$T/$name.json" 2> "$T/$name.log"
  rc=$?
  t1=$(date +%s.%N)
  echo "$row $rc $t0 $t1" >> "$T/rows.txt"
  [ $rc = 0 ] || { echo "FAIL $row: exit $rc: $(tail -n 3 "$T/$name.log")"; }
done
[ -f "$T/rows.txt" ] || { echo "bench_e2e.sh: no row ran"; exit 1; }
python3 - "$T" "$OUT/e2e.json" "$TINY" "$DEV" <<'PY'
import json, re, sys
d, out, tiny, dev = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
rows = []
for line in open(f"{d}/rows.txt"):
    row, rc, t0, t1 = line.split()
    name = row.replace("/", "-")
    r = {"row": row, "rc": int(rc), "wall_s": float(t1) - float(t0)}
    try:
        j = json.loads(open(f"{d}/{name}.json").read().strip().splitlines()[-1])
        r.update(steps=j["steps"], sample_s=j["sample_s"], steady_step_ms=j["steady_step_ms"],
                 load_s=max(k["load_s"] for k in j["ranks"]),
                 device_peak_gib=max(k["device_peak_bytes"] for k in j["ranks"]) / 2**30,
                 tokens=j["plan"]["tokens"])
    except Exception as e:
        r["error"] = f"no run JSON ({e})"
    m = re.findall(r"decoded in ([0-9.]+) s", open(f"{d}/{name}.log", errors="replace").read())
    r["decode_s"] = float(m[-1]) if m else None
    if "sample_s" in r:
        r["rest_s"] = r["wall_s"] - r["sample_s"] - r["load_s"] - (r["decode_s"] or 0.0)
    rows.append(r)
base = {r["row"].split("/")[0]: r for r in rows if r["row"].endswith("/bf16") and "sample_s" in r}
for r in rows:
    b = base.get(r["row"].split("/")[0])
    if b and "sample_s" in r:
        r["sample_vs_bf16"] = r["sample_s"] / b["sample_s"]
        r["wall_vs_bf16"] = r["wall_s"] / b["wall_s"]
f = lambda v, p=1: "-" if v is None else f"{v:.{p}f}"
print(f"# end to end, one GPU, synthetic weights{' (tiny presets)' if tiny else ''}, device {dev}")
print("| row | steps | tokens | wall s | sampling s | step ms | load s | decode s | rest s "
      "| sampling vs bf16 | wall vs bf16 | device peak GiB |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
ok = True
for r in rows:
    if r["rc"] != 0 or "error" in r:
        ok = False
        print(f"| {r['row']} | failed (exit {r['rc']}) {r.get('error', '')} |")
        continue
    print(f"| {r['row']} | {r['steps']} | {r['tokens']} | {f(r['wall_s'])} | {f(r['sample_s'])} | "
          f"{f(r['steady_step_ms'], 0)} | {f(r['load_s'])} | {f(r['decode_s'])} | {f(r['rest_s'])} | "
          f"{f(r.get('sample_vs_bf16'), 3)} | {f(r.get('wall_vs_bf16'), 3)} | "
          f"{f(r['device_peak_gib'], 2)} |")
doc = {"bench": "e2e", "device": dev, "tiny": tiny, "rows": rows}
json.dump(doc, open(out, "w"), indent=1)
print(json.dumps(doc))
sys.exit(0 if ok else 1)
PY
[ $? = 0 ] && [ $fail = 0 ]
