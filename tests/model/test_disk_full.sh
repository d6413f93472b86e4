#!/usr/bin/env bash
# A full disk while a model file is written: init of umt5-tiny,
# wan2.1-vae-tiny and wan2.1-tiny and convert of a DiT, a VAE and a text
# encoder, each onto a small tmpfs filled so that the free space runs out at
# several points of the write (at the start, a quarter, half and three
# quarters in, and within the last pages, where only the final flush fails).
# Every one must exit 1 with an error naming the output, without a crash
# (HDF5 used to crash at exit on the file it could not close), and leave
# nothing behind. Needs root (mount) and python3 with h5py, numpy and
# sentencepiece (the shared inputs of tests/golden/inputs.py).
set -u
: "${SP_SRC:?}" "${SP_BIN:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python_with 'import h5py, numpy, sentencepiece' "h5py, numpy and sentencepiece"
sp_work_dir diskfull
mnt="$work/small"
mkdir -p "$mnt" "$work/in" "$work/ref" || exit 1
mount -t tmpfs -o size=1m tmpfs "$mnt" 2>/dev/null ||
  sp_skip "cannot mount a tmpfs here (needs root and mount rights): no full disk to write to"
trap 'umount "$mnt" 2>/dev/null; rm -rf "$work"' EXIT
umount "$mnt"
"$PY" "$SP_SRC/tests/golden/inputs.py" "$SP_BIN" "$work/in" >/dev/null || { echo "FAIL inputs"; exit 1; }

# NAME ARGS...: the command writing OUT (replaced by the output path).
cases=(
  "init_t5|init --arch umt5-tiny --seed 1 --tokenizer $work/in/spiece.model -q -o OUT"
  "init_vae|init --arch wan2.1-vae-tiny --seed 1 -q -o OUT"
  "init_dit|init --arch wan2.1-tiny --seed 1 -q -o OUT"
  "init_fp8|init --arch wan2.1-tiny --seed 1 --dtype fp8 -q -o OUT"
  "conv_dit|convert $work/in/src_dit.safetensors -q -o OUT"
  "conv_vae|convert $work/in/src_vae.safetensors -q -o OUT"
  "conv_t5|convert $work/in/src_t5.safetensors --tokenizer $work/in/spiece.model -q -o OUT"
)
for c in "${cases[@]}"; do
  name=${c%%|*}
  args=${c#*|}
  # shellcheck disable=SC2086
  "$SP_BIN" ${args//OUT/$work/ref/$name.h5} 2>/dev/null || { bad "$name: the reference write failed"; continue; }
  size=$(( $(stat -c "%b * %B" "$work/ref/$name.h5") ))
  rm -f "$work/ref/$name.h5"
  mount -t tmpfs -o size=$((size + 1048576)) tmpfs "$mnt" || { bad "$name: mount"; continue; }
  avail=$(df --output=avail -B1 "$mnt" | tail -1)
  for free in 0 4096 $((size / 4)) $((size / 2)) $((3 * size / 4)) $((size - 65536)) $((size - 8192)); do
    rm -f "$mnt/fill"
    [ $((avail - free)) -gt 0 ] && head -c $((avail - free)) /dev/zero >"$mnt/fill" 2>/dev/null
    # shellcheck disable=SC2086
    "$SP_BIN" ${args//OUT/$mnt/out.h5} >/dev/null 2>"$work/err"
    rc=$?
    left=$(ls -A "$mnt" | grep -v '^fill$' || true)
    if [ $rc -ne 1 ]; then
      bad "$name, $free bytes free: exit $rc, want 1 ($(tail -2 "$work/err"))"
    elif [ -n "$left" ]; then
      bad "$name, $free bytes free: left $left"
    elif ! grep -q "error: $mnt/out.h5" "$work/err"; then
      bad "$name, $free bytes free: no error line naming the output: $(cat "$work/err")"
    else
      ok "$name, $free of $size bytes free: exit 1, nothing left: $(grep -m1 error: "$work/err" | cut -c1-120)"
    fi
    rm -rf "${mnt:?}"/* "$mnt"/.[!.]* 2>/dev/null
  done
  umount "$mnt"
done
exit $fail
