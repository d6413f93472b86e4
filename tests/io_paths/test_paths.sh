#!/usr/bin/env bash
# Paths users give (ranks/io/path_check.h), checked before any work:
#   - an output that is a device node or a FIFO is refused, the node stays;
#   - an output that is one of the inputs (model, cond, noise, latent, jobs
#     file, convert's checkpoint) is refused, compared by identity (./x.h5
#     is x.h5), and two --jobs lines naming one output are refused;
#   - an output that is a directory, a name the temporary name would push
#     past the filesystem's limit, or an unwritable place is refused before
#     anything runs (one error line, no plan, no steps, nothing left behind);
#   - an input that is a FIFO or a device (model, cond, noise, latent,
#     inventory, convert's input, inspect's model; --jobs a device) is
#     refused at once instead of blocking in open() or reading forever;
#     --jobs alone takes a FIFO, read as a stream that ends with its writer.
# Every refusal: exit 2, the error line names the flag and the path, and
# the directory is exactly as before (same names, inodes, types, sizes).
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir paths
T=$work
cd "$T" || exit 1

"$SP_BIN" init --arch wan2.1-tiny -q -o m.h5 || exit 1
SEED=${SP_SEED:-$(date +%s%N | cut -c10-18)}
echo "seed $SEED (SP_SEED replays it)"
"$PY" - "$SEED" "$SP_SRC/tests/convert" <<'PYEOF' || exit 1
import sys, h5py, numpy as np
sys.path.insert(0, sys.argv[2])
import stlib
r = np.random.default_rng(int(sys.argv[1]))
ctx = r.standard_normal((20, 4096)).astype(np.float32)
with h5py.File("cond.h5", "w") as f:
    f["context"] = ctx
    f["context_null"] = ctx[:7]
with h5py.File("noise.h5", "w") as f:
    f["noise"] = r.standard_normal((16, 3, 8, 6)).astype(np.float32)
with h5py.File("lat.h5", "w") as f:
    f["latent"] = r.standard_normal((16, 3, 8, 6)).astype(np.float32)
    f["context"] = ctx
cfg = dict(dim=256, ffn_dim=640, heads=2, layers=1, in_dim=16, out_dim=16, text_dim=96,
           freq_dim=256)
stlib.write_st("ck.safetensors", stlib.make_checkpoint(r, cfg, "official", "F32"))
PYEOF
mkfifo fifo fifo_out
# A failed case may have overwritten an input: restore them all, so each
# case fails or passes on its own.
mkdir .pristine && cp m.h5 cond.h5 noise.h5 lat.h5 ck.safetensors .pristine/
restore() { cp -f .pristine/* .; }
mkdir d
# Device nodes to write over (a fresh one per case, so one case's damage
# does not decide the next): only root may make one; otherwise a FIFO
# stands in (either used to be replaced by a regular file).
newdev() { mknod "$1" c 1 3 2>/dev/null || mkfifo "$1"; DEV=$1; }

snapshot() { find . -mindepth 1 -printf '%p %i %y %s\n' | sort; }

# refused DESC WANT CMD...: exit 2 within 10 s, exactly one stderr line (so
# no work was done: no plan, no step, no summary), containing WANT, and the
# directory unchanged.
refused() {
  local what=$1 want=$2; shift 2
  local before after out rc
  before=$(snapshot)
  out=$(sp_last_wins timeout 10 "$@" 2>&1 >/dev/null); rc=$?
  after=$(snapshot)
  [ "$before" = "$after" ] || restore
  if [ $rc -ne 2 ]; then bad "$what: exit $rc, expected 2: $(printf '%s' "$out" | head -3)"; return; fi
  if [ "$(printf '%s\n' "$out" | wc -l)" -ne 1 ]; then bad "$what: work ran or several lines: $(printf '%s' "$out" | head -4)"; return; fi
  case "$out" in *"$want"*) ;; *) bad "$what: message lacks '$want': $out"; return;; esac
  if [ "$before" != "$after" ]; then bad "$what: files changed: $(diff <(echo "$before") <(echo "$after") | head -4)"; return; fi
  ok "$what: $(printf '%s' "$out" | cut -c1-140)"
}

R=("$SP_BIN" run --model m.h5 --cond cond.h5 --frames 9 --size 64x48 --steps 2)
F=("$SP_BIN" forward --model m.h5 --latent lat.h5 --cond cond.h5 --timestep 500)

# a. device nodes and FIFOs as outputs
newdev dev1; refused "run -o a device node" "--out ./$DEV: is a" "${R[@]}" -o "./$DEV"
refused "run -o a FIFO" "--out fifo_out: is a FIFO" "${R[@]}" -o fifo_out
newdev dev2; refused "init -o a device node" "--out $DEV: is a" "$SP_BIN" init --arch wan2.1-tiny -o "$DEV"
newdev dev3; refused "forward -o a device node" "--out $DEV: is a" "${F[@]}" -o "$DEV"
newdev dev4; refused "run --save-noise a device node" "--save-noise $DEV: is a" "${R[@]}" -o o.h5 --save-noise "$DEV"
newdev dev5; refused "convert -o a device node" "--out $DEV: is a" "$SP_BIN" convert ck.safetensors -o "$DEV"

# b. an output that is an input, by identity
# (a copy of the model where a failure would overwrite it, so the next cases
# still have one)
cp m.h5 m2.h5
refused "run -o the model" "--out ./m2.h5: is the same file as --model m2.h5" "${R[@]}" --model m2.h5 -o ./m2.h5
rm -f m2.h5 m2.h5.png
refused "run -o the cond file" "--out cond.h5: is the same file as --cond cond.h5" "${R[@]}" -o cond.h5
refused "run -o the noise file" "is the same file as --noise" "${R[@]}" --noise noise.h5 -o "$T/noise.h5"
cp cond.h5 p.h5.png
refused "run preview onto the cond file" "--out (its preview) p.h5.png: is the same file as --cond" \
  "${R[@]}" --cond p.h5.png -o p.h5
rm p.h5.png
refused "run --save-noise the model" "--save-noise m.h5: is the same file as --model" "${R[@]}" -o o.h5 --save-noise m.h5
refused "run --trace the model" "--trace d/../m.h5: is the same file as --model" "${R[@]}" -o o.h5 --trace d/../m.h5
refused "forward -o its latent" "--out ./lat.h5: is the same file as --latent" "${F[@]}" -o ./lat.h5
refused "convert onto its input" "--out ./ck.safetensors: is the same file as convert ck.safetensors" \
  "$SP_BIN" convert ck.safetensors -o ./ck.safetensors

# --jobs lines: the bad line fails alone (exit 2 when every line is bad).
jobs_refused() { # DESC WANT JOBS-LINES...
  local what=$1 want=$2; shift 2
  printf '%s\n' "$@" > jobs.txt
  cp m.h5 mj.h5
  local before after out rc
  before=$(snapshot)
  out=$(timeout 20 "$SP_BIN" run --model mj.h5 --jobs jobs.txt -q 2>&1 >/dev/null); rc=$?
  after=$(snapshot)
  [ "$before" = "$after" ] || restore
  if [ $rc -ne 2 ]; then bad "$what: exit $rc, expected 2: $(printf '%s' "$out" | head -3)"; return; fi
  case "$out" in *"$want"*) ;; *) bad "$what: message lacks '$want': $out"; return;; esac
  if [ "$before" != "$after" ]; then bad "$what: files changed: $(diff <(echo "$before") <(echo "$after") | head -4)"; return; fi
  ok "$what: $(printf '%s' "$out" | grep error: | head -1 | cut -c1-140)"
}
J="frames=1 size=32x32 steps=1"
jobs_refused "jobs out= the model" "jobs.txt:1: out ./mj.h5: is the same file as --model" "cond=cond.h5 out=./mj.h5 $J"
jobs_refused "jobs out= the jobs file" "jobs.txt:1: out jobs.txt: is the same file as --jobs" "cond=cond.h5 out=jobs.txt $J"
jobs_refused "jobs out= its cond" "is the same file as jobs.txt:1: cond" "cond=cond.h5 out=d/../cond.h5 $J"
newdev dev6; jobs_refused "jobs out= a device node" "jobs.txt:1: out $DEV: is a" "cond=cond.h5 out=$DEV $J"
# (a line's inputs are checked when its job reads them: it fails alone)
jobs_refused "jobs cond= a FIFO" "fifo: is a FIFO" "cond=fifo out=o.h5 $J"
jobs_refused "jobs noise= a device" "/dev/zero: is a character device" "cond=cond.h5 noise=/dev/zero out=o.h5 $J"

# Two lines, one output spelled two ways: the first runs, the second fails.
printf '%s\n' "cond=cond.h5 out=o1.h5 $J" "cond=cond.h5 out=./o1.h5 seed=3 $J" > jobs.txt
out=$(timeout 60 "$SP_BIN" run --model m.h5 --jobs jobs.txt -q 2>&1 >/dev/null); rc=$?
if [ $rc -ne 0 ] && [ -f o1.h5 ] &&
   printf '%s' "$out" | grep -q 'jobs.txt:2: out=./o1.h5 is already the output of line 1'; then
  ok "jobs: o1.h5 and ./o1.h5 are one output (exit $rc)"
else
  bad "jobs: o1.h5 and ./o1.h5 not caught: exit $rc: $out"
fi
rm -f o1.h5 o1.h5.png jobs.txt

# c. outputs that cannot be written, refused before any work
refused "run -o a directory" "--out d: is a directory" "${R[@]}" -o d
refused "run -o DIR/ (a directory)" "--out d/: is a directory" "${R[@]}" -o d/
long=$(printf 'x%.0s' $(seq 1 246)).h5 # 249 bytes: fits, but its temporary name does not
refused "run -o a name whose temporary name is too long" "temporary name" "${R[@]}" -o "$long"
refused "run -o in a missing directory" "no/such" "${R[@]}" -o no/such/o.h5
refused "run -o under a file" "--out m.h5/o.h5" "${R[@]}" -o m.h5/o.h5
if [ "$(id -u)" -ne 0 ]; then
  mkdir ro && chmod 555 ro
  refused "run -o in a read-only directory" "--out ro/o.h5: cannot" "${R[@]}" -o ro/o.h5
  chmod 755 ro && rmdir ro
elif ! touch /sys/.sp-paths-probe 2>/dev/null; then
  # root passes access(2) checks; sysfs refuses to create files all the same
  refused "run -o where root cannot create" "--out /sys/o.h5: cannot" "${R[@]}" -o /sys/o.h5
else
  rm -f /sys/.sp-paths-probe
  echo "skip unwritable directory: root here can create files everywhere tried"
fi

# d. endless inputs
refused "run --model a FIFO" "--model fifo: is a FIFO" "${R[@]}" --model fifo -o o.h5
refused "run --cond a FIFO" "--cond fifo: is a FIFO" "${R[@]}" --cond fifo -o o.h5
refused "run --noise a FIFO" "--noise fifo: is a FIFO" "${R[@]}" --noise fifo -o o.h5
refused "run --noise a directory" "--noise d: is a directory" "${R[@]}" --noise d -o o.h5
# --jobs alone takes a named pipe, read as a stream: a writer that sends a
# bad line and goes away ends the run (exit 2, the line named), no hang.
out=$( (printf 'cond=cond.h5 out=fj.h5 frames=10\n' > fifo &) ; timeout 20 "$SP_BIN" run --model m.h5 --jobs fifo -q 2>&1 >/dev/null); rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "fifo:1: frames=10 is not" && [ ! -e fj.h5 ]; then ok "run --jobs a FIFO: read as a stream, its bad line refused, exit 2"
else bad "run --jobs a FIFO: exit $rc: $(printf '%s' "$out" | head -3)"; fi
refused "run --jobs /dev/zero" "--jobs /dev/zero: is a character device" "$SP_BIN" run --model m.h5 --jobs /dev/zero
refused "forward --latent a FIFO" "--latent fifo: is a FIFO" "${F[@]}" --latent fifo -o o.h5
refused "plan --inventory a FIFO" "--inventory fifo: is a FIFO" "$SP_BIN" plan --model m.h5 --inventory fifo
# bounded memory: the old reader grew without end on /dev/zero
refused "plan --inventory /dev/zero" "--inventory /dev/zero: is a character device" \
  bash -c 'ulimit -v 2000000; exec "$@"' _ "$SP_BIN" plan --model m.h5 --inventory /dev/zero
refused "plan --model a FIFO" "--model fifo: is a FIFO" "$SP_BIN" plan --model fifo --gpu-mem 24gb
refused "convert a FIFO" "convert fifo: is a FIFO" "$SP_BIN" convert fifo -o o.h5
refused "inspect a FIFO" "inspect fifo: is a FIFO" "$SP_BIN" inspect fifo

# The checks refuse only what they should: a plain run next to all this works.
if "${R[@]}" -q -o ./ok.h5 --save-noise ok_noise.h5 && [ -f ok.h5 ] && [ -f ok.h5.png ] &&
   [ -f ok_noise.h5 ] && ! ls -A | grep -q '\.tmp-'; then
  ok "a good run still writes ok.h5, its preview and the noise, no temporary left"
else
  bad "a good run failed"
fi
for d in dev1 dev2 dev3 dev4 dev5 dev6 fifo_out; do
  [ -c "$d" ] || [ -p "$d" ] || bad "$d is no longer a device node or FIFO"
done
exit $fail
