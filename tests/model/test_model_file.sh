#!/usr/bin/env bash
# The model file: init -> inspect round trip, the documented sizes, and every
# validation failure refused with exit 2 and one line naming the file, the
# dataset and the check.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir model-file
T=$work

"$SP_BIN" init --arch wan2.1-tiny --seed 7 -q -o "$T/tiny.h5" || { echo "FAIL init"; exit 1; }
"$SP_BIN" init --arch wan2.1-tiny --seed 7 --dtype fp32 -q -o "$T/tiny32.h5" || { echo "FAIL init fp32"; exit 1; }

# Round trip: every dataset the file holds equals what the generator makes,
# checked independently from Python (same rule as synth.c, written again).
"$PY" - "$T/tiny.h5" "$T/tiny32.h5" <<'PYEOF' && ok "round trip bf16/fp32 against an independent generator" || bad "round trip"
import sys, h5py, numpy as np
M = (1 << 64) - 1
def sm(x):
    x = (x + 0x9E3779B97F4A7C15) & M
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M
    return x ^ (x >> 31)
def key(seed, name):
    h = 0xcbf29ce484222325
    for ch in name.encode():
        h = ((h ^ ch) * 0x100000001b3) & M
    return sm(sm(seed) ^ h)
def uni(k, i):
    return (sm(k ^ sm(i)) >> 11) / 9007199254740992.0 * 2 - 1
def to_bf16(x):
    u = np.array([x], np.float32).view(np.uint32)[0].item()
    return ((u + 0x7fff + ((u >> 16) & 1)) >> 16) & 0xffff
bf, f32 = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
assert bf.attrs["format"] in (b"staticpipe", "staticpipe")
for grp, prefix in (("embed", ""), ("blocks/0002", "blocks.2."), ("head", "")):
    for name, d in bf[grp].items():
        assert d.attrs["dtype"] in (b"bf16", "bf16"), name
        k = key(7, prefix + name)
        flat16, flat32 = d[...].reshape(-1), f32[grp][name][...].reshape(-1)
        fan = flat16.size // d.shape[0]
        if "modulation" in name: c, h = 0, 0.1
        elif "norm_q" in name or "norm_k" in name or name == "norm3.weight": c, h = 1, 0.1
        elif name.endswith(".bias"): c, h = 0, 0.05
        else:
            c, h = 0, (3.0 / fan) ** 0.5
            if name.startswith("time_projection"): h *= 0.25
        for i in (0, 1, flat16.size // 2, flat16.size - 1):
            want = np.float32(c + h * uni(k, i))
            assert flat32[i] == want, (name, i, flat32[i], want)
            assert flat16[i] == to_bf16(want), (name, i)
        x = flat32.astype(np.float64)
        assert np.abs(x).max() > 0 and np.isfinite(x).all(), name
PYEOF

# The published sizes (MODEL.md "Configs"): 14B blocks of 351,394,304 parameters = 702,788,608 bytes.
"$SP_BIN" inspect synth:wan2.1-14b --json > "$T/14b.json" || bad "inspect synth 14b"
"$PY" - "$T/14b.json" <<'PYEOF' && ok "inspect synth:wan2.1-14b sizes" || bad "inspect 14b sizes"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["arch"] == "wan2.1-t2v" and j["num_blocks"] == 40
assert j["block_bytes"] == [702788608] * 40, j["block_bytes"][:2]
assert j["block_params"] == 351394304
assert j["config"]["dim"] == 5120 and j["config"]["ffn_dim"] == 13824
assert j["total_bytes"] == 40 * 702788608 + j["embed_bytes"] + j["head_bytes"]
PYEOF
"$SP_BIN" inspect synth:wan2.1-1.3b --json | "$PY" -c '
import json, sys; j = json.load(sys.stdin)
assert j["block_bytes"] == [92881408] * 30 and j["block_params"] == 46440704' && ok "1.3b sizes" || bad "1.3b sizes"
"$SP_BIN" inspect --verify "$T/tiny.h5" > /dev/null 2>&1 && ok "verify of an intact file" || bad "verify intact"

# Every damaged file: exit 2 and one error line that names the file.
"$PY" "$SP_SRC/tests/model/corrupt.py" "$T/tiny.h5" "$T" || { echo "FAIL corrupt.py"; exit 1; }
check() { # case  expected-words  [extra flags]
  local f="$T/$1.h5" out rc
  out=$("$SP_BIN" inspect ${3:-} "$f" 2>&1 >/dev/null); rc=$?
  if [ $rc -ne 2 ]; then bad "$1: exit $rc, expected 2 ($out)"; return; fi
  if [ "$(printf '%s\n' "$out" | grep -c 'error:')" -ne 1 ]; then bad "$1: not exactly one error line: $out"; return; fi
  case "$out" in *"$f"*"$2"*) ok "$1: $out";; *) bad "$1: message lacks '$2': $out";; esac
}
check truncated "HDF5"
check flipped_byte "checksum mismatch" --verify
check wrong_dtype "dtype is not bf16 (expected 16-bit unsigned little-endian data and attribute dtype = \"bf16\"; found 32-bit float data"
check wrong_shape "shape is"
check missing_dataset "ffn.0.weight"
check chunked_compressed "chunked"
check external_link "link"
check soft_link "link"
check format_version "format_version 99"
check wrong_format "not a staticpipe model file"
check extra_dataset "lora_A.weight"
check bad_config "head_dim 128"
check missing_block "layers"
check rewritten_with_crc "root attribute checksum" --verify
check hard_link "hard-linked"
check extra_root "/lora: unexpected object"
check damaged_group "cannot read the file's groups (truncated or damaged)"
# Without --verify the file loads, and the checksum it reports (the one
# outputs record) is the one its datasets give, not the stored one.
sum() { "$SP_BIN" inspect --json "$1" 2>/dev/null | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["checksum"])'; }
a=$(sum "$T/tiny.h5"); b=$(sum "$T/rewritten_with_crc.h5")
[ -n "$a" ] && [ -n "$b" ] && [ "$a" != "$b" ] && ok "checksum of a rewritten file: $b, not $a" || bad "rewritten file reports checksum '$b' (original '$a')"

# Bad usage and a missing file: exit 2, no crash.
"$SP_BIN" inspect "$T/nope.h5" >/dev/null 2>&1; [ $? -eq 2 ] && ok "missing file" || bad "missing file"
"$SP_BIN" inspect synth:wan2.1-huge >/dev/null 2>&1; [ $? -eq 2 ] && ok "unknown preset" || bad "unknown preset"
"$SP_BIN" init --arch wan2.1-tiny --dtype fp16 -o "$T/x.h5" 2>/dev/null; [ $? -eq 2 ] && [ ! -e "$T/x.h5" ] && ok "bad --dtype" || bad "bad --dtype"
"$SP_BIN" init --bogus 2>/dev/null; [ $? -eq 2 ] && ok "unknown option" || bad "unknown option"

# An interrupted init leaves no file, and an existing file stays untouched.
# env --default-signal: a background job of a script starts with SIGINT and SIGQUIT
# ignored, which init (rightly) respects; a user's Ctrl-C is not ignored.
ulimit -c 0 # SIGQUIT would dump a core
for sig in INT TERM QUIT; do
  cp "$T/tiny.h5" "$T/keep.h5"; before=$(cksum < "$T/keep.h5")
  env --default-signal=INT,QUIT "$SP_BIN" init --arch wan2.1-14b -q -o "$T/keep.h5" & pid=$!
  sleep 1; kill -$sig $pid; wait $pid 2>/dev/null
  left=$(ls -A "$T" | grep -c '^\.keep\.h5\.tmp' || true)
  if [ "$(cksum < "$T/keep.h5")" = "$before" ] && [ "$left" -eq 0 ]; then ok "SIG$sig during init: old file kept, no temp left"
  else bad "SIG$sig during init (temp files left: $left)"; fi
  env --default-signal=INT,QUIT "$SP_BIN" init --arch wan2.1-14b -q -o "$T/fresh.h5" & pid=$!
  sleep 1; kill -$sig $pid; wait $pid 2>/dev/null
  [ -z "$(ls -A "$T" | grep -e '^fresh' -e '^\.fresh')" ] && ok "SIG$sig during init: no file" || bad "SIG$sig: file left"
done
[ $fail -eq 0 ] && echo "model file: all checks passed" || echo "model file: FAILED"
exit $fail
