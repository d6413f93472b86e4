#!/usr/bin/env bash
# ComfyUI latent files (ranks/import/latent_file.h), checked through an
# independent reader and writer: the Python safetensors package when it is
# installed (launch/deps.sh installs it with pip: Debian 12 has no
# python3-safetensors), else the repository's own hand-written reader and
# writer tests/convert/stlib.py (the test says which it used).
#   - run -o X.latent writes latent_tensor float32 [1, 16, F, H, W] equal to
#     the HDF5 run's latents z as z * std + mean (float64, the published
#     statistics from tests/ref/wan_vae_ref.py) within float32 rounding, and
#     the empty latent_format_version_0 marker, and the settings as metadata;
#   - a .latent written here with known values x, given to --noise, starts
#     the run from (x - mean) / std (seen through --save-noise) within
#     rounding, and that run equals one started from the same values in HDF5
#     bit for bit; --save-noise X.latent then --noise X.latent gives the
#     seed's noise back within rounding;
#   - a wrong rank, channel count, batch, dtype or a missing marker is
#     refused with one line naming the file, before any work.
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir latent
T=$work
SEED=${SP_SEED:-$(date +%s%N | cut -c10-18)}
echo "seed $SEED (SP_SEED replays it)"
"$SP_BIN" init --arch wan2.1-tiny --seed 5 -q -o "$T/m.h5" || exit 1

"$PY" - "$T" "$SEED" "$SP_SRC" "$SP_BIN" <<'PYEOF'
import os, subprocess, sys
import h5py
import numpy as np

d, seed, src, binary = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
sys.path.insert(0, os.path.join(src, "tests", "ref"))
sys.path.insert(0, os.path.join(src, "tests", "convert"))
import wan_vae_ref as R  # noqa: E402

try:
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    def st_read(path):
        with safe_open(path, "np") as f:
            meta = f.metadata() or {}
        return load_file(path), meta

    def st_write(path, tensors):
        save_file(tensors, path)

    print("reader/writer: the safetensors package")
except ImportError:
    import stlib

    def st_read(path):
        raw, meta = stlib.read_st(path)
        assert all(dt == "F32" for dt, _, _ in raw.values()), "stlib path reads F32 only"
        return {k: np.frombuffer(b, "<f4").reshape(s) for k, (dt, s, b) in raw.items()}, meta

    def st_write(path, tensors):
        stlib.write_st(path, [(k, {np.float32: "F32", np.float16: "F16"}[v.dtype.type],
                               v.shape, v.tobytes()) for k, v in sorted(tensors.items())])

    print("reader/writer: tests/convert/stlib.py (no safetensors package here)")

rng = np.random.default_rng(seed)
ok = True


def check(cond, what):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok &= bool(cond)


def run(*args, expect=0):
    p = subprocess.run([binary, "run", "--model", f"{d}/m.h5", *args], capture_output=True,
                       text=True)
    if p.returncode != expect:
        print(p.stderr)
    return p


with h5py.File(f"{d}/cond.h5", "w") as f:
    f["context"] = rng.standard_normal((21, 4096)).astype(np.float32)
    f["context_null"] = rng.standard_normal((8, 4096)).astype(np.float32)
A = ["--cond", f"{d}/cond.h5", "--frames", "9", "--size", "64x48", "--steps", "2", "-q",
     "--seed", str(seed % 100000)]
mean = np.asarray(R.LATENT_MEAN, np.float64)[:, None, None, None]
std = np.asarray(R.LATENT_STD, np.float64)[:, None, None, None]
eps = float(np.finfo(np.float32).eps)

# 1. run -o X.latent against run -o X.h5
check(run(*A, "-o", f"{d}/a.h5").returncode == 0, "run -o a.h5")
check(run(*A, "-o", f"{d}/a.latent").returncode == 0, "run -o a.latent")
check(os.path.isfile(f"{d}/a.latent.png"), "a.latent has its preview a.latent.png")
z = h5py.File(f"{d}/a.h5")["latents"][...].astype(np.float64)
t, meta = st_read(f"{d}/a.latent")
check(sorted(t) == ["latent_format_version_0", "latent_tensor"],
      f"tensors are latent_tensor and the marker: {sorted(t)}")
mk = t.get("latent_format_version_0")
check(mk is not None and mk.dtype == np.float32 and mk.shape == (0,),
      "marker latent_format_version_0 is float32 [0]")
x = t["latent_tensor"]
check(x.dtype == np.float32 and x.shape == (1,) + z.shape,
      f"latent_tensor is float32 {x.shape}, the h5 latents are {z.shape}")
want = z * std + mean
# x = z / (1/std) + mean in float32: three roundings of values of size
# |z * std| + |mean|.
bound = 4 * eps * (np.abs(z * std) + np.abs(mean))
err = np.abs(x[0].astype(np.float64) - want)
check(np.all(err <= bound), f"latent_tensor = latents x std + mean within float32 rounding "
      f"(max error {err.max():.3g}, max bound {bound.max():.3g})")
check(z.std() > 0.1, f"latents are not constant (std {z.std():.3g})")
check(meta.get("seed") == str(seed % 100000) and meta.get("steps") == "2"
      and meta.get("sampler") == "unipc", f"metadata holds the settings: {meta}")

# 2. a .latent written here, read through --noise
xb = (rng.standard_normal((1,) + z.shape) * std + mean).astype(np.float32)
st_write(f"{d}/b.latent", {"latent_tensor": xb,
                           "latent_format_version_0": np.zeros((0,), np.float32)})
check(run(*A, "--noise", f"{d}/b.latent", "--save-noise", f"{d}/bn.h5", "-o",
          f"{d}/b_out.h5").returncode == 0, "run --noise b.latent")
n = h5py.File(f"{d}/bn.h5")["noise"][...]
nwant = (xb[0].astype(np.float64) - mean) / std
nbound = 4 * eps * (np.abs(xb[0].astype(np.float64)) + np.abs(mean)) / std
err = np.abs(n - nwant)
check(n.shape == z.shape and np.all(err <= nbound),
      f"the noise read is (x - mean) / std within float32 rounding (max error {err.max():.3g})")
check(run(*A, "--noise", f"{d}/bn.h5", "-o", f"{d}/b_h5.h5").returncode == 0,
      "run --noise with the same values as HDF5")
l1 = h5py.File(f"{d}/b_out.h5")["latents"][...]
l2 = h5py.File(f"{d}/b_h5.h5")["latents"][...]
check(np.array_equal(l1, l2), "the .latent run equals the HDF5 run bit for bit")

# --save-noise X.latent, read back through --noise: the seed's noise again
# within rounding (HDF5 keeps it bit for bit)
check(run(*A, "--save-noise", f"{d}/sn.h5", "-o", f"{d}/s1.h5").returncode == 0
      and run(*A, "--save-noise", f"{d}/sn.latent", "-o", f"{d}/s2.h5").returncode == 0
      and run(*A, "--noise", f"{d}/sn.latent", "--save-noise", f"{d}/sn2.h5", "-o",
              f"{d}/s3.h5").returncode == 0, "--save-noise sn.latent, then --noise sn.latent")
n0 = h5py.File(f"{d}/sn.h5")["noise"][...].astype(np.float64)
n2 = h5py.File(f"{d}/sn2.h5")["noise"][...].astype(np.float64)
sx = st_read(f"{d}/sn.latent")[0]["latent_tensor"][0].astype(np.float64)
err = np.abs(n2 - n0)
check(np.all(err <= 8 * eps * (np.abs(sx) + np.abs(mean)) / std),
      f"the noise through a .latent comes back within float32 rounding (max error {err.max():.3g})")

# 3. files that are not a Wan latent: one line naming the file, exit 2
marker = np.zeros((0,), np.float32)
cases = {
    "rank4": ({"latent_tensor": xb[0], "latent_format_version_0": marker}, "[1, 16, F, H, W]"),
    "ch8": ({"latent_tensor": xb[:, :8], "latent_format_version_0": marker}, "[1, 16, F, H, W]"),
    "batch2": ({"latent_tensor": np.concatenate([xb, xb]), "latent_format_version_0": marker},
               "[1, 16, F, H, W]"),
    "nomarker": ({"latent_tensor": xb}, "latent_format_version_0"),
    "f16": ({"latent_tensor": xb.astype(np.float16), "latent_format_version_0": marker}, "F16"),
    "shape": ({"latent_tensor": xb[..., :4], "latent_format_version_0": marker}, "this run needs"),
}
for name, (tensors, want_msg) in cases.items():
    path = f"{d}/{name}.latent"
    st_write(path, tensors)
    p = run(*A, "--noise", path, "-o", f"{d}/bad.h5", expect=2)
    errs = [l for l in p.stderr.splitlines() if "error:" in l]
    check(p.returncode == 2 and len(errs) == 1 and path in errs[0] and want_msg in errs[0]
          and not os.path.exists(f"{d}/bad.h5"),
          f"{name}: refused: {errs[0] if errs else p.stderr.strip()}")
sys.exit(0 if ok else 1)
PYEOF
