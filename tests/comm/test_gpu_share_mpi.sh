#!/usr/bin/env bash
# GPU sharing decided from identities exchanged over the node's ranks
# (test_gpu_share.c, under mpirun): 4 ranks (one GPU each, all on one, two
# and two) and 3 ranks (an odd node: the last pair is one rank alone).
set -u
. "$SP_SRC/tests/common/mpi_env.sh"
t=${SP_BUILD:-}/tests/comm_test_gpu_share
if [ -z "${SP_BUILD:-}" ] || [ ! -x "$t" ]; then
  echo "SP_BUILD is not set to a build with tests/comm_test_gpu_share (ctest sets it)" >&2
  exit 1
fi
fail=0
for n in 4 3; do
  if timeout 120 mpirun -np $n "$t"; then echo "ok   $n ranks"; else echo "FAIL $n ranks"; fail=1; fi
done
exit $fail
