#!/usr/bin/env bash
# What each command checks before its work, and what it writes: forward
# refuses a non-finite prediction (as run does) and writes nothing; encode
# refuses a prompt over 4095 bytes (run's rule) on --prompt, --negative and
# --prompts lines, a NUL byte in a --prompts line (FILE:LINE), and a
# --tokenizer with more pieces than the encoder's vocabulary, before it
# encodes; decode -q prints no info line, and a declared video past the
# workload limit is refused before anything is allocated, as run refuses a
# workload plan refuses; --log-dir files hold each rank's lines under -q;
# convert of a LoRA says to use --lora; bench checks every configuration
# (-o a file, a bad budget, device or --extra word) before running any.
set -u
. "$SP_SRC/tests/common/mpi_env.sh"
. "$SP_SRC/tests/common/script.sh"
sp_work_dir command-checks
sp_seed
sp_python_with 'import h5py, numpy, sentencepiece' 'h5py, numpy and sentencepiece'
cd "$work" || exit 1
sp_tiny m.h5
sp_cond 16 c.h5
"$PY" - "$SP_SRC" "$S" <<'PYEOF' || exit 1
import random, sys
import h5py, numpy as np
sys.path.insert(0, sys.argv[1] + "/tests/t5")
sys.path.insert(0, sys.argv[1] + "/tests/text")
sys.path.insert(0, sys.argv[1] + "/tests/convert")
sys.path.insert(0, sys.argv[1] + "/tests/lora")
import loralib, spm_parity, stlib, t5_parity
import sentencepiece as spm
seed = int(sys.argv[2])
rnd, rng = random.Random(seed), np.random.default_rng(seed)
# A latent the model's forward cannot keep finite (float32's largest values).
with h5py.File("huge_vals.h5", "w") as f:
    f["latent"] = np.full((16, 2, 4, 4), 3.4e38, np.float32)
# A tokenizer (600 pieces), a larger one (trained to 1500), an encoder of
# the small one's vocabulary (width 64), as a converted checkpoint.
prefix = spm_parity.train_t5_model(rnd, ".", lines=1500, threads=1)
pieces = spm.SentencePieceProcessor(model_file=prefix + ".model").get_piece_size()
spm.SentencePieceTrainer.train(input="corpus.txt", model_prefix="big", model_type="unigram",
                               vocab_size=1500, hard_vocab_limit=False, num_threads=1,
                               minloglevel=2, pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
assert spm.SentencePieceProcessor(model_file="big.model").get_piece_size() > pieces + 11
c = dict(vocab=pieces + 11, dim=64, dim_attn=64, ffn=32, heads=4, layers=1, buckets=32)
ent, _ = t5_parity.form_entries(t5_parity.make_weights(rng, c), "wan", b"")
stlib.write_st("t5.safetensors", ent)
# A LoRA of the tiny DiT.
cfg, _ = loralib.model_config("m.h5")
l = loralib.Lora("comfy")
l.pair(rng, "block", 0, "self_attn.q.weight", loralib.shapes(cfg)[("block", 0, "self_attn.q.weight")], 4)
l.write("x.safetensors")
# Latents declaring a video past every limit (storage never written).
with h5py.File("huge_decl.h5", "w") as f:
    f.create_dataset("latents", shape=(16, 10000, 1000, 1000), dtype="f4")
open("long.txt", "w").write("a fox " * 12000 + "\n")
open("nul.txt", "wb").write(b"a red fox\nsnow\x00 falls on the hill\n")
PYEOF
"$SP_BIN" convert t5.safetensors --tokenizer spiece.model -o t5.h5 2>conv.err ||
  { bad "convert the encoder: $(cat conv.err)"; exit 1; }

# ---- forward: a non-finite prediction is refused, nothing written
sp_refused_rc() { # NAME RC NEEDLE CMD...: like sp_refused, for exit RC
  local name=$1 want=$2 needle=$3 rc; shift 3
  "$@" >"$work/refused.out" 2>"$work/refused.err"; rc=$?
  [ $rc -eq "$want" ] || bad "$name: exit $rc, want $want: $(head -3 "$work/refused.err")"
  grep -qF -- "$needle" "$work/refused.err" && [ $rc -eq "$want" ] && ok "$name" ||
    bad "$name: no '$needle' in: $(head -3 "$work/refused.err")"
}
sp_refused_rc "forward: a non-finite prediction" 1 "the prediction holds a non-finite value" \
  "$SP_BIN" forward --model m.h5 --latent huge_vals.h5 --timestep 500 --cond c.h5 -o pred.h5
[ ! -e pred.h5 ] && ok "forward wrote no prediction" || bad "forward wrote pred.h5"

# ---- encode: limits checked before encoding
long=$(head -c 70000 long.txt)
sp_refused "encode --prompt of 70000 bytes" "--prompt: the text is 70000 bytes, longer than 4095" \
  "$SP_BIN" encode --t5 t5.h5 --prompt "$long" -o e1.h5
sp_refused "encode --negative of 70000 bytes" "--negative: the text is 70000 bytes, longer than 4095" \
  "$SP_BIN" encode --t5 t5.h5 --prompt "a fox" --negative "$long" -o e2.h5
sp_refused "encode --prompts with a line of 72000 bytes" "long.txt:1: the text is 72000 bytes" \
  "$SP_BIN" encode --t5 t5.h5 --prompts long.txt -o e3
sp_refused "encode --prompts with a NUL byte" "nul.txt:2: the line holds a NUL byte" \
  "$SP_BIN" encode --t5 t5.h5 --prompts nul.txt -o e4
sp_refused "encode --tokenizer larger than the vocabulary" "more than the encoder's vocabulary" \
  "$SP_BIN" encode --t5 t5.h5 --tokenizer big.model --prompt "a red fox" -o e5.h5
ls -d e1.h5 e2.h5 e3 e4 e5.h5 2>/dev/null | grep -q . && bad "a refused encode wrote" || ok "encode wrote nothing"
"$SP_BIN" encode --t5 t5.h5 --prompt "a red fox" -o e6.h5 2>e6.err && ok "encode of a short prompt" ||
  bad "encode: $(cat e6.err)"

# ---- decode: -q, and a declared workload past the limits
"$SP_BIN" run --model m.h5 --cond c.h5 --steps 2 --frames 5 --size 32x32 -q -o lat.h5 || bad "run for decode"
"$SP_BIN" decode --vae synth:wan2.1-vae-tiny --latents lat.h5 -q -o v.h5 2>dq.err
[ -s v.h5 ] && ! grep -v -e warning -e error dq.err | grep -q . && ok "decode -q: no info line" ||
  bad "decode -q printed: $(head -3 dq.err)"
sp_refused "decode of a declared [16, 10000, 1000, 1000]" "39997 frames is out of range: frames are 1..4097" \
  "$SP_BIN" decode --vae synth:wan2.1-vae-tiny --latents huge_decl.h5 -o big.h5
sp_refused "run --frames 4097 --size 65536x65536 (as plan refuses it)" "workload of 17196646400 tokens is outside 1..2^31" \
  "$SP_BIN" run --model m.h5 --cond c.h5 --frames 4097 --size 65536x65536 -o big.h5
grep -q "run:" "$work/refused.err" && bad "run started on a workload plan refuses" || ok "refused before any work"
sp_refused "plan refuses it with the same line" "workload of 17196646400 tokens is outside 1..2^31" \
  "$SP_BIN" plan --model m.h5 --frames 4097 --size 65536x65536 --gpu-mem 80gb

# ---- --log-dir under -q: every rank's file holds its lines
mpirun -np 2 "$SP_BIN" run --model m.h5 --cond c.h5 --steps 2 --frames 5 --size 32x32 -q \
  --log-dir logs -o logged.h5 2>ld.err || bad "run --log-dir: $(cat ld.err)"
[ -s logs/rank-0.log ] && [ -s logs/rank-1.log ] && grep -q "run: wrote logged.h5" logs/rank-1.log && grep -q "run: m.h5" logs/rank-0.log &&
  ok "--log-dir -q: each rank's file holds its lines" || bad "--log-dir files: $(wc -c logs/* 2>&1)"

# ---- convert of a LoRA
sp_refused "convert a LoRA" "is a LoRA" "$SP_BIN" convert x.safetensors -o lora.h5
grep -q -- "--lora x.safetensors" "$work/refused.err" && ok "the message says --lora" ||
  bad "convert a LoRA: $(cat "$work/refused.err")"

# ---- bench: every configuration checked before any runs
BB=("$SP_BIN" bench --model m.h5 --cond c.h5 --frames 5 --size 32x32 --dry-run)
sp_refused "bench -o an existing file (the model)" "--out m.h5: is a file" "${BB[@]}" -o m.h5
sp_refused "bench --budget garbage" "--budget:" "${BB[@]}" --budget garbage -o sweep
"${BB[@]}" --ranks 1,2 --budget 'cuda:1,2gb' -o sweep >ranks.txt 2>ranks.err
[ "$(wc -l <ranks.txt)" -eq 1 ] && grep -q -- "-np 2" ranks.txt &&
  grep -q "configuration 1 refused, not run: --budget cuda:1,2gb with --ranks 1" ranks.err &&
  ok "bench: a budget for 2 ranks on 1: that row refused, not run" ||
  bad "bench --ranks 1,2 with a 2-rank budget: $(cat ranks.txt ranks.err)"
sp_refused "bench --device tpu" "--device: 'tpu' is not auto, cpu or cuda" "${BB[@]}" --device tpu -o sweep
sp_refused "bench --extra --bogus" "unknown option '--bogus'" "${BB[@]}" --extra "--bogus" -o sweep
sp_refused "bench --extra sets --steps" "is --steps, an option bench sets" "${BB[@]}" --extra "--steps 3" -o sweep
sp_refused "bench --extra -q" "is --quiet, an option bench sets" "${BB[@]}" --extra "-q" -o sweep
"${BB[@]}" --budget auto --budget 0.9 --extra "--attn simple" -o sweep >lines.txt 2>bench.err
[ "$(wc -l <lines.txt)" -eq 2 ] && grep -q -- "--budget 0.9" lines.txt && grep -q -- "--attn simple" lines.txt &&
  [ ! -e sweep ] && ok "bench --dry-run: the checked command lines, nothing written" ||
  bad "bench --dry-run: $(cat lines.txt bench.err)"
exit $fail
