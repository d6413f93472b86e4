#!/usr/bin/env bash
# Runs staticpipe as a pipeline on this workstation: one rank per GPU.
#
#   launch/run-local.sh [-n RANKS] [--bin PATH] -- run --model M ... -o OUT
#   launch/run-local.sh run --model M --cond C -o OUT        (the -- is optional)
#
# RANKS defaults to the GPUs nvidia-smi -L lists (1 when there is none: the
# CPU backend). More ranks than cores or GPUs is allowed (--oversubscribe),
# e.g. a 4-stage pipeline on one GPU with --transport mpi. As root, Open MPI
# needs its two confirmation variables; they are set for you. NVLink
# multicast stays off (NCCL_NVLS_ENABLE=0), as everywhere in this project.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
n=
bin=
while [ $# -gt 0 ]; do
  case "$1" in
    -n|--ranks) n=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "run-local.sh: no staticpipe command given (try --help)" >&2; exit 2; }
if [ -z "$bin" ]; then
  for c in "$here/../build/staticpipe" "$(command -v staticpipe 2>/dev/null || true)"; do
    [ -n "$c" ] && [ -x "$c" ] && { bin=$c; break; }
  done
fi
[ -n "$bin" ] && [ -x "$bin" ] || { echo "run-local.sh: staticpipe not found: build it (launch/build.sh) or pass --bin PATH" >&2; exit 2; }
if [ -z "$n" ]; then
  n=0
  command -v nvidia-smi >/dev/null 2>&1 && n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  [ "$n" -ge 1 ] || n=1
fi
case "$n" in ''|*[!0-9]*|0) echo "run-local.sh: -n wants a positive number, got '$n'" >&2; exit 2 ;; esac
command -v mpirun >/dev/null || { echo "run-local.sh: mpirun not found (Open MPI): run launch/deps.sh" >&2; exit 2; }
export NCCL_NVLS_ENABLE=0
flags=(--oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x OMP_NUM_THREADS)
[ -n "${OMP_NUM_THREADS:-}" ] || export OMP_NUM_THREADS=$(( $(nproc) / n > 0 ? $(nproc) / n : 1 ))
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  flags+=(--allow-run-as-root)
fi
echo "run-local.sh: mpirun -np $n $bin $* (OMP_NUM_THREADS=$OMP_NUM_THREADS)" >&2
exec mpirun -np "$n" "${flags[@]}" "$bin" "$@"
