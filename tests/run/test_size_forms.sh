#!/usr/bin/env bash
# --size takes HEIGHTxWIDTH and the Wan repository's WIDTH*HEIGHT: 48*64 is
# the same run as 64x48, on the command line and in a --jobs line; a
# malformed size names both forms.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir run-size-forms
T=$work
S=$RANDOM
echo "seed $S"
"$SP_BIN" init --arch wan2.1-tiny --seed $S -q -o "$T/m.h5" || exit 1
"$PY" -c 'import sys, h5py, numpy as np
r = np.random.default_rng(int(sys.argv[2]))
with h5py.File(sys.argv[1], "w") as f:
    f["context"] = r.standard_normal((7, 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((5, 4096)).astype(np.float32)' "$T/c.h5" $S || exit 1
R=("$SP_BIN" run --model "$T/m.h5" --cond "$T/c.h5" --frames 5 --steps 2 --seed $S -q --no-preview)
"${R[@]}" --size 64x48 -o "$T/a.h5" || bad "64x48 failed"
"${R[@]}" --size '48*64' -o "$T/b.h5" || bad "48*64 failed"
printf 'cond=%s out=%s seed=%s size=48*64\n' "$T/c.h5" "$T/j.h5" $S > "$T/jobs.txt"
"$SP_BIN" run --model "$T/m.h5" --frames 5 --steps 2 -q --no-preview --jobs "$T/jobs.txt" || bad "jobs size=48*64 failed"
"$PY" -c 'import sys, h5py
a = [h5py.File(p)["latents"][...] for p in sys.argv[1:]]
assert a[0].shape == (16, 2, 8, 6), a[0].shape
assert all(x.shape == a[0].shape and x.tobytes() == a[0].tobytes() for x in a[1:])' "$T/a.h5" "$T/b.h5" "$T/j.h5" \
  && ok "64x48, 48*64 and size=48*64 give the same latents [16, 2, 8, 6]" || bad "the size forms differ"
out=$("${R[@]}" --size '48*' -o "$T/x.h5" 2>&1); rc=$?
[ $rc -eq 2 ] && printf '%s' "$out" | grep -q "HEIGHTxWIDTH (for example 480x832) or WIDTH\*HEIGHT (832\*480)" \
  && ok "malformed size: $out" || bad "malformed size (exit $rc): $out"
[ $fail -eq 0 ] && echo "size forms: all checks passed" || echo "size forms: FAILED"
exit $fail
