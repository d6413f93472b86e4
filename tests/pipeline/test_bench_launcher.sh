#!/usr/bin/env bash
# staticpipe bench --dry-run: the command lines a sweep runs, one a line.
# More than one rank goes under the launcher, the rank count spelled as the
# launcher takes it (srun: --ntasks=N, it has no -np; mpirun and mpiexec:
# -np N); one rank runs without it; words the shell would split are quoted;
# nothing is written.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_work_dir bench-launcher
# Every configuration is checked before any runs: the cond file exists.
cd "$work" && : >"c d.h5" || exit 1
# A run's options in their long names, as the job's table spells them.
RUN="$SP_BIN run --model synth:wan2.1-tiny --cond 'c d.h5' --budget auto --frames 5 --size 32x32 --steps 2 --cfg 5 --device auto --no-preview --probe-links --quiet --json"
lines() { # launcher -> the dry run's stdout
  "$SP_BIN" bench --model synth:wan2.1-tiny --cond "c d.h5" --ranks 1,2,4 --frames 5 \
    --size 32x32 --launcher "$1" --dry-run -o "$work/out" 2> "$work/err"
}
expect() { # name launcher-words count-words
  local got want
  got=$(lines "$2")
  want="$RUN --out $work/out/run-0.h5
$3 $RUN --out $work/out/run-1.h5
$4 $RUN --out $work/out/run-2.h5"
  if [ "$got" = "$want" ]; then ok "$1"; else bad "$1"; diff <(echo "$want") <(echo "$got"); cat "$work/err"; fi
}
expect "srun: --ntasks, no -np" "srun --mpi=pmix" "srun --mpi=pmix --ntasks=2" "srun --mpi=pmix --ntasks=4"
expect "srun by its path" "/usr/bin/srun" "/usr/bin/srun --ntasks=2" "/usr/bin/srun --ntasks=4"
expect "mpirun: -np" "mpirun --oversubscribe" "mpirun --oversubscribe -np 2" "mpirun --oversubscribe -np 4"
expect "mpiexec: -np" "mpiexec" "mpiexec -np 2" "mpiexec -np 4"
if [ -e "$work/out" ]; then bad "--dry-run created the output folder"; else ok "--dry-run writes nothing"; fi
if "$SP_BIN" bench --help | grep -q -- "--dry-run"; then ok "--help lists --dry-run"; else bad "--help lacks --dry-run"; fi
exit $fail
