#!/bin/bash
# Runs in fp8 (MODEL.md "fp8 weights") on the CPU backend: an fp8 file
# (init --dtype fp8) gives latents bit-identical to the bf16 file of the
# same seed run with --precision fp8, for 1 and 2 threads, 2 and 3
# pipeline ranks and both orders of work, and for two experts; forward
# agrees the same way;
# a short run of synth:wan2.1-tiny in fp8 against bf16 from the same noise
# reports the latents' relative L2 (random weights: it says little about
# visual quality) and must differ from bf16 (the quantisation took place);
# bench passes --precision on (LoRAs with fp8: test_lora.sh).
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir fp8-runs
sp_seed
sp_tiny "$work/b.h5"
sp_tiny "$work/f.h5" --dtype fp8
"$PY" - "$work" $S <<'PYEOF' || exit 1
import sys, h5py, numpy as np
d, r = sys.argv[1], np.random.default_rng(int(sys.argv[2]))
with h5py.File(f"{d}/c.h5", "w") as f:
    f["context"] = r.standard_normal((int(r.integers(1, 512)), 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((int(r.integers(1, 512)), 4096)).astype(np.float32)
    f["latent"] = r.standard_normal((16, 3, 8, 10)).astype(np.float32)
PYEOF
ARGS=(--cond "$work/c.h5" --frames 9 --size 64x80 --steps 3 --seed $S --cfg 4 -q --no-preview)
# (mpi_env.sh sets one thread: the reference runs on two)
OMP_NUM_THREADS=2 "$SP_BIN" run --model "$work/f.h5" "${ARGS[@]}" -o "$work/ref.h5" ||
  { echo "FAIL fp8 run"; exit 1; }
"$SP_BIN" run --model "$work/b.h5" --precision fp8 "${ARGS[@]}" -o "$work/q.h5" &&
  sp_same "$work/ref.h5" "$work/q.h5" && ok "fp8 file = bf16 file with --precision fp8, bit for bit" ||
  bad "the fp8 file and the bf16 file with --precision fp8 differ"
OMP_NUM_THREADS=1 "$SP_BIN" run --model "$work/f.h5" "${ARGS[@]}" -o "$work/t1.h5" &&
  sp_same "$work/ref.h5" "$work/t1.h5" && ok "one thread: bit-identical to two" || bad "one thread differs"
for c in "2 micro" "2 block" "3 micro"; do
  set -- $c
  mpirun -np $1 "$SP_BIN" run --model "$work/f.h5" "${ARGS[@]}" --order $2 -o "$work/r$1$2.h5" \
    > "$work/r.log" 2>&1 && sp_same "$work/ref.h5" "$work/r$1$2.h5" &&
    ok "$1 ranks, order $2: bit-identical to one process" ||
    bad "$1 ranks, order $2: $(grep error "$work/r.log" | head -2)"
done
# Two experts (wan2.2-tiny): both experts' blocks in fp8.
"$SP_BIN" init --arch wan2.2-tiny --seed $S -q -o "$work/b22.h5" &&
  "$SP_BIN" init --arch wan2.2-tiny --seed $S --dtype fp8 -q -o "$work/f22.h5" &&
  sp_last_wins "$SP_BIN" run --model "$work/f22.h5" "${ARGS[@]}" --steps 4 -o "$work/e8.h5" &&
  sp_last_wins "$SP_BIN" run --model "$work/b22.h5" --precision fp8 "${ARGS[@]}" --steps 4 -o "$work/eb.h5" &&
  sp_same "$work/e8.h5" "$work/eb.h5" && ok "two experts: fp8 file = bf16 file with --precision fp8" ||
  bad "two experts in fp8: the fp8 file and --precision fp8 differ"
F=(forward --latent "$work/c.h5" --cond "$work/c.h5" --timestep 700)
"$SP_BIN" "${F[@]}" --model "$work/f.h5" -o "$work/p8.h5" 2> /dev/null &&
  "$SP_BIN" "${F[@]}" --model "$work/b.h5" --precision fp8 -o "$work/pb.h5" 2> /dev/null &&
  sp_same "$work/p8.h5" "$work/pb.h5" pred && ok "forward: fp8 file = bf16 file with --precision fp8" ||
  bad "forward in fp8 differs between the fp8 file and --precision fp8"

# fp8 against bf16 from the same noise: synth:wan2.1-tiny, 17 frames
# 128x128, 8 steps, CFG 5.
R=(--model synth:wan2.1-tiny:$S --cond "$work/c.h5" --frames 17 --size 128x128 --steps 8 --seed $S
   -q --no-preview)
"$SP_BIN" run "${R[@]}" -o "$work/s16.h5" && "$SP_BIN" run "${R[@]}" --precision fp8 -o "$work/s8.h5" ||
  { echo "FAIL synth runs"; exit 1; }
rel=$("$PY" -c 'import sys,h5py,numpy as np
a=h5py.File(sys.argv[1])["latents"][...].astype(np.float64); b=h5py.File(sys.argv[2])["latents"][...]
print("%.3e" % (np.linalg.norm(b-a)/np.linalg.norm(a)))' "$work/s16.h5" "$work/s8.h5")
echo "     synth:wan2.1-tiny, 8 steps, CFG 5, fp8 against bf16 from the same noise: latents' relative L2 $rel (random weights)"
"$PY" -c 'import sys; r=float(sys.argv[1]); sys.exit(0 if 0 < r < 0.2 else 1)' "$rel" &&
  ok "fp8 latents differ from bf16 by $rel" || bad "fp8 against bf16: relative L2 $rel"

# bench passes --precision to every run it starts.
"$SP_BIN" bench --model "$work/b.h5" --cond "$work/c.h5" --precision fp8 --dry-run -o "$work/bench" \
  2> /dev/null | grep -q -- "run .* --precision fp8" && ok "bench --precision fp8 reaches run" ||
  bad "bench --precision fp8: not on the run command line"

exit $fail
