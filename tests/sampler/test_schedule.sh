#!/usr/bin/env bash
# The C schedule against the published arithmetic of
# FlowUniPCMultistepScheduler (constructed with shift=1, then
# set_timesteps(N, shift=s)) evaluated with numpy: float32 training sigmas,
# sigma_max = sigmas[0], numpy.linspace in float64, the shift in float64,
# timesteps = int64(sigma * 1000), solver sigmas rounded to float32. Every
# timestep must be equal and every sigma bit-equal, over many N and shifts.
set -euo pipefail
. "$SP_SRC/tests/common/script.sh"
/usr/bin/python3 -c "import numpy" 2>/dev/null || sp_skip "/usr/bin/python3 with numpy not found"
bin=""
for c in "$SP_BUILD/tests/sampler_test_sampler" "$SP_BUILD/sampler_test_sampler"; do
  [ -x "$c" ] && bin="$c" && break
done
[ -n "$bin" ] || sp_skip "sampler_test_sampler not built"
/usr/bin/python3 - "$bin" <<'PY'
import subprocess, sys
import numpy as np
binary = sys.argv[1]
T = 1000
alphas = np.linspace(1, 1 / T, T)[::-1].copy()
train = (1.0 - alphas).astype(np.float32)   # torch float32; shift=1 leaves them
smax, smin = float(train[0]), float(train[-1])
rng = np.random.default_rng()
shifts = [1.0, 3.0, 5.0, 8.0, 12.0] + list(np.round(rng.uniform(0.5, 10, 3), 3))
checked = 0
for shift in shifts:
    for N in list(range(1, 61)) + [100, 250, 1000]:
        s = np.linspace(smax, smin, N + 1).copy()[:-1]
        s = shift * s / (1 + (shift - 1) * s)
        t = (s * T).astype(np.int64)
        sig = np.concatenate([s, [0]]).astype(np.float32)
        out = subprocess.run([binary, "--print-schedule", str(N), repr(float(shift))],
                             check=True, capture_output=True, text=True).stdout.split("\n")
        rows = [r.split() for r in out if r]
        assert len(rows) == N + 1, (N, shift, len(rows))
        for i in range(N):
            assert int(rows[i][0]) == t[i], f"N={N} shift={shift} t[{i}] {rows[i][0]} != {t[i]}"
        for i in range(N + 1):
            assert np.float32(float(rows[i][1])) == sig[i], f"N={N} shift={shift} sigma[{i}]"
        checked += 1
print(f"schedule equals the published arithmetic for {checked} (N, shift) pairs")
PY
