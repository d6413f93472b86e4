#!/usr/bin/env bash
# The command line's rules (launch/cli.h, README "Commands"): run takes the
# Wan repository's generate.py and diffusers' spellings (the same latents,
# bit for bit, as the canonical flags); an unknown option gets the closest
# known one; an option given twice is refused unless it repeats (--lora);
# numbers are decimal with no blanks, no '+', no hex or inf; the help states
# the range the planner enforces; a video name on an output that is not a
# video is refused before any work, and run -o VIDEO --vae V writes the video.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_work_dir cli-rules
sp_seed
sp_python_with 'import h5py, numpy' 'h5py and numpy'
cd "$work" || exit 1
sp_tiny m.h5
sp_cond 16 c.h5
B0=("$SP_BIN" run --model m.h5 --cond c.h5 -q)
# (a small run: a case a build without the rule accepts stays quick)
B=("${B0[@]}" --frames 5 --size 32x32)

# ---- the ecosystem's spellings: the same run, bit for bit
"${B0[@]}" --steps 2 --frames 5 --size 32x48 --cfg 4 --shift 3 --seed 7 --sampler euler \
  -o canon.h5 2>canon.err
"${B0[@]}" --sample_steps 2 --frame_num 5 --size 48*32 --sample_guide_scale 4 --sample_shift 3 \
  --base_seed 7 --sample_solver euler --save_file wan.h5 2>wan.err
"${B0[@]}" --num_inference_steps 2 --num_frames 5 --size 32x48 --guidance_scale 4 --shift 3 \
  --seed 7 --sampler euler -o diffusers.h5 2>diffusers.err
if sp_same canon.h5 wan.h5 && sp_same canon.h5 diffusers.h5; then
  ok "generate.py and diffusers spellings: latents bit-identical to the canonical flags"
else
  bad "aliases: $(cat canon.err wan.err diffusers.err | head -5)"
fi
sp_refused "--negative_prompt is --negative" "--negative goes with --prompt" "${B[@]}" --negative_prompt x -o neg.h5

# ---- an unknown option: the closest known one
sp_refused "--stepz" "unknown option '--stepz'; did you mean --steps?" "${B[@]}" --stepz 2 -o u.h5
sp_refused "--sample-steps" "did you mean --sample_steps?" "${B[@]}" --sample-steps 2 -o u.h5
sp_refused "plan --gpumem" "did you mean --gpu-mem?" "$SP_BIN" plan --model m.h5 --gpumem 8gb
sp_refused "an ambiguous abbreviation" "is ambiguous" "${B[@]}" --sample 2 -o u.h5

# ---- an option given twice
sp_refused "-o twice" "--out is given twice ('a.h5', then 'b.h5')" "${B[@]}" -o a.h5 -o b.h5
sp_refused "--steps and its alias" "--steps is given twice" "${B[@]}" --steps 2 --sample_steps 3 -o a.h5
sp_refused "init --seed twice" "--seed is given twice" "$SP_BIN" init --arch wan2.1-tiny --seed 1 --seed 2 -o i.h5
sp_refused "decode --fps twice" "--fps is given twice" "$SP_BIN" decode --vae synth:wan2.1-vae-tiny --latents canon.h5 --fps 8 --fps 9 -o d.h5
"${B[@]}" --steps 2 --lora none1.st --lora none2.st -o l.h5 2>lora.err
grep -q "given twice" lora.err && bad "--lora is repeatable: $(cat lora.err)" ||
  ok "--lora repeats (refused for its missing file, not for the repeat)"
[ -e a.h5 ] || [ -e b.h5 ] || [ -e l.h5 ] && bad "a refused run wrote a file" || ok "nothing written"

# ---- numbers: decimal, no blanks, no hex, no inf; lists without empty items
printf 'x' >F
sp_refused "--steps ' 5'" "--steps: ' 5' is not an integer" "${B[@]}" --steps ' 5' -o n.h5
sp_refused "--steps '5 '" "--steps: '5 ' is not an integer" "${B[@]}" --steps '5 ' -o n.h5
sp_refused "--steps +5" "--steps: '+5' is not an integer" "${B[@]}" --steps +5 -o n.h5
sp_refused "--cfg 0x1p2 (a hex float)" "--cfg: '0x1p2' is not a number" "${B[@]}" --cfg 0x1p2 -o n.h5
sp_refused "--shift inf" "--shift: 'inf' is not a number" "${B[@]}" --shift inf -o n.h5
sp_refused "--cache 'teacache:0 '" "threshold" "${B[@]}" --cache 'teacache:0 ' -o n.h5
sp_refused "--cache 'teacache: 0'" "threshold" "${B[@]}" --cache 'teacache: 0' -o n.h5
sp_refused "--seed 0x10" "--seed: '0x10' is not an integer" "${B[@]}" --seed 0x10 -o n.h5
sp_refused "--lora F:0x10" "strength '0x10' is not a decimal number" "${B[@]}" --lora F:0x10 -o n.h5
sp_refused "--lora 'F: 1'" "strength ' 1' is not a decimal number" "${B[@]}" --lora 'F: 1' -o n.h5
sp_refused "--lora F:nan" "strength 'nan' is not a decimal number" "${B[@]}" --lora F:nan -o n.h5
sp_refused "--timesteps 1000,,500" "has an empty item" "${B[@]}" --timesteps 1000,,500 -o n.h5
sp_refused "--speed 1,2," "has an empty item" "${B[@]}" --speed 1,2, -o n.h5
sp_refused "--speed 2000 (the planner's limit)" "in (0, 1000]" "${B[@]}" --speed 2000 -o n.h5
sp_refused "decode --fps 16.5" "--fps: '16.5' is not an integer" "$SP_BIN" decode --vae synth:wan2.1-vae-tiny --latents canon.h5 --fps 16.5 -o d.h5
sp_refused "decode --fps 1e1" "--fps: '1e1' is not an integer" "$SP_BIN" decode --vae synth:wan2.1-vae-tiny --latents canon.h5 --fps 1e1 -o d.h5
sp_refused "bench --ranks 1,,2" "has an empty item" "$SP_BIN" bench --model m.h5 --cond c.h5 --ranks 1,,2 --dry-run -o sweep
sp_refused "bench --size 32x32," "has an empty item" "$SP_BIN" bench --model m.h5 --cond c.h5 --size 32x32, --dry-run -o sweep
sp_refused "plan --gpu-mem ' 8gb'" "blanks around it" "$SP_BIN" plan --model m.h5 --gpu-mem ' 8gb'
"$SP_BIN" run --help | grep -q "relative speeds in (0, 1000\]" && ok "run --help: --speed's range is the planner's" ||
  bad "run --help does not say (0, 1000] for --speed"
"$SP_BIN" run --help | grep -q "also --sample_steps" && ok "run --help names the aliases" ||
  bad "run --help does not name --sample_steps"
"$PY" -c 'import h5py; h5py.File("scalar.h5", "w")["latents"] = 1.0'
sp_refused "a scalar latents dataset" "has 0 dimensions (a scalar has none), expected 1.." \
  "$SP_BIN" decode --vae synth:wan2.1-vae-tiny --latents scalar.h5 -o d.h5
grep -q "expected 0" "$work/refused.err" && bad "a scalar's message says 'expected 0'" || ok "scalar message"

# ---- a video name on an output that is not a video
sp_refused "run -o out.mp4 without --vae" "-o out.mp4: a video file name" "${B[@]}" --steps 2 -o out.mp4
sp_refused "run --save-noise n.mkv" "--save-noise n.mkv: a video file name" "${B[@]}" --steps 2 -o s.h5 --save-noise n.mkv
sp_refused "forward -o p.webm" "--out p.webm: a video file name" "$SP_BIN" forward --model m.h5 --latent canon.h5 --cond c.h5 -t 500 -o p.webm
sp_refused "encode -o c.mov" "--out c.mov: a video file name" "$SP_BIN" encode --t5 synth:umt5-tiny --prompt x -o c.mov
sp_refused "init -o m.mp4" "--out m.mp4: a video file name" "$SP_BIN" init --arch wan2.1-tiny -o m.mp4
sp_refused "convert -o m.mp4" "--out m.mp4: a video file name" "$SP_BIN" convert F -o m.mp4
printf 'cond=c.h5 out=j.mp4\n' >jobs.txt
"$SP_BIN" run --model m.h5 -q --jobs jobs.txt --steps 2 --frames 5 --size 32x48 2>jobs.err
grep -q "jobs.txt:1: out=j.mp4: a video file name" jobs.err && [ ! -e j.mp4 ] &&
  ok "a jobs line's out=VIDEO without --vae: refused" || bad "jobs out=j.mp4: $(cat jobs.err)"
ls out.mp4 n.mkv p.webm c.mov m.mp4 j.mp4 2>/dev/null | grep -q . && bad "a refused output was written" ||
  ok "no refused output written"
# With --vae, -o VIDEO is the video: an FFmpeg file, or refused (exit 2)
# before any work where FFmpeg's libraries are missing; never HDF5.
"${B[@]}" --steps 2 --vae synth:wan2.1-vae-tiny -o v.mp4 2>v.err
rc=$?
if [ $rc -eq 0 ]; then
  [ -s v.mp4 ] && ! "$PY" -c 'import h5py, sys; sys.exit(0 if h5py.is_hdf5("v.mp4") else 1)' &&
    [ ! -e v.mp4.png ] && ok "run -o v.mp4 --vae: the video, no latents file" ||
    bad "run -o v.mp4 --vae wrote HDF5 or a preview"
elif [ $rc -eq 2 ] && grep -qi ffmpeg v.err && ! grep -q "step 1" v.err; then
  ok "run -o v.mp4 --vae: refused before any work (no FFmpeg here)"
else
  bad "run -o v.mp4 --vae: exit $rc: $(head -3 v.err)"
fi
exit $fail
