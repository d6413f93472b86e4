#!/usr/bin/env bash
# The CUDA Wan 2.2 VAE through the binary: `decode --device cuda` of
# 48-channel latents with the tiny VAE file in fp32 within 1e-4 and in bf16
# within 1e-2 (relative L2) of `decode --device cpu`, a rerun bit-identical,
# --json reporting the device bytes of the decoder's one allocation (which
# gpu/test_vae22_gpu.c checks against the planner's layout). Skips (77)
# without a GPU.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_need_gpu
sp_python
sp_work_dir gpu-vae22
T=$work
sp_seed
"$SP_BIN" init --arch wan2.2-vae-tiny --seed "$S" -q -o "$T/fp32-vae.h5" || exit 1
"$SP_BIN" init --arch wan2.2-vae-tiny --seed "$S" --dtype bf16 -q -o "$T/bf16-vae.h5" || exit 1
"$PY" - "$T/lat.h5" "$S" <<'PYEOF' || exit 1
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["latents"] = np.random.default_rng(int(sys.argv[2])).standard_normal((48, 3, 5, 7)).astype(
        np.float32)
PYEOF
D=(decode --latents "$T/lat.h5" -q)
for p in fp32 bf16; do
  "$SP_BIN" "${D[@]}" --vae "$T/$p-vae.h5" --device cpu -o "$T/cpu-$p.h5" \
    || { bad "decode on the CPU ($p weights)"; exit 1; }
  "$SP_BIN" "${D[@]}" --vae "$T/$p-vae.h5" --device cuda --vae-precision $p -o "$T/$p.h5" \
    --json >"$T/$p.json" || bad "decode on cuda in $p"
  "$SP_BIN" "${D[@]}" --vae "$T/$p-vae.h5" --device cuda --vae-precision $p -o "$T/${p}2.h5" \
    || bad "rerun in $p"
done
"$PY" - "$T" <<'PYEOF' || fail=1
import json, sys, h5py, numpy as np
from sptest import rel_l2
d = sys.argv[1]
bad = 0
for p, tol in (("fp32", 1e-4), ("bf16", 1e-2)):
    ref = h5py.File("%s/cpu-%s.h5" % (d, p), "r")["video"][()].astype(np.float64)
    a = h5py.File("%s/%s.h5" % (d, p), "r")["video"][()]
    b = h5py.File("%s/%s2.h5" % (d, p), "r")["video"][()]
    e = rel_l2(a.astype(np.float64), ref)
    j = json.load(open("%s/%s.json" % (d, p)))
    ok = a.shape == ref.shape and e <= tol and np.array_equal(a, b) and j["device_peak_bytes"] > 0
    print("%s decode --device cuda %s: rel L2 %.2e (tol %g), rerun %s, %.1f MiB on the device"
          % ("ok  " if ok else "FAIL", p, e, tol, "same" if np.array_equal(a, b) else "DIFFERS",
             j["device_peak_bytes"] / 2**20))
    bad |= not ok
sys.exit(bad)
PYEOF
exit $fail
