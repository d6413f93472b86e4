#!/usr/bin/env bash
# GPU sharing decided from identities exchanged over the node's ranks
# (test_gpu_share.c, under mpirun): 4 ranks (one GPU each, all on one, two
# and two) and 3 ranks (an odd node: the last pair is one rank alone).
set -u
. "$SP_SRC/tests/common/script.sh"
sp_mpi
sp_helper t comm_test_gpu_share
for n in 4 3; do
  if timeout 120 mpirun -np $n "$t"; then echo "ok   $n ranks"; else echo "FAIL $n ranks"; fail=1; fi
done
exit $fail
