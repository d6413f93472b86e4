#!/usr/bin/env bash
# Every file a command reads is an input of the same-file check and is
# opened without blocking (README "Commands", io/file_read.h): a LoRA named
# by --lora or a jobs line's lora= is never overwritten by an output
# (-o, --save-noise, --trace, a line's out=), outputs never overwrite each
# other (--video against --save-noise and --trace, two lines' video=, a
# line's video= against another's out=), a FIFO given as a LoRA (also under
# mpirun), as an index's shard or inside a directory given to convert is
# refused with exit 2 instead of blocking, and decode -o X --frames-dir X
# is refused before decoding.
set -u
. "$SP_SRC/tests/common/mpi_env.sh"
. "$SP_SRC/tests/common/script.sh"
sp_work_dir nested-inputs
sp_seed
sp_python_with 'import h5py, numpy' 'h5py and numpy'
cd "$work" || exit 1
sp_tiny m.h5
sp_cond 16 c.h5
# A LoRA of the tiny model: one rank-4 pair on block 0's q projection.
"$PY" - "$SP_SRC" "$S" <<'PYEOF' || exit 1
import sys
import numpy as np
sys.path.insert(0, sys.argv[1] + "/tests/lora")
import loralib
c, _ = loralib.model_config("m.h5")
sh = loralib.shapes(c)
l = loralib.Lora("comfy")
l.pair(np.random.default_rng(int(sys.argv[2])), "block", 0, "self_attn.q.weight",
       sh[("block", 0, "self_attn.q.weight")], 4)
l.write("x.st")
PYEOF
sum0=$(md5sum <x.st)
J=("$SP_BIN" run --model m.h5 --steps 2 --frames 5 --size 32x32 -q) # --jobs
B=("${J[@]}" --cond c.h5)
lora_kept() { [ "$(md5sum <x.st)" = "$sum0" ] && ok "$1: x.st kept" || bad "$1: x.st was overwritten"; }

# ---- a LoRA is an input of the same-file check
sp_refused "--lora x.st --save-noise x.st" "--save-noise x.st: is the same file as --lora x.st" \
  "${B[@]}" --lora x.st -o o1.h5 --save-noise x.st
lora_kept "--save-noise"
sp_refused "--lora x.st -o x.st" "is the same file as --lora x.st" "${B[@]}" --lora x.st -o x.st
lora_kept "-o"
sp_refused "--lora x.st --trace ./x.st" "--trace ./x.st: is the same file as --lora x.st" \
  "${B[@]}" --lora x.st -o o2.h5 --trace ./x.st
lora_kept "--trace"
printf 'cond=c.h5 out=j1.h5\ncond=c.h5 out=x.st lora=x.st\n' >lines.txt
"${J[@]}" --jobs lines.txt 2>lines.err
grep -q "lines.txt:2: out x.st: is the same file as lines.txt:2: lora x.st" lines.err &&
  ok "a line's lora= and out=: the line refused" || bad "lora= out=: $(cat lines.err)"
lora_kept "a line's out="
[ -e j1.h5 ] && ok "the good line ran" || bad "the good line did not run"

# ---- outputs against each other
V=(--vae synth:wan2.1-vae-tiny)
sp_refused "--video X --save-noise X" "--save-noise v.h5: is the same file as --video v.h5" \
  "${B[@]}" "${V[@]}" -o o3.h5 --video v.h5 --save-noise v.h5
sp_refused "--video X --trace X" "--trace v.h5: is the same file as --video v.h5" \
  "${B[@]}" "${V[@]}" -o o4.h5 --video v.h5 --trace v.h5
printf 'cond=c.h5 out=k1.h5 video=kv.h5\ncond=c.h5 out=k2.h5 video=./kv.h5\ncond=c.h5 out=k3.h5 video=k1.h5\ncond=c.h5 out=k4.h5\n' >videos.txt
"${J[@]}" "${V[@]}" --jobs videos.txt 2>videos.err
grep -q "videos.txt:2: video=./kv.h5 is already the output of line 1 (video=kv.h5)" videos.err &&
  ok "two lines' video=: the second refused" || bad "two video=: $(cat videos.err)"
grep -q "videos.txt:3: video=k1.h5 is already the output of line 1 (out=k1.h5)" videos.err &&
  ok "a line's video= on another's out=: refused" || bad "video= on out=: $(cat videos.err)"
[ -e k1.h5 ] && [ -e kv.h5 ] && [ -e k4.h5 ] && [ ! -e k2.h5 ] && [ ! -e k3.h5 ] &&
  "$PY" -c 'import h5py, sys; sys.exit(0 if "latents" in h5py.File("k1.h5") else 1)' &&
  ok "the good lines' outputs, each its own" || bad "outputs: $(ls)"

# ---- FIFOs never block
mkfifo fifo.st
sp_refused "--lora a FIFO" "--lora fifo.st: is a FIFO" timeout 20 "${B[@]}" --lora fifo.st -o f1.h5
sp_refused "--lora a FIFO under mpirun -np 2" "--lora fifo.st: is a FIFO" \
  timeout 60 mpirun -np 2 --timeout 50 "${B[@]}" --lora fifo.st -o f2.h5
printf 'cond=c.h5 out=f3.h5 lora=fifo.st\ncond=c.h5 out=f4.h5\n' >fifo_lines.txt
timeout 60 "${J[@]}" --jobs fifo_lines.txt 2>fifo_lines.err; rc=$?
[ $rc -eq 2 ] && grep -q "fifo.st: is a FIFO, not a regular file" fifo_lines.err && [ -e f4.h5 ] &&
  ok "a line's lora= FIFO: that line refused, the next ran" || bad "lora=FIFO: exit $rc: $(cat fifo_lines.err)"
# convert: a FIFO named as an index's shard, or inside a directory
"$PY" - <<'PYEOF' || exit 1
import json, os, struct
hdr = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
open("a.safetensors", "wb").write(struct.pack("<Q", len(hdr)) + hdr + bytes(4))
json.dump({"weight_map": {"w": "a.safetensors", "v": "b.safetensors"}},
          open("model.safetensors.index.json", "w"))
os.mkfifo("b.safetensors")
os.mkdir("d")
os.mkfifo("d/z.safetensors")
PYEOF
sp_refused "convert: an index naming a FIFO shard" "b.safetensors: is a FIFO" \
  timeout 20 "$SP_BIN" convert model.safetensors.index.json -o ci.h5
sp_refused "convert: a directory holding a FIFO" "d/z.safetensors: is a FIFO" \
  timeout 20 "$SP_BIN" convert d -o cd.h5
# convert's output against the shards an index names
printf '{"weight_map": {"w": "a.safetensors"}}' >one.safetensors.index.json
sp_refused "convert -o a shard the index names" "--out ./a.safetensors: is the same file as convert a.safetensors" \
  "$SP_BIN" convert one.safetensors.index.json -o ./a.safetensors

# ---- decode -o X --frames-dir X
"${B[@]}" -o lat.h5 2>/dev/null || bad "the latents for decode"
sp_refused "decode -o X --frames-dir X" "--frames-dir out_x.h5: is the same path as -o out_x.h5" \
  "$SP_BIN" decode --vae synth:wan2.1-vae-tiny --latents lat.h5 -o out_x.h5 --frames-dir out_x.h5
grep -q "frames of" "$work/refused.err" && bad "decode -o X --frames-dir X decoded first" ||
  ok "refused before decoding"
exit $fail
