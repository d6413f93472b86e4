#!/usr/bin/env bash
# Image to video gives bit-identical latents for any rank count and layout
# of the CPU backend: TI2V from a PNG through the Wan 2.2 VAE (latent frame
# 0 the image's, its tokens at timestep 0: a second time table every stage
# carries) on 1-3 pipeline ranks, with Ulysses (1x1x2: the tokens of frame
# 0 and of the next frame on one rank) and replicas (2x1x1); I2V from image
# latents (the conditioning y on stage 0) on 1-2 ranks and 1x1x2; and a
# --jobs file of a TI2V job with an image and one without, in flight
# together on 2 ranks, each equal to its own run.
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir i2v-ranks
sp_seed seed
"$PY" - "$work" "$seed" <<'PY' || exit 1
import sys
import h5py, numpy as np
from sptest import png_write
work, seed = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(seed)
png_write(f"{work}/img.png", rng.integers(0, 256, (50, 61, 3), dtype=np.uint8))
with h5py.File(f"{work}/cond.h5", "w") as f:
    f["context"] = rng.standard_normal((9, 4096)).astype(np.float32)
    f["context_null"] = rng.standard_normal((5, 4096)).astype(np.float32)
with h5py.File(f"{work}/lat.h5", "w") as f:
    f["latents"] = rng.standard_normal((16, 3, 6, 4)).astype(np.float32)
PY
same() { # NAME A B
  if sp_same "$2" "$3"; then ok "$1 bit-identical"; else bad "$1 differs"; fi
}
runs() { # TAG NP [LAYOUT] -- ARGS...
  local tag=$1 np=$2 layout=$3
  shift 4
  local lay=()
  [ "$layout" != - ] && lay=(--layout "$layout")
  if ! mpirun -np "$np" "$SP_BIN" run "$@" "${lay[@]}" --device cpu --no-preview -q \
       -o "$work/$tag.h5" >"$work/$tag.log" 2>&1; then
    cat "$work/$tag.log"; bad "$tag: exit non-zero"
  fi
}
ti2v=(--model "synth:wan2.2-ti2v-tiny:$seed" --cond "$work/cond.h5" --steps 3 --seed "$seed"
      --image "$work/img.png" --max-area 96*96 --vae "synth:wan2.2-vae-tiny:$seed")
runs t1 1 - -- "${ti2v[@]}" --frames 9
for n in 2 3; do
  runs "t$n" "$n" - -- "${ti2v[@]}" --frames 9
  same "TI2V image, $n pipeline ranks against 1" "$work/t1.h5" "$work/t$n.h5"
done
runs tu 2 1x1x2 -- "${ti2v[@]}" --frames 9
same "TI2V image, Ulysses 1x1x2 against 1 rank" "$work/t1.h5" "$work/tu.h5"
runs tr 2 2x1x1 -- "${ti2v[@]}" --frames 9
same "TI2V image, replicas 2x1x1 against 1 rank" "$work/t1.h5" "$work/tr.h5"
i2v=(--model "synth:wan2.2-i2v-tiny:$seed" --cond "$work/cond.h5" --steps 4 --seed "$seed"
     --image-latents "$work/lat.h5")
runs i1 1 - -- "${i2v[@]}"
runs i2 2 - -- "${i2v[@]}"
same "I2V image latents, 2 pipeline ranks against 1 (across the switch)" "$work/i1.h5" "$work/i2.h5"
runs iu 2 1x1x2 -- "${i2v[@]}"
same "I2V image latents, Ulysses 1x1x2 against 1 rank" "$work/i1.h5" "$work/iu.h5"
# Two TI2V jobs in flight together: one from the image (96x96), one of
# text alone at that size.
cat >"$work/jobs.txt" <<EOF2
cond=$work/cond.h5 out=$work/j1.h5 image=$work/img.png max-area=96*96
cond=$work/cond.h5 out=$work/j2.h5 size=96x96
EOF2
if ! mpirun -np 2 "$SP_BIN" run --model "synth:wan2.2-ti2v-tiny:$seed" --jobs "$work/jobs.txt" \
     --vae "synth:wan2.2-vae-tiny:$seed" --frames 9 --steps 3 --seed "$seed" --device cpu \
     --no-preview >"$work/jobs.log" 2>&1; then
  cat "$work/jobs.log"; bad "--jobs: exit non-zero"
fi
grep -q "2 jobs in flight together" "$work/jobs.log" && ok "the two TI2V jobs ran in flight together" ||
  { cat "$work/jobs.log"; bad "the two TI2V jobs did not run in flight together"; }
same "--jobs: the image's job against its own run" "$work/t1.h5" "$work/j1.h5"
runs s2 1 - -- --model "synth:wan2.2-ti2v-tiny:$seed" --cond "$work/cond.h5" --steps 3 \
  --seed "$seed" --frames 9 --size 96x96
same "--jobs: the text job against its own run" "$work/s2.h5" "$work/j2.h5"
exit $fail
