#!/usr/bin/env bash
# Bad input to run and forward: exit 2, exactly one error line naming the
# file/flag/dataset and the check, no output file, an existing output file
# untouched, no crash.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir run-bad-inputs
T=$work

"$SP_BIN" init --arch wan2.1-tiny -q -o "$T/m.h5" || exit 1
"$PY" - "$T" <<'PYEOF' || exit 1
import sys, h5py, numpy as np
d, r = sys.argv[1], np.random.default_rng()
def w(name, **ds):
    with h5py.File(f"{d}/{name}.h5", "w") as f:
        for k, v in ds.items(): f[k] = v
ctx = r.standard_normal((30, 4096)).astype(np.float32)
lat = r.standard_normal((16, 3, 8, 6)).astype(np.float32)
w("cond", context=ctx, context_null=ctx[:9])
w("cond_long", context=r.standard_normal((513, 4096)).astype(np.float32), context_null=ctx)
w("cond_wide", context=r.standard_normal((30, 2048)).astype(np.float32), context_null=ctx)
nan = ctx.copy(); nan[3, 7] = np.nan
w("cond_nan", context=nan, context_null=ctx)
w("cond_int", context=np.ones((30, 4096), np.int32), context_null=ctx)
w("cond_3d", context=ctx[None], context_null=ctx)
w("noise_shape", noise=r.standard_normal((16, 3, 8, 8)).astype(np.float32))
w("noise_name", latent=r.standard_normal((16, 3, 8, 6)).astype(np.float32))
w("lat", latent=lat, context=ctx)
w("lat_odd", latent=r.standard_normal((16, 3, 7, 6)).astype(np.float32), context=ctx)
w("lat_ch", latent=r.standard_normal((8, 3, 8, 6)).astype(np.float32), context=ctx)
inf = lat.copy(); inf[0, 0, 0, 0] = np.inf
w("lat_inf", latent=inf, context=ctx)
open(f"{d}/garbage.h5", "w").write("not an hdf5 file\n")
# A checkpoint as downloaded (safetensors: header length, JSON, data).
import json, struct
hdr = json.dumps({"blocks.0.ffn.0.weight": {"dtype": "F8_E4M3", "shape": [4], "data_offsets": [0, 4]}}).encode()
open(f"{d}/wan.safetensors", "wb").write(struct.pack("<Q", len(hdr)) + hdr + bytes(4))
# Tiny files declaring huge datasets (storage never written: HDF5 reads
# fill values): refused from the metadata, before any allocation.
with h5py.File(f"{d}/cond_huge.h5", "w") as f:
    f.create_dataset("context", shape=(512, 1048576), dtype="f4")
    f["context_null"] = ctx
with h5py.File(f"{d}/noise_huge.h5", "w") as f:
    f.create_dataset("noise", shape=(16, 4096, 512, 512), dtype="f4")
with h5py.File(f"{d}/lat_huge.h5", "w") as f:
    f.create_dataset("latent", shape=(4096, 3, 512, 1024), dtype="f4")
PYEOF
echo "original" > "$T/keep.h5"

expect2() { # description  expected-substring  command...
  local what=$1 want=$2; shift 2
  local out rc
  out=$(sp_last_wins "$@" 2>&1 >/dev/null); rc=$?
  if [ $rc -ne 2 ]; then bad "$what: exit $rc, expected 2: $out"; return; fi
  if [ "$(printf '%s\n' "$out" | grep -c 'error:')" -ne 1 ]; then bad "$what: not one error line: $out"; return; fi
  case "$out" in *"$want"*) ;; *) bad "$what: message lacks '$want': $out"; return;; esac
  if [ "$(cat "$T/keep.h5")" != "original" ] || ls -A "$T" | grep -q '\.tmp-'; then bad "$what: output touched"; return; fi
  ok "$what: $(printf '%s' "$out" | grep error: | cut -c1-150)"
}
R=("$SP_BIN" run --model "$T/m.h5" --cond "$T/cond.h5" --frames 9 --size 64x48 --steps 2 -q -o "$T/keep.h5")
expect2 "frames not 4k+1" "4k+1" "${R[@]}" --frames 10
expect2 "frames over the limit" "--frames: '4098' is out of range: frames are 1..4097" "${R[@]}" --frames 4098
expect2 "size not a multiple of 16" "multiples of 16" "${R[@]}" --size 72x48
expect2 "size malformed" "HEIGHTxWIDTH" "${R[@]}" --size 64by48
expect2 "steps 0" "--steps" "${R[@]}" --steps 0
expect2 "cfg not a number" "--cfg" "${R[@]}" --cfg five
expect2 "unknown sampler" "--sampler" "${R[@]}" --sampler ddim
expect2 "unknown option" "run --help" "${R[@]}" --frobnicate
expect2 "missing --cond" "--cond is required" "$SP_BIN" run --model "$T/m.h5" -o "$T/keep.h5"
expect2 "missing model file" "nope.h5" "${R[@]}" --model "$T/nope.h5"
expect2 "model is not HDF5" "garbage.h5" "${R[@]}" --model "$T/garbage.h5"
expect2 "model is a safetensors checkpoint" "staticpipe convert $T/wan.safetensors -o MODEL.h5" "${R[@]}" --model "$T/wan.safetensors"
expect2 "plan: model is a safetensors checkpoint" "staticpipe convert" "$SP_BIN" plan --model "$T/wan.safetensors" --gpu-mem 24gb
expect2 "inspect: a safetensors checkpoint" "staticpipe convert" "$SP_BIN" inspect "$T/wan.safetensors"
expect2 "cond missing" "absent.h5" "${R[@]}" --cond "$T/absent.h5"
expect2 "context too long" "L <= 512" "${R[@]}" --cond "$T/cond_long.h5"
expect2 "context wrong width" "[L, 4096]" "${R[@]}" --cond "$T/cond_wide.h5"
expect2 "context NaN" "non-finite" "${R[@]}" --cond "$T/cond_nan.h5"
expect2 "context integer" "float32" "${R[@]}" --cond "$T/cond_int.h5"
expect2 "context 3-D" "dimensions" "${R[@]}" --cond "$T/cond_3d.h5"
expect2 "noise wrong shape" "this run needs" "${R[@]}" --noise "$T/noise_shape.h5"
# Under a 1 GB address-space limit: reading any of these whole (2-32 GB)
# would fail with "out of host memory" (exit 1) instead of the shape check.
lowmem() { (ulimit -v 1000000; exec "$@"); }
expect2 "huge context declared" "the model needs [L, 4096]" lowmem "${R[@]}" --cond "$T/cond_huge.h5"
expect2 "huge noise declared" "this run needs" lowmem "${R[@]}" --noise "$T/noise_huge.h5"
expect2 "noise dataset missing" "'noise' is missing" "${R[@]}" --noise "$T/noise_name.h5"
expect2 "output directory missing" "no/such/dir" "${R[@]}" -o "$T/no/such/dir/out.h5"

F=("$SP_BIN" forward --model "$T/m.h5" --latent "$T/lat.h5" --cond "$T/lat.h5" --timestep 500 -o "$T/keep.h5")
expect2 "forward timestep > 1000" "--timestep" "${F[@]}" --timestep 1001
expect2 "forward timestep negative" "--timestep" "${F[@]}" --timestep -1
expect2 "forward latent H odd" "H and W even" "${F[@]}" --latent "$T/lat_odd.h5"
expect2 "forward latent channels" "[16, F, H, W]" "${F[@]}" --latent "$T/lat_ch.h5"
expect2 "forward latent Inf" "non-finite" "${F[@]}" --latent "$T/lat_inf.h5"
expect2 "forward huge latent declared" "[16, F, H, W]" lowmem "${F[@]}" --latent "$T/lat_huge.h5"
expect2 "forward: model is a safetensors checkpoint" "staticpipe convert" "${F[@]}" --model "$T/wan.safetensors"
expect2 "forward latent missing dataset" "'latent' is missing" "${F[@]}" --latent "$T/cond.h5"
expect2 "forward context too long" "L <= 512" "${F[@]}" --cond "$T/cond_long.h5"
expect2 "forward missing --timestep" "--timestep is required" "$SP_BIN" forward --model "$T/m.h5" --latent "$T/lat.h5" --cond "$T/lat.h5" -o "$T/keep.h5"

# Options after positional arguments (GNU permutation) and --help everywhere.
"$SP_BIN" inspect "$T/m.h5" --json | "$PY" -c 'import json,sys; json.load(sys.stdin)' \
  && ok "options after positional arguments" || bad "argument permutation"
for c in init inspect forward run; do
  "$SP_BIN" $c --help | grep -q -- "--help" && ok "$c --help" || bad "$c --help"
done
[ $fail -eq 0 ] && echo "bad inputs: all checks passed" || echo "bad inputs: FAILED"
exit $fail
