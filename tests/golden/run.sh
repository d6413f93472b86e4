#!/usr/bin/env bash
# The golden runs: a fixed set of commands on the tiny models whose outputs
# (model files, latents, predictions, contexts, videos, plans, inspections)
# must stay bit-identical across a refactoring. Not a ctest: it compares two
# builds, the change against its base (tests/golden/README.md).
#
#   tests/golden/run.sh BIN OUTDIR INPUTS     every output into OUTDIR
#
# INPUTS holds the shared inputs (tests/golden/inputs.py; made on first use
# with BIN). Each command's stdout goes to OUTDIR/NAME.out, its exit status to
# OUTDIR/status; stderr to OUTDIR/NAME.err (not compared: it holds timings).
set -u
bin=$(realpath "$1"); out=$2; in=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/python.sh"
sp_python_find 'import h5py, numpy, sentencepiece' || { echo "golden: no python3 with h5py, numpy, sentencepiece"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
mkdir -p "$out" "$in"
in=$(realpath "$in"); out=$(realpath "$out")
"$PY" "$here/inputs.py" "$bin" "$in" || exit 1
cd "$out" || exit 1
: >status
g() { # NAME CMD...: runs CMD, keeps its stdout and exit status
  local name=$1; shift
  "$@" >"$name.out" 2>"$name.err"
  echo "$name $?" >>status
}
mp() { local n=$1; shift; mpirun -np "$n" --timeout 300 "$@"; }

# Model files.
g init_dit "$bin" init --arch wan2.1-tiny --seed 1 -q -o dit.h5
g init_dit32 "$bin" init --arch wan2.1-tiny --seed 2 --dtype fp32 -q -o dit32.h5
g init_fp8 "$bin" init --arch wan2.1-tiny --seed 1 --dtype fp8 -q -o dit_fp8.h5
g init_a14b "$bin" init --arch wan2.2-tiny --seed 3 -q -o a14b.h5
g init_vae "$bin" init --arch wan2.1-vae-tiny --seed 1 -q -o vae.h5
g init_t5 "$bin" init --arch umt5-tiny --seed 1 --tokenizer "$in/spiece.model" -q -o t5.h5
g conv_dit "$bin" convert "$in/src_dit.safetensors" -q -o conv_dit.h5
g conv_dit32 "$bin" convert "$in/src_dit.safetensors" --dtype fp32 -q -o conv_dit32.h5
g conv_dit_fp8 "$bin" convert "$in/src_dit.safetensors" --dtype fp8 -q -o conv_dit_fp8.h5
g conv_vae "$bin" convert "$in/src_vae.safetensors" -q -o conv_vae.h5
g conv_t5 "$bin" convert "$in/src_t5.safetensors" --tokenizer "$in/spiece.model" -q -o conv_t5.h5
for m in dit.h5 a14b.h5 vae.h5 t5.h5 synth:wan2.1-14b synth:wan2.2-a14b synth:wan2.1-vae synth:umt5-xxl; do
  n=$(echo "$m" | tr ':.' '__')
  g "inspect_$n" "$bin" inspect "$m" --json --verify
done

# Sampling on the CPU backend.
C="$in/cond_a.h5"
# (--steps given once: an option given twice is refused)
R0=(--frames 9 --size 64x64 --device cpu -q)
R=("${R0[@]}" --steps 4)
for n in 1 2 3; do
  for s in unipc euler; do
    for c in 1 5; do
      g "run_np${n}_${s}_cfg$c" mp "$n" "$bin" run --model dit.h5 --cond "$C" "${R[@]}" \
        --sampler "$s" --cfg "$c" --seed 42 -o "run_np${n}_${s}_cfg$c.h5"
    done
  done
done
g run_1x2x2 mp 4 "$bin" run --model dit.h5 --cond "$C" "${R[@]}" --layout 1x2x2 --seed 5 -o run_1x2x2.h5
g run_2x1x1 mp 2 "$bin" run --model dit.h5 --cond "$C" "${R[@]}" --layout 2x1x1 --seed 5 -o run_2x1x1.h5
g run_fp32 "$bin" run --model dit32.h5 --cond "$in/cond_b.h5" "${R[@]}" --seed 6 -o run_fp32.h5
g run_fp8 "$bin" run --model dit_fp8.h5 --cond "$C" "${R[@]}" --seed 7 -o run_fp8.h5
g run_prec_fp8 "$bin" run --model dit.h5 --cond "$C" "${R[@]}" --precision fp8 --seed 7 -o run_prec_fp8.h5
g run_a14b mp 2 "$bin" run --model a14b.h5 --cond "$C" "${R0[@]}" --steps 6 --seed 8 -o run_a14b.h5
g run_lora "$bin" run --model dit.h5 --cond "$C" "${R[@]}" --lora "$in/lora.safetensors:0.8" --seed 9 -o run_lora.h5
g run_lora_bypass mp 2 "$bin" run --model dit.h5 --cond "$C" "${R[@]}" --lora "$in/lora.safetensors:0.8" \
  --lora-mode bypass --seed 9 -o run_lora_bypass.h5
g run_cache "$bin" run --model dit.h5 --cond "$C" "${R0[@]}" --steps 10 --cache magcache:0.5 --seed 10 -o run_cache.h5
g run_stream mp 2 "$bin" run --model dit.h5 --cond "$C" "${R[@]}" --stream-frac 0.5 --order block --seed 11 -o run_stream.h5
g run_sched "$bin" run --model dit.h5 --cond "$C" "${R[@]}" --timesteps 1000,750,500,250 --seed 12 \
  --save-noise run_sched_noise.h5 -o run_sched.h5
g run_latent "$bin" run --model dit.h5 --cond "$C" "${R[@]}" --seed 13 -o run_latent.latent
g run_video "$bin" run --model dit.h5 --cond "$C" "${R[@]}" --seed 14 -o run_video.h5 --vae vae.h5 --video run_video_v.h5
cat >jobs.txt <<JOBS
cond=$C out=job1.h5 seed=1
cond=$in/cond_b.h5 out=job2.h5 seed=2 size=32x48 steps=3 sampler=euler
cond=$C out=job3.h5 seed=3 cfg=1 lora=$in/lora.safetensors:0.5
JOBS
g run_jobs mp 2 "$bin" run --model dit.h5 --jobs jobs.txt --frames 9 --size 64x64 --steps 4 --device cpu -q
g forward "$bin" forward --model dit.h5 --latent "$in/latent.h5" --timestep 900 --cond "$C" --device cpu -o forward.h5

# The other networks.
g encode "$bin" encode --t5 t5.h5 --prompt "a cat in the city at night" -o encode.h5
g encode_conv "$bin" encode --t5 conv_t5.h5 --prompt "slow motion over the mountain" --negative "light" -o encode_conv.h5
g decode "$bin" decode --vae vae.h5 --latents run_np1_unipc_cfg5.h5 -q -o decode.h5
g decode_tile "$bin" decode --vae conv_vae.h5 --latents run_np1_euler_cfg1.h5 --tile 32x32 -q -o decode_tile.h5

# Plans.
for l in pipeline auto 2x2x1; do
  g "plan_$l" "$bin" plan --model synth:wan2.1-14b --ranks 4 --gpu-mem 24gb --size 480x832 --layout "$l" --json
done
g plan_a14b "$bin" plan --model synth:wan2.2-a14b --ranks 2 --gpu-mem 40gb --size 480x832
g plan_fp8 "$bin" plan --model synth:wan2.1-14b --ranks 1 --gpu-mem 80gb --precision fp8 --size 720x1280
echo "golden: $(wc -l <status) commands, $(awk '$2 != 0' status | wc -l) non-zero exits, outputs in $out"
