#!/bin/bash
# Bad inputs around two experts, each refused with one line naming the flag
# (exit 2) before any work: two --cfg values or --boundary on a one-expert
# model, --boundary out of range, a malformed --cfg pair, @high on a
# one-expert model; in a --jobs file such a line fails alone.
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir wan22-bad
"$PY" -c "
import h5py, numpy as np
r = np.random.default_rng()
with h5py.File('$work/cond.h5', 'w') as f:
    f['context'] = r.standard_normal((4, 4096)).astype(np.float32)
    f['context_null'] = r.standard_normal((3, 4096)).astype(np.float32)
" || exit 1
printf 'x' >"$work/lora.safetensors"
check() { # label, expected text, args...
  local label=$1 want=$2
  shift 2
  out=$("$SP_BIN" run --cond "$work/cond.h5" --frames 5 --size 32x32 --steps 2 --device cpu \
        --no-preview -q -o "$work/out.h5" "$@" 2>&1)
  rc=$?
  if [ $rc -ne 2 ] || ! grep -qF -- "$want" <<<"$out" || [ -e "$work/out.h5" ]; then
    echo "FAIL: $label: exit $rc (want 2), output: $out (want '$want')"; fail=1
  else
    echo "refused ($label): $(grep -F -- "$want" <<<"$out" | head -1)"
  fi
}
one=(--model synth:wan2.1-tiny)
two=(--model synth:wan2.2-tiny)
check "--cfg pair, one expert" "one expert: give one value" "${one[@]}" --cfg 4,3
check "--boundary, one expert" "chooses between the two experts" "${one[@]}" --boundary 0.9
check "--boundary 0" "0 < B < 1" "${two[@]}" --boundary 0
check "--boundary 1" "0 < B < 1" "${two[@]}" --boundary 1
check "--boundary -0.5" "0 < B < 1" "${two[@]}" --boundary -0.5
check "--boundary nan" "--boundary" "${two[@]}" --boundary nan
check "--cfg three values" "is not G or HIGH,LOW" "${two[@]}" --cfg 4,3,2
check "--cfg empty high" "is not G or HIGH,LOW" "${two[@]}" --cfg ,3
check "--cfg low out of range" "is out of range" "${two[@]}" --cfg 4,300
check "@high, one expert" "@high and @low choose one of the two experts" "${one[@]}" \
  --lora "$work/lora.safetensors@high"
# A --jobs line with two guidance values on a one-expert model fails alone.
cat >"$work/jobs.txt" <<EOF2
cond=$work/cond.h5 out=$work/j1.h5
cond=$work/cond.h5 out=$work/j2.h5 cfg=4,3
EOF2
out=$("$SP_BIN" run --model synth:wan2.1-tiny --jobs "$work/jobs.txt" --frames 5 --size 32x32 \
      --steps 2 --device cpu --no-preview -q 2>&1)
rc=$?
if [ $rc -eq 0 ] || [ ! -e "$work/j1.h5" ] || [ -e "$work/j2.h5" ] ||
   ! grep -qF "jobs.txt:2: cfg=4,3 gives two guidance scales" <<<"$out"; then
  echo "FAIL: --jobs line 2 with cfg=4,3: exit $rc, output $out"; fail=1
else
  echo "--jobs: the line with cfg=4,3 fails alone: $(grep -F 'jobs.txt:2' <<<"$out" | head -1)"
fi
exit $fail
