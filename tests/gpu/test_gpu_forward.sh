#!/usr/bin/env bash
# The CUDA backend end to end: the tiny model's forward on the GPU
# against the CPU backend (bf16 tolerance, STYLE.md 9: relative L2 <= 2e-2),
# and a GPU rerun bit-identical. Skips (77) without a GPU.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_need_gpu
sp_python
sp_work_dir gpu-forward
T=$work
"$SP_BIN" init --arch wan2.1-tiny --seed $RANDOM -q -o "$T/m.h5" || exit 1
"$PY" - "$T/in.h5" <<'PYEOF' || exit 1
import sys, h5py, numpy as np
r = np.random.default_rng()
with h5py.File(sys.argv[1], "w") as f:
    f["latent"] = r.standard_normal((16, 5, 12, 10)).astype(np.float32)
    f["context"] = r.standard_normal((int(r.integers(1, 513)), 4096)).astype(np.float32)
PYEOF
for t in 999 500 3; do
  "$SP_BIN" forward --model "$T/m.h5" --latent "$T/in.h5" --cond "$T/in.h5" --timestep $t --device cpu -o "$T/cpu.h5" 2>/dev/null || { echo "FAIL cpu forward"; exit 1; }
  "$SP_BIN" forward --model "$T/m.h5" --latent "$T/in.h5" --cond "$T/in.h5" --timestep $t --device cuda -o "$T/gpu.h5" || { echo "FAIL gpu forward"; exit 1; }
  "$SP_BIN" forward --model "$T/m.h5" --latent "$T/in.h5" --cond "$T/in.h5" --timestep $t --device cuda -o "$T/gpu2.h5" 2>/dev/null || { echo "FAIL gpu forward rerun"; exit 1; }
  "$PY" - "$T/cpu.h5" "$T/gpu.h5" "$T/gpu2.h5" $t <<'PYEOF' || fail=1
import sys, h5py, numpy as np
c, g, g2 = (h5py.File(p)["pred"][...].astype(np.float64) for p in sys.argv[1:4])
err = np.linalg.norm(g - c) / np.linalg.norm(c)
same = g.tobytes() == g2.tobytes()
print(f"{'ok  ' if err <= 2e-2 and same else 'FAIL'} t={sys.argv[4]}: gpu vs cpu rel L2 {err:.3e} (tol 2e-2), rerun {'bit-identical' if same else 'DIFFERS'}")
sys.exit(0 if err <= 2e-2 and same else 1)
PYEOF
done
exit $fail
