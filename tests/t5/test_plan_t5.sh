#!/bin/bash
# plan --t5: where run --prompt encodes (rank 0, before the DiT; the CPU in a
# CPU build, the GPU in a CUDA build) and its peak bytes, against the
# encoders' memory written out here from their buffers (ranks/nets/umt5/
# umt5_encode.c: outputs, the larger of the embedding phase and the layer
# phase; ranks/nets/umt5/cuda/umt5_gpu.c: bf16 layers, activations,
# workspace, each buffer of its arena 256-byte aligned),
# in the table and in --json; a host (or GPU) too small for it is refused
# with exit 2, one line naming --t5 and both sizes.
set -u
: "${SP_SRC:?}" "${SP_BIN:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir plan-t5

# umt5-xxl (the published config), synthetic: fp32 file, no staging; CFG:
# the prompt and the negative, 512 tokens each. A CPU build encodes on the
# host (the CPU encoder), a CUDA build on the GPU (umt5_gpu_bytes, the
# planner's layout: every layer in bf16, the final norm, activations at 512
# tokens, the position buckets, the 32 MiB GEMM workspace).
dev=$("$SP_BIN" plan --model synth:wan2.1-14b --gpu-mem 80gb --t5 synth:umt5-xxl --json 2>/dev/null |
      "$PY" -c 'import json,sys; print(json.load(sys.stdin)["text_encoder"]["device"])')
want=$("$PY" - "$dev" <<'PYEOF'
import sys
D, A, F, H, B, L, T = 4096, 4096, 10240, 64, 32, 512, 1024
pad = lambda n: (n + 63) // 64 * 64
layer = pad(D) + 4 * pad(A * D) + pad(D) + 3 * pad(F * D) + pad(B * H)
out = T * D * 4
embed = T * 4 + T * D * 4 + (64 << 20) + D * 4
layers = layer * 4 + L * (2 * D + 4 * A + 2 * F) * 4 + 2 * L * 4
host = out + max(embed, layers)
al = lambda n: (n + 255) // 256 * 256
bufs = [layer * 2] * 24 + [D * 2, L * D * 4, L * D * 2] + [L * A * 2] * 4 + \
       [L * F * 4] * 2 + [L * F * 2, (2 * L - 1) * 4, 32 << 20]
gpu = sum(al(b) for b in bufs)
print(host, gpu if sys.argv[1] == "cuda" else 0, layer * (2 if sys.argv[1] == "cuda" else 4))
PYEOF
)
set -- $want
host=$1 gpu=$2 layer=$3
j=$("$SP_BIN" plan --model synth:wan2.1-14b --gpu-mem 80gb --t5 synth:umt5-xxl --json 2>"$work/err")
got=$(printf '%s' "$j" | "$PY" -c 'import json,sys; t=json.load(sys.stdin)["text_encoder"]; print(t["host_bytes"], t["device_bytes"], t["layer_bytes"], t["device"], t["rank"], t["tokens"])')
[ "$got" = "$host $gpu $layer $dev 0 1024" ] && ok "plan --json: text_encoder $got" ||
  bad "plan --json: text_encoder '$got', want '$host $gpu $layer $dev 0 1024'"
"$SP_BIN" plan --model synth:wan2.1-14b --gpu-mem 80gb --t5 synth:umt5-xxl --cfg 1 --json \
  2>/dev/null | "$PY" -c 'import json,sys; t=json.load(sys.stdin)["text_encoder"]; sys.exit(t["tokens"] != 512)' &&
  ok "plan --cfg 1: one sequence of 512 tokens" || bad "plan --cfg 1: tokens"
line=$("$SP_BIN" plan --model synth:wan2.1-14b --gpu-mem 80gb --t5 synth:umt5-xxl 2>/dev/null | grep '^# text encoder')
case "$line" in *"rank 0, $dev"*"before the DiT is placed"*) ok "plan: the table says where: $line" ;;
  *) bad "plan: no text encoder line: '$line'" ;; esac
"$SP_BIN" plan --model synth:wan2.1-14b --gpu-mem 80gb 2>/dev/null | grep -q 'text encoder' &&
  bad "plan without --t5 prints a text encoder line" || ok "plan without --t5: no text encoder line"

# Too small, then large enough: the host (CPU build) or the GPU (CUDA build).
if [ "$dev" = cuda ]; then small=8gb large=80gb what=GPU; else small=512mb large=8gb what=host; fi
for size in $small $large; do
  if [ "$dev" = cuda ]; then
    printf '[{"name": "h200", "total_bytes": "%s"}]\n' "$size" >"$work/inv.json"
  else
    printf '[{"name": "h200", "total_bytes": "80gb", "host_bytes": "%s"}]\n' "$size" >"$work/inv.json"
  fi
  "$SP_BIN" plan --model synth:wan2.1-1.3b --inventory "$work/inv.json" --t5 synth:umt5-xxl \
    >"$work/out" 2>"$work/err"
  rc=$?
  if [ "$size" = "$small" ]; then
    n=$(grep -c error "$work/err")
    [ $rc -eq 2 ] && [ "$n" -eq 1 ] && grep -q -- "--t5 synth:umt5-xxl.*$what memory" "$work/err" &&
      ok "a $small $what: exit 2, one line: $(cat "$work/err")" || bad "a $small $what: rc $rc, $(cat "$work/err")"
  else
    [ $rc -eq 0 ] && grep -q "fits rank 0.s $what memory" "$work/out" &&
      ok "a $large $what: fits" || bad "a $large $what: rc $rc $(cat "$work/err")"
  fi
done
"$SP_BIN" plan --model synth:wan2.1-14b --gpu-mem 80gb --t5 "$work/none.h5" >/dev/null 2>"$work/err"
[ $? -eq 2 ] && grep -q -- "--t5" "$work/err" && ok "a missing --t5: exit 2" || bad "a missing --t5: $(cat "$work/err")"
exit $fail
