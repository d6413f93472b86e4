#!/usr/bin/env bash
# comm_alltoall / comm_alltoallv under mpirun -np 2, 3 and 4
# (test_alltoall.c checks every byte against its formula).
set -u
. "$SP_SRC/tests/common/script.sh"
sp_mpi
sp_helper t comm_test_alltoall
for n in 2 3 4; do
  if timeout 120 mpirun -np $n "$t"; then echo "ok   $n ranks"; else echo "FAIL $n ranks"; fail=1; fi
done
exit $fail
