#!/usr/bin/env bash
# --fp8-accum full|fast (MODEL.md "fp8 weights", Accumulation) on the
# command line: run --help and forward --help describe it and its default;
# a value other than full or fast is refused naming the flag; full is the
# default (an fp8 run with --fp8-accum full bit-identical to one without);
# fast is refused, with one line naming --fp8-accum and nothing written, at
# int8 and at bf16 (an int8 file, an fp8 file with --precision bf16, a bf16
# file) and on the CPU backend, which accumulates in full fp32 only, by run
# and by forward. Every case runs on the CPU (--device cpu), so a machine
# with a GPU sees the same; tests/gpu/test_gpu_quant.sh runs fast on one.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_work_dir fp8-accum
sp_seed
sp_python_with 'import h5py, numpy' 'h5py and numpy'
cd "$work" || exit 1
sp_tiny f8.h5 --dtype fp8
sp_tiny i8.h5 --dtype int8
sp_tiny b.h5
sp_cond 16 c.h5
"$PY" - "$S" <<'PYEOF' || exit 1
import sys, h5py, numpy as np
r = np.random.default_rng(int(sys.argv[1]))
with h5py.File("lat.h5", "w") as f:
    f["latent"] = r.standard_normal((16, 2, 4, 4)).astype(np.float32)
PYEOF
R=("$SP_BIN" run --cond c.h5 --frames 5 --size 32x32 --steps 2 --seed "$S" --device cpu -q --no-preview)
F=("$SP_BIN" forward --latent lat.h5 --cond c.h5 --timestep 500 --device cpu)
started='step 1/\|forward: wrote'

# ---- --help
for cmd in run forward; do
  h=$("$SP_BIN" $cmd --help)
  if grep -q -- "--fp8-accum A" <<<"$h" && grep -q "(default full)" <<<"$h" &&
    grep -q "fast accumulation" <<<"$h" && grep -q "on the CPU, which accumulates in full fp32" <<<"$h"; then
    ok "$cmd --help: --fp8-accum, its default full, fast refused on the CPU"
  else
    bad "$cmd --help does not describe --fp8-accum: $(grep -A8 -- --fp8-accum <<<"$h")"
  fi
done

# ---- the values
sp_refused_early "$started" "--fp8-accum slow" "--fp8-accum: 'slow' is not full or fast" \
  "${R[@]}" --model f8.h5 --fp8-accum slow -o x.h5
"${R[@]}" --model f8.h5 -o default.h5 2>default.err
"${R[@]}" --model f8.h5 --fp8-accum full -o full.h5 2>full.err
if [ -s default.h5 ] && sp_same default.h5 full.h5; then
  ok "--fp8-accum full is the default: latents bit-identical to a run without it"
else
  bad "fp8 with --fp8-accum full against without: $(cat default.err full.err | head -5)"
fi

# ---- fast refused: not fp8, or the CPU backend
sp_refused_early "$started" "run, an int8 file, fast" "--fp8-accum fast: i8.h5 runs at precision int8" \
  "${R[@]}" --model i8.h5 --fp8-accum fast -o x.h5
sp_refused_early "$started" "run, a bf16 file --precision int8, fast" \
  "--fp8-accum fast: b.h5 runs at precision int8" \
  "${R[@]}" --model b.h5 --precision int8 --fp8-accum fast -o x.h5
sp_refused_early "$started" "run, an fp8 file --precision bf16, fast" \
  "--fp8-accum fast: f8.h5 runs at precision bf16" \
  "${R[@]}" --model f8.h5 --precision bf16 --fp8-accum fast -o x.h5
sp_refused_early "$started" "run, a bf16 file, fast" "--fp8-accum fast: b.h5 runs at precision bf16" \
  "${R[@]}" --model b.h5 --fp8-accum fast -o x.h5
sp_refused_early "$started" "run, fp8 on the CPU, fast" \
  "--fp8-accum fast: the DiT runs on the CPU here, whose fp8 W8A8 reference accumulates in full fp32 only" \
  "${R[@]}" --model f8.h5 --fp8-accum fast -o x.h5
sp_refused_early "$started" "run, a bf16 file --precision fp8 on the CPU, fast" \
  "--fp8-accum fast: the DiT runs on the CPU" \
  "${R[@]}" --model b.h5 --precision fp8 --fp8-accum fast -o x.h5
sp_refused_early "$started" "forward, an int8 file, fast" "--fp8-accum fast: i8.h5 runs at precision int8" \
  "${F[@]}" --model i8.h5 --fp8-accum fast -o x.h5
sp_refused_early "$started" "forward, fp8 on the CPU, fast" "--fp8-accum fast: the DiT runs on the CPU" \
  "${F[@]}" --model f8.h5 --fp8-accum fast -o x.h5
[ -e x.h5 ] && bad "a refused run wrote x.h5" || ok "no refused run wrote a file"
exit $fail
